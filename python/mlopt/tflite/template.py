"""A built .tflite as a template: the same graph with other values in its
named constant tensors, without building the flatbuffer again.

Building a policy's graph packs every bucket boundary one element at a time
(tens of milliseconds); ES writes dozens of candidates per iteration that
differ only in their weights. A constant's bytes live in a uint8 vector of
fixed length, so the flatbuffer's layout does not depend on the values:
replacing the bytes of a constant by an array of the same dtype and shape
gives exactly the bytes a fresh build would.

    t = ConstantTemplate(data, ["dense_0/kernel", "dense_0/bias"])   # data: a build with some values
    t.with_constants([w0, b0])                                         # the build with w0, b0

``cached_build`` keeps templates per structure key (what the graph depends
on besides the constants' values), most recently used first."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from .schema import schema


class ConstantTemplate:
    """``data``: a finished model; ``names``: tensors whose constant bytes
    may be replaced (each must own a non-empty buffer)."""

    def __init__(self, data: bytes, names: Sequence[str]):
        s = schema()
        model = s.Model.GetRootAs(data, 0)
        sub = model.Subgraphs(0)
        where = {}
        for t in range(sub.TensorsLength()):
            tensor = sub.Tensors(t)
            name = tensor.Name().decode()
            if name in names:
                buf = model.Buffers(tensor.Buffer())
                where[name] = (buf._tab.Vector(buf._tab.Offset(4)), buf.DataLength())
        missing = [n for n in names if n not in where or where[n][1] == 0]
        if missing:
            raise ValueError(f"no constant bytes for tensor {missing[0]!r} in the template")
        self.data = bytes(data)
        self.spans = [where[n] for n in names]

    def with_constants(self, arrays: Sequence[np.ndarray]) -> bytes:
        """The model with ``arrays[i]``'s bytes in the i-th named constant
        (each exactly as many bytes as the template's)."""
        if len(arrays) != len(self.spans):
            raise ValueError(f"{len(arrays)} arrays for {len(self.spans)} constants")
        out = bytearray(self.data)
        for (start, n), a in zip(self.spans, arrays):
            raw = np.ascontiguousarray(a).tobytes()
            if len(raw) != n:
                raise ValueError(f"a constant of {len(raw)} bytes where the template has {n}")
            out[start:start + n] = raw
        return bytes(out)

    def holds(self, arrays: Sequence[np.ndarray]) -> bool:
        """Whether the template's constants are exactly these arrays' bytes."""
        return all(self.data[s:s + n] == np.ascontiguousarray(a).tobytes() for (s, n), a in zip(self.spans, arrays))


_TEMPLATES: OrderedDict[tuple, ConstantTemplate] = OrderedDict()
_KEEP = 8
_LOCK = threading.Lock()


def cached_build(key: tuple, build: Callable[[], bytes], names: Sequence[str], arrays: Sequence[np.ndarray]) -> bytes:
    """``build()``'s bytes for a graph whose constants ``names`` hold
    ``arrays``: built once per ``key`` (everything else the graph depends
    on), then patched. The first build is checked to hold ``arrays`` where
    the template says, so a wrong ``names`` fails at once, not silently."""
    with _LOCK:
        t = _TEMPLATES.get(key)
        if t is not None:
            _TEMPLATES.move_to_end(key)
    if t is not None:
        return t.with_constants(arrays)
    data = build()
    t = ConstantTemplate(data, names)
    if not t.holds(arrays):
        raise ValueError("the built model does not hold the given constants where the template locates them")
    with _LOCK:
        _TEMPLATES[key] = t
        while len(_TEMPLATES) > _KEEP:
            _TEMPLATES.popitem(last=False)
    return data

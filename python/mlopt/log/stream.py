"""Logs and interactive streams read incrementally, record by record.

:class:`StreamDecoder` is the one decoder of stream events: it turns bytes,
fed as they arrive, into a header, context switches and
:class:`Observation` objects. :class:`LogStream` reads a file, pipe or
descriptor with it; the interactive host (``mlopt.compiler.interactive``)
feeds it what a compiler sends.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Sequence

import numpy as np

from .._native import core
from ..errors import LogFormatError
from .header import LogHeader, TensorSpec


class StreamSchema:
    """The layout of one stream's observations, from its header."""

    def __init__(self, header: LogHeader, offsets: Sequence[int]):
        self.header = header
        self.features = header.features
        self.score = header.score
        self.advice = header.advice
        self.offsets = list(offsets)
        self.index: dict[str, int] = {}
        for i, spec in enumerate(self.features):
            self.index.setdefault(spec.name, i)


class Observation:
    """One observation from a stream: its context, number, features and score."""

    __slots__ = ("context", "id", "payload", "score_bytes", "schema")

    def __init__(self, schema: StreamSchema, context: str, id: int, payload: bytes, score: bytes | None):
        self.schema = schema
        self.context = context
        self.id = id
        self.payload = payload
        self.score_bytes = score

    def __getitem__(self, key: str | int) -> np.ndarray:
        i = key if isinstance(key, int) else self.schema.index[key]
        spec = self.schema.features[i]
        offset = self.schema.offsets[i]
        return np.frombuffer(self.payload, spec.dtype, spec.element_count, offset).reshape(spec.shape)

    @property
    def features(self) -> dict[str, np.ndarray]:
        return {s.name: self[i] for i, s in enumerate(self.schema.features)}

    @property
    def score(self) -> np.ndarray | None:
        spec = self.schema.score
        if self.score_bytes is None or spec is None:
            return None
        return np.frombuffer(self.score_bytes, spec.dtype).reshape(spec.shape)

    def __repr__(self) -> str:
        return f"<mlopt.Observation {self.id} of context {self.context!r}>"


class StreamHeader:
    """Event: the stream's header arrived (``schema`` describes its records)."""

    __slots__ = ("schema",)

    def __init__(self, schema: StreamSchema):
        self.schema = schema


class ContextSwitch:
    """Event: the stream switched to context ``name``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class StreamDecoder:
    """Bytes in, events out: :class:`StreamHeader`, :class:`ContextSwitch` and
    :class:`Observation`, each as soon as its last byte has been fed.

    Malformed input raises :class:`mlopt.LogFormatError` with the byte offset
    counted from the first byte fed.
    """

    def __init__(self):
        self._parser = core().LogParser()
        self.schema: StreamSchema | None = None

    def feed(self, data: bytes) -> list:
        events = []
        for raw in self._parser.feed(data):
            kind = raw[0]
            if kind == "observation":
                _, ctx, oid, payload, score = raw
                events.append(Observation(self.schema, self._parser.contexts[ctx], oid, payload, score))
            elif kind == "context":
                events.append(ContextSwitch(self._parser.contexts[raw[1]]))
            else:  # header
                p = self._parser
                self.schema = StreamSchema(LogHeader(tuple(p.features), p.score, p.advice), p.feature_offsets)
                events.append(StreamHeader(self.schema))
        return events

    def finish(self) -> None:
        """The input ended: raises if it stopped inside a record."""
        self._parser.finish()

    @property
    def has_header(self) -> bool:
        return self._parser.has_header

    @property
    def contexts(self) -> list[str]:
        return self._parser.contexts

    @property
    def offset(self) -> int:
        return self._parser.offset

    @property
    def pending_bytes(self) -> int:
        return self._parser.pending_bytes


class LogStream:
    """Reads a log or an interactive stream incrementally (file, pipe, FIFO).

    ``source`` is a path, an open binary file, or a file descriptor. Records
    are returned as soon as their bytes have arrived, so this can drive an
    interactive compiler that waits for a reply after each observation::

        with mlopt.LogStream(path) as stream:
            for obs in stream:
                print(obs.context, obs.id, obs["callee_users"])

    ``contexts`` lists every context seen so far, including empty ones.
    """

    def __init__(self, source, *, chunk_size: int = 1 << 16, allow_truncated: bool = False):
        self._owned = None
        self.name = None
        if isinstance(source, int):
            self._read = lambda n: os.read(source, n)
        elif isinstance(source, (str, os.PathLike)):
            self.name = os.fspath(source)
            self._owned = open(source, "rb", buffering=0)
            self._read = self._owned.read
        elif hasattr(source, "read1"):
            self.name = getattr(source, "name", None)
            self._read = source.read1
        elif hasattr(source, "read"):
            self.name = getattr(source, "name", None)
            self._read = source.read
        else:
            raise TypeError("LogStream needs a path, a binary file or a file descriptor")
        self._decoder = StreamDecoder()
        self._chunk = chunk_size
        self._allow_truncated = allow_truncated
        self._events: deque = deque()
        self._eof = False
        self.truncated_bytes = 0

    def _located(self, e: LogFormatError) -> LogFormatError:
        return e.with_path(self.name) if self.name else e

    def _fill(self) -> bool:
        """Reads one chunk; False at end of input."""
        if self._eof:
            return False
        data = self._read(self._chunk)
        if not data:
            self._eof = True
            try:
                self._decoder.finish()
            except LogFormatError as e:
                if not self._allow_truncated:
                    raise self._located(e) from None
                self.truncated_bytes = self._decoder.pending_bytes
            return False
        try:
            self._events.extend(self._decoder.feed(data))
        except LogFormatError as e:
            raise self._located(e) from None
        return True

    @property
    def header(self) -> LogHeader | None:
        """The header, reading until it has arrived (None for empty input)."""
        while not self._decoder.has_header and self._fill():
            pass
        return self._decoder.schema.header if self._decoder.schema else None

    @property
    def features(self) -> list[TensorSpec]:
        return list(self.header.features) if self.header else []

    @property
    def score(self) -> TensorSpec | None:
        return self.header.score if self.header else None

    @property
    def advice(self) -> TensorSpec | None:
        return self.header.advice if self.header else None

    @property
    def contexts(self) -> list[str]:
        return self._decoder.contexts

    @property
    def offset(self) -> int:
        """Bytes parsed so far."""
        return self._decoder.offset

    def read_observation(self) -> Observation | None:
        """The next observation, or None at end of input."""
        while True:
            while self._events:
                event = self._events.popleft()
                if isinstance(event, Observation):
                    return event
            if not self._fill():
                return None

    def __iter__(self) -> Iterator[Observation]:
        while (obs := self.read_observation()) is not None:
            yield obs

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> LogStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""Reading a .tflite model (or a ModelUnderTraining directory) into plain
Python: tensors, operators by name, signature inputs and outputs, constants.

    m = read_model("model_dir")          # model.tflite + output_spec.json
    m.inputs                             # [(signature name, tensor index), ...]
    m.op_names[m.ops[0].opcodeIndex]     # "BUCKETIZE"

A file that is not a readable model raises :class:`ModelFormatError`
naming the file and what is wrong.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from .._native import core
from ..errors import ModelFormatError
from .schema import schema

# TFLite TensorType -> (C++ type, numpy dtype, LLVM TensorSpec type name)
TYPES = {
    0: ("float", np.float32, "float"),
    2: ("int32_t", np.int32, "int32_t"),
    3: ("uint8_t", np.uint8, "uint8_t"),
    4: ("int64_t", np.int64, "int64_t"),
    6: ("bool", np.bool_, "bool"),
    7: ("int16_t", np.int16, "int16_t"),
    9: ("int8_t", np.int8, "int8_t"),
    10: ("double", np.float64, "double"),
}


class TfliteModel:
    """One subgraph of a .tflite model, with its signature and output spec."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.path = path
        s = self.s = schema()
        model_file = path / "model.tflite" if path.is_dir() else path
        self.output_spec = None
        if path.is_dir():
            spec_file = path / "output_spec.json"
            try:
                self.output_spec = json.loads(spec_file.read_text())
            except FileNotFoundError:
                raise ModelFormatError(f"{spec_file}: missing (a model directory needs output_spec.json)") from None
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ModelFormatError(f"{spec_file}: not JSON: {e}") from None
        try:
            buf = model_file.read_bytes()
        except FileNotFoundError:
            raise ModelFormatError(f"{model_file}: no such model file") from None
        if len(buf) < 8 or buf[4:8] != b"TFL3":
            raise ModelFormatError(f"{model_file}: not a .tflite model (no TFL3 identifier)")
        # The C++ structural verifier first: the same check the plugin makes
        # before LiteRT, and the flatbuffers code below then never reads garbage.
        problem = core().tflite_model_problem(buf)
        if problem:
            raise ModelFormatError(f"{model_file}: cannot parse the .tflite flatbuffer: it is truncated or "
                                   f"corrupt ({problem})")
        try:
            self.model = s.ModelT.InitFromObj(s.Model.GetRootAs(buf, 0))
            sub = self.model.subgraphs[0]
            self.tensors = sub.tensors
            self.ops = sub.operators or []
        except (struct.error, IndexError, TypeError, AttributeError):
            raise ModelFormatError(f"{model_file}: cannot parse the .tflite flatbuffer: it points outside its "
                                   f"{len(buf)} bytes or misses required tables (truncated or corrupt)") from None
        except Exception as e:  # the generated flatbuffers code raises assorted errors on garbage
            raise ModelFormatError(f"{model_file}: cannot parse the .tflite flatbuffer: {e}") from None
        if len(self.model.subgraphs) != 1:
            raise ModelFormatError(f"{model_file}: {len(self.model.subgraphs)} subgraphs (only one is supported)")
        self.file = model_file
        names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
        self.op_names = []
        for code in self.model.operatorCodes or []:
            value = max(code.builtinCode, code.deprecatedBuiltinCode)
            self.op_names.append(names.get(value, f"builtin #{value}") if not code.customCode
                                 else f"custom '{code.customCode.decode(errors='replace')}'")
        sig = (self.model.signatureDefs or [None])[0]
        if sig is not None:
            self.inputs = [(m.name.decode("utf-8", "replace"), m.tensorIndex) for m in sig.inputs]
            self.outputs = [(m.name.decode("utf-8", "replace"), m.tensorIndex) for m in sig.outputs]
        else:
            self.inputs = [(self.name(i), i) for i in sub.inputs]
            self.outputs = [(self.name(i), i) for i in sub.outputs]

    def name(self, t: int) -> str:
        n = self.tensors[t].name
        return n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n)

    def type_entry(self, t: int) -> tuple:
        kind = self.tensors[t].type
        if kind not in TYPES:
            raise ModelFormatError(f"{self.file}: tensor '{self.name(t)}' has an unsupported element type ({kind})")
        return TYPES[kind]

    def shape(self, t: int) -> list[int]:
        shape = self.tensors[t].shape
        return [] if shape is None else [int(d) for d in shape]

    def size(self, t: int) -> int:
        return int(np.prod(self.shape(t), dtype=np.int64)) if self.shape(t) else 1

    def constant(self, t: int):
        """The constant's values (numpy, the tensor's shape), or None for a computed tensor."""
        buf = self.model.buffers[self.tensors[t].buffer]
        if buf.data is None or len(buf.data) == 0:
            if getattr(buf, "offset", 0) > 1:
                raise ModelFormatError(f"{self.file}: tensor '{self.name(t)}' uses an external buffer (unsupported)")
            return None
        dtype = self.type_entry(t)[1]
        return np.frombuffer(bytes(np.asarray(buf.data, dtype=np.uint8)), dtype=dtype).reshape(self.shape(t))


def read_model(path: str | Path) -> TfliteModel:
    """A .tflite file or a model directory (model.tflite + output_spec.json)."""
    return TfliteModel(path)

"""A small .tflite graph builder: flatbuffers + the schema shipped in ai-edge-litert.

No TensorFlow. Conventions followed (the converter's): buffer 0 is the empty
sentinel, each constant tensor owns one buffer, operator codes carry both
``builtinCode`` and ``deprecatedBuiltinCode``, the model has one subgraph and
one SignatureDef, and the file identifier is ``TFL3``.

    g = GraphBuilder()
    x = g.input("action_callee_users", "action_callee_users:0", np.int64, [1])
    y = g.op("CAST", [x], np.float32, [1], CastOptions(...))
    g.output("inlining_decision", y)
    data = g.finish()
"""

from __future__ import annotations

import numpy as np

from .schema import schema

_DTYPES = {
    np.dtype(np.float32): "FLOAT32",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.int8): "INT8",
    np.dtype(np.float64): "FLOAT64",
}


class GraphBuilder:
    """Builds one subgraph with a signature; tensors are referred to by index."""

    def __init__(self, signature_key: str = "serving_default", description: str = "mlopt"):
        self._s = schema()
        self._tensors: list = []
        self._buffers: list = [self._s.BufferT()]  # buffer 0: empty sentinel
        self._ops: list = []
        self._opcodes: dict[str, int] = {}
        self._codes: list = []
        self._inputs: list[tuple[str, int]] = []
        self._outputs: list[tuple[str, int]] = []
        self._signature_key = signature_key
        self._description = description

    # -- tensors ---------------------------------------------------------------
    def _tensor(self, name: str, dtype, shape, buffer: int = 0) -> int:
        t = self._s.TensorT()
        t.name = name
        t.type = getattr(self._s.TensorType, _DTYPES[np.dtype(dtype)])
        t.shape = np.asarray(shape, dtype=np.int32)
        t.buffer = buffer
        self._tensors.append(t)
        return len(self._tensors) - 1

    def input(self, signature_name: str, tensor_name: str, dtype, shape) -> int:
        index = self._tensor(tensor_name, dtype, shape)
        self._inputs.append((signature_name, index))
        return index

    def const(self, name: str, value) -> int:
        value = np.ascontiguousarray(value)
        buf = self._s.BufferT()
        buf.data = np.frombuffer(value.tobytes(), dtype=np.uint8)
        self._buffers.append(buf)
        return self._tensor(name, value.dtype, value.shape, len(self._buffers) - 1)

    def output(self, signature_name: str, tensor: int) -> None:
        self._outputs.append((signature_name, tensor))

    # -- operators -------------------------------------------------------------
    def op(self, code: str, inputs: list[int], dtype, shape, options=None, name: str | None = None) -> int:
        """Append operator `code` (a BuiltinOperator name); returns its output tensor."""
        out = self._tensor(name or f"{code.lower()}_{len(self._ops)}", dtype, shape)
        if code not in self._opcodes:
            oc = self._s.OperatorCodeT()
            value = getattr(self._s.BuiltinOperator, code)
            oc.builtinCode = value
            oc.deprecatedBuiltinCode = min(value, 127)  # PLACEHOLDER_FOR_GREATER_OP_CODES
            oc.version = 1
            self._opcodes[code] = len(self._codes)
            self._codes.append(oc)
        op = self._s.OperatorT()
        op.opcodeIndex = self._opcodes[code]
        op.inputs = np.asarray(inputs, dtype=np.int32)
        op.outputs = np.asarray([out], dtype=np.int32)
        if options is not None:
            op.builtinOptionsType = getattr(self._s.BuiltinOptions, type(options).__name__[:-1])
            op.builtinOptions = options
        self._ops.append(op)
        return out

    def options(self, kind: str, **fields):
        """An option table, e.g. options("FullyConnectedOptions", fusedActivationFunction=1)."""
        obj = getattr(self._s, kind + "T")()
        for key, value in fields.items():
            if not hasattr(obj, key):
                raise AttributeError(f"{kind} has no field {key!r}")
            setattr(obj, key, value)
        return obj

    # -- serialization -----------------------------------------------------------
    def finish(self) -> bytes:
        import flatbuffers

        s = self._s
        sub = s.SubGraphT()
        sub.tensors = self._tensors
        sub.inputs = np.asarray([i for _, i in self._inputs], dtype=np.int32)
        sub.outputs = np.asarray([i for _, i in self._outputs], dtype=np.int32)
        sub.operators = self._ops
        sub.name = "main"

        def tensor_maps(pairs):
            maps = []
            for name, index in pairs:
                m = s.TensorMapT()
                m.name = name
                m.tensorIndex = index
                maps.append(m)
            return maps

        sig = s.SignatureDefT()
        sig.inputs = tensor_maps(self._inputs)
        sig.outputs = tensor_maps(self._outputs)
        sig.signatureKey = self._signature_key
        sig.subgraphIndex = 0

        model = s.ModelT()
        model.version = 3
        model.operatorCodes = self._codes
        model.subgraphs = [sub]
        model.description = self._description
        model.buffers = self._buffers
        model.signatureDefs = [sig]

        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())

"""The flatbuffer object API of TFLite models, from the pinned ai-edge-litert
wheel (``schema_py_generated``); no TensorFlow."""

from __future__ import annotations

import functools

from ..errors import NativeModuleError


@functools.cache
def schema():
    """The generated TFLite schema module (Model, Tensor, BuiltinOperator, ...)."""
    try:
        from ai_edge_litert import schema_py_generated
    except ImportError as exc:  # a dependency of the package; missing only in a broken install
        raise NativeModuleError("reading or writing .tflite needs ai-edge-litert "
                                "(pip install ai-edge-litert==2.3.0)") from exc
    return schema_py_generated

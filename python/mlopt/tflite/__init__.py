"""TFLite models without TensorFlow: the schema, a graph builder, a reader."""

from .builder import GraphBuilder
from .reader import ModelFormatError, TfliteModel, read_model
from .schema import schema

__all__ = ["GraphBuilder", "ModelFormatError", "TfliteModel", "read_model", "schema"]

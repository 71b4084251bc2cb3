"""Problem-neutral policies: feature batching, vocabularies, the MLP and its
.tflite export, loaded models (.tflite / model directory / compiled .so) and
the ahead-of-time policy compiler. Every function takes the problem (or its
feature specs) as an argument; nothing here knows which problem it serves."""

from .aot import compile_policy, generate_source
from .batching import feature_columns, feature_matrix
from .loaded import LoadedPolicy
from .mlp import MLPPolicy
from .vocab import Vocab

__all__ = ["LoadedPolicy", "MLPPolicy", "Vocab", "compile_policy", "feature_columns", "feature_matrix",
           "generate_source"]

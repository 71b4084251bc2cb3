"""Register-allocation eviction: LLVM's ML eviction advisor
(``-regalloc-enable-advisor``), in stock ``llc``/``clang`` 19 and 22.

Features: 20 tensors of shape [1, 33] (one column per candidate physical
register, column 32 the virtual register itself) and ``progress`` [1].
Decision: ``index_to_evict``, a column whose ``mask`` is 1. The policy
network is a shared per-candidate encoder with a masked argmax
(:class:`EvictionPolicy`).
"""

from __future__ import annotations

from .policy import EvictionPolicy
from .spec import (
    CANDIDATES,
    COLUMN_FEATURES,
    DECISION,
    FEATURES,
    MASK,
    NO_EVICTION,
    PROBLEM,
    PROGRESS,
    REWARD,
    feature_specs,
)
from .vocab import generic_vocab

POLICY = EvictionPolicy

__all__ = ["CANDIDATES", "COLUMN_FEATURES", "DECISION", "FEATURES", "MASK", "NO_EVICTION", "POLICY", "PROBLEM",
           "PROGRESS", "REWARD", "EvictionPolicy", "feature_specs",
           "generic_vocab"]

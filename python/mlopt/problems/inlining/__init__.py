"""Inlining for size: LLVM's ML inliner (``MLInlineAdvisor``).

Features: the 38 int64 [1] tensors of ``InlineModelFeatureMaps.h``, in
tensor order (the 25 cost features of getInliningCostFeatures first, then
call-site and module features). Decision: ``inlining_decision`` 0/1; the
heuristic's answer is logged as ``inlining_default``. On LLVM 22 with an
IR2Vec vocabulary, ``with_ir2vec(dim)`` (registered as
``inlining-ir2vec:<dim>``) adds the float callee/caller embeddings.
"""

from __future__ import annotations

from ..base import Problem
from .ir2vec import ir2vec_dimension
from .policy import InlinePolicy
from .spec import (
                   DECISION,
                   DEFAULT_DECISION,
                   EMBEDDINGS,
                   FEATURES,
                   IR2VEC,
                   LOGITS,
                   PROBLEM,
                   REWARD,
                   decision_spec,
                   default_decision_spec,
                   embedding_specs,
                   feature_matrix,
                   feature_specs,
                   reward_spec,
                   with_ir2vec,
)

POLICY = InlinePolicy  # the network of this problem (and of inlining-ir2vec:<dim>)

__all__ = ["DECISION", "DEFAULT_DECISION", "EMBEDDINGS", "FEATURES", "IR2VEC", "InlinePolicy", "LOGITS", "POLICY",
           "PROBLEM", "Problem", "REWARD", "decision_spec", "default_decision_spec", "embedding_specs",
           "feature_matrix", "feature_specs", "ir2vec_dimension", "reward_spec", "with_ir2vec"]

"""Inlining for size: LLVM 19's ML inliner (``MLInlineAdvisor``).

Features: the 38 int64 [1] tensors of ``InlineModelFeatureMaps.h``, in
tensor order (the 25 cost features of getInliningCostFeatures first, then
call-site and module features). Decision: ``inlining_decision`` 0/1; the
heuristic's answer is logged as ``inlining_default``.
"""

from __future__ import annotations

from ..base import Problem
from .policy import InlinePolicy
from .spec import (
                   DECISION,
                   DEFAULT_DECISION,
                   FEATURES,
                   LOGITS,
                   PROBLEM,
                   REWARD,
                   decision_spec,
                   default_decision_spec,
                   feature_matrix,
                   feature_specs,
                   reward_spec,
)

__all__ = ["DECISION", "DEFAULT_DECISION", "FEATURES", "InlinePolicy", "LOGITS", "PROBLEM", "Problem", "REWARD",
           "decision_spec", "default_decision_spec", "feature_matrix", "feature_specs", "reward_spec"]

"""Inlining for size, the heuristic's decision as an input: LLVM's 38
inliner features, then ``inlining_default`` (int64 [1], 0/1: what the stock
-Oz heuristic would decide at this call site). A policy over it learns where
to differ from the heuristic instead of re-learning the heuristic: behavioral
cloning reaches it exactly (the label is an input), and ES/PPO start from a
policy that decides like ``-Oz`` everywhere.

mlopt's advisor (plugin and engine) computes the heuristic's decision for
every call site it asks a policy about and feeds it to a model input named
``inlining_default`` when the model has one, so such a policy runs in stock
clang/opt with the plugin like any other; it costs one extra inline-cost
analysis per call site, which LLVM's ML advisor already pays for its log.
"""

from __future__ import annotations

from ..base import Problem
from ..inlining.policy import InlinePolicy
from ..inlining.spec import PROBLEM as INLINING
from ..inlining.spec import default_decision_spec

PROBLEM = Problem(
    name="inlining-default",
    features=(*INLINING.features, default_decision_spec()),
    decision=INLINING.decision,
    num_actions=2,
    default_decision=INLINING.default_decision,
    reward=INLINING.reward,
    description="inlining for size, the -Oz heuristic's decision as a 39th input (learn where to differ)",
)


class DefaultInformedPolicy(InlinePolicy):
    """The inliner's MLP over the 38 features and the heuristic's decision."""

    problem = PROBLEM


POLICY = DefaultInformedPolicy

__all__ = ["POLICY", "PROBLEM", "DefaultInformedPolicy"]

"""Inlining for size, the heuristic's decision and the callee's linkage as
inputs: ``inlining-default``'s 39 inputs, then ``callee_linkage`` (int64
[1]): what becomes of the callee's body when sites stop calling it. 0
external (it stays whatever the sites do), 1 local (``internal``/``private``:
it goes away with its last call), 2 linkonce (``linkonce_odr``: discardable
once unused), 3 ``available_externally`` (never emitted), 4 any other
(weak, common; an indirect call). LLVM's 38 features tell only the third
from the rest (``is_callee_avail_external``).

mlopt's advisor (plugin and engine) feeds it to an exported policy (``.tflite``,
model directory, compiled ``.so``) that has an input of that name, so such a
policy runs in stock clang/opt with the plugin; a numpy policy cannot see it
(export it first). Measured motive (benchmarks/README.md, "The heuristic's
own boundary, tuned"): the 30-minute ES policies' one change in C is to
inline external functions the heuristic declines, which costs bytes; with
the linkage they can tell. ``inlining-linked`` trains this network for the
package-linked share.
"""

from __future__ import annotations

from ...log import TensorSpec
from ..base import Problem
from ..inlining.policy import InlinePolicy
from ..inlining_default import PROBLEM as DEFAULT_INFORMED

LINKAGE = "callee_linkage"
LINKAGE_CLASSES = ("external", "local", "linkonce", "available_externally", "other")


def linkage_spec() -> TensorSpec:
    return TensorSpec(LINKAGE, "int64_t", [1])


def takes_linkage(policy) -> bool:
    """Whether ``policy`` takes ``callee_linkage`` (so its compiles log it): a loaded model by its inputs,
    a network or a :class:`Problem` by its features, a callable by its ``takes_linkage`` attribute."""
    if policy is None:
        return False
    inputs = getattr(policy, "inputs", None)  # a loaded policy: its model's inputs
    if inputs is not None:
        return LINKAGE in inputs
    names = getattr(getattr(policy, "problem", policy), "feature_names", None)
    if names is not None:
        return LINKAGE in names
    return bool(getattr(policy, "takes_linkage", False))


PROBLEM = Problem(
    name="inlining-linkage",
    features=(*DEFAULT_INFORMED.features, linkage_spec()),
    decision=DEFAULT_INFORMED.decision,
    num_actions=2,
    default_decision=DEFAULT_INFORMED.default_decision,
    reward=DEFAULT_INFORMED.reward,
    description="inlining for size, the -Oz heuristic's decision and the callee's linkage as inputs 39 and 40",
)


class LinkageInformedPolicy(InlinePolicy):
    """The inliner's MLP over the 38 features, the heuristic's decision and the callee's linkage."""

    problem = PROBLEM


POLICY = LinkageInformedPolicy

__all__ = ["LINKAGE", "LINKAGE_CLASSES", "POLICY", "PROBLEM", "LinkageInformedPolicy", "linkage_spec",
           "takes_linkage"]

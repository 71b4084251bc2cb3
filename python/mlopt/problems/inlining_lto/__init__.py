"""Inlining for size under full LTO, costed by the binary: ``inlining-linkage``'s
40 inputs and network (after internalization the callee's linkage says
whether its body goes with its last call), with the objective
``lto_binary``: the ``.text`` of the binary the merged module links into with
``--gc-sections --icf=all``, the strongest stock configuration
(:mod:`mlopt.compiler.relink`).

Under full LTO the merged module is the binary's code: no per-module sum, no
COMDAT estimate; what lld's garbage collection and identical code folding
take away is in the cost. Its modules are a full-LTO corpus's
(``mlopt corpus debian --lto full``, ``mlopt corpus extract --lto``), whose
link facts (``<m>.link.json``) say how the binary was linked. A policy
without the heuristic's decision or the linkage among its inputs (one
trained for ``inlining``) runs under it too.
"""

from __future__ import annotations

from dataclasses import replace

from ..inlining_linkage import PROBLEM as _LINKAGE
from ..inlining_linkage import LinkageInformedPolicy

PROBLEM = replace(
    _LINKAGE, name="inlining-lto", objective="lto_binary", starts_from=("inlining-linkage",),
    # any inlining policy runs under it (a -Oz policy, a constant one); its own network takes all 40
    optional_features=(*_LINKAGE.optional_features, "inlining_default", "callee_linkage"),
    description="inlining for size under full LTO, the heuristic's decision and the callee's linkage as inputs, "
                "objective: the binary's .text linked with --gc-sections --icf=all")


class LtoBinaryPolicy(LinkageInformedPolicy):
    """``inlining-linkage``'s network, trained for the full-LTO binary's ``.text``."""

    problem = PROBLEM


POLICY = LtoBinaryPolicy

__all__ = ["POLICY", "PROBLEM", "LtoBinaryPolicy"]

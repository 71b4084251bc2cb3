"""Inlining for size under ThinLTO, costed by the binary: ``inlining-lto``'s
40 inputs and network, with the objective ``thinlto_binary``: the ``.text``
of the binary when this backend module's object is linked with the
heuristic's objects of the binary's other backends, ``--gc-sections
--icf=all`` (:mod:`mlopt.rollouts.thinlto_siblings`).

Under ThinLTO each backend compiles one module (with what it imported) and
lld links their objects, so a module's decisions change the binary through
its object alone; what gc-sections and ICF take away across modules is in
the cost. Its modules are a ThinLTO corpus's (``mlopt corpus debian --lto
thin``, ``mlopt corpus extract --lto``): one directory per binary.
"""

from __future__ import annotations

from dataclasses import replace

from ..inlining_lto import PROBLEM as _LTO
from ..inlining_lto import LtoBinaryPolicy

PROBLEM = replace(
    _LTO, name="inlining-thinlto", objective="thinlto_binary", starts_from=("inlining-lto", "inlining-linkage"),
    description="inlining for size under ThinLTO, the heuristic's decision and the callee's linkage as inputs, "
                "objective: the binary's .text (this backend's object with the others' heuristic objects) "
                "linked with --gc-sections --icf=all")


class ThinLtoBinaryPolicy(LtoBinaryPolicy):
    """``inlining-lto``'s network, trained for the ThinLTO binary's ``.text``."""

    problem = PROBLEM


POLICY = ThinLtoBinaryPolicy

__all__ = ["POLICY", "PROBLEM", "ThinLtoBinaryPolicy"]

"""Inlining for size, costed as the package links it: ``inlining-linkage``'s
40 inputs and network, with the objective ``linked_share``.

The per-module ``.text`` sum (objective ``text_size``) counts a C++ inline
function or template instance (``linkonce_odr``, emitted in a COMDAT
section group) once per object that emits it, where a linker keeps one copy
per name. So inlining the last call of such a function in one module is
credited its whole body although the package still links a copy from its
other modules (benchmarks/README.md, "Per-module sums against linking": ES trained on that sum
shrinks it and grows the linked package). ``linked_share`` charges each
module its code outside section groups in full and each grouped code
section ``1/k`` of its size, where ``k`` is the number of the package's
modules whose ``-Oz`` object has a section of that name
(:class:`LinkedShares`, built by :func:`mlopt.rollouts.build_linked_shares`
and given to rollouts as ``$MLOPT_LINKED_SHARES``, ``--linked-shares``).
Under ``-Oz`` a package's charges sum to its package-linked estimate
(``mlopt eval --linked``; exactly, when the copies of a name have one size),
and a module that drops its copy is credited its share, not the body.
"""

from __future__ import annotations

from dataclasses import replace

from ..inlining_linkage import PROBLEM as _LINKAGE
from ..inlining_linkage import LinkageInformedPolicy
from .shares import LINKED_SHARES_ENV, LinkedShares

PROBLEM = replace(
    _LINKAGE, name="inlining-linked", objective="linked_share", starts_from=("inlining-linkage",),
    description="inlining for size with the heuristic's decision and the callee's linkage as inputs, objective: "
                "the module's share of its package's linked .text (grouped code charged 1/k)")


class LinkedSharePolicy(LinkageInformedPolicy):
    """``inlining-linkage``'s network, trained for the package-linked share."""

    problem = PROBLEM


POLICY = LinkedSharePolicy

__all__ = ["LINKED_SHARES_ENV", "POLICY", "PROBLEM", "LinkedSharePolicy", "LinkedShares"]

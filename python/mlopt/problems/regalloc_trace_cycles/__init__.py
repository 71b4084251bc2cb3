"""Register-allocation eviction trained for speed by predicted *cycles*:
the ``regalloc`` problem (same 21 features, same decision, same
:class:`EvictionPolicy`) with the objective ``trace_cycles``: the cycles a
recorded run of the program spends in the module's functions, predicted for
the module compiled with the policy by the trace's cycles model
(:func:`mlopt.reward.estimate_objects`; with a trace that kept the blocks'
order, the path model: llvm-mca over the blocks in the order they ran) for
this host's CPU, or ``$MLOPT_REWARD_CPU``. No link and no run; lower is
better. The trace is ``--reward-trace`` of the training commands, as for
``regalloc-trace`` (instructions), whose weights and ``regalloc``'s
training may start from.
"""

from __future__ import annotations

from dataclasses import replace

from ..regalloc import PROBLEM as _REGALLOC
from ..regalloc import EvictionPolicy

PROBLEM = replace(
    _REGALLOC, name="regalloc-trace-cycles", objective="trace_cycles", starts_from=("regalloc", "regalloc-trace"),
    description="register-allocation eviction, objective: the traced run's cycles in the module (the trace "
                "reward's cycles model)")
POLICY = EvictionPolicy

__all__ = ["POLICY", "PROBLEM"]

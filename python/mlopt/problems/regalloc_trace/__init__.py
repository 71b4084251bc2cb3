"""Register-allocation eviction trained for speed: the ``regalloc`` problem
(same 21 features, same decision, same :class:`EvictionPolicy`) with the
trace reward as its objective, ``trace_instructions``: the instructions a
recorded run of the program executes in the module's functions, predicted
for the module compiled with the policy (:func:`mlopt.reward.estimate_objects`
over the object the engine makes, no link and no run; lower is better).
The trace is ``$MLOPT_REWARD_TRACE`` (``--reward-trace`` of the training
commands), recorded of the program built from the corpus' modules with
``mlopt reward build-flags``. Training may start from weights trained for
``regalloc`` (behavioral cloning on eviction logs).
"""

from __future__ import annotations

from dataclasses import replace

from ..regalloc import PROBLEM as _REGALLOC
from ..regalloc import EvictionPolicy

PROBLEM = replace(
    _REGALLOC, name="regalloc-trace", objective="trace_instructions", starts_from=("regalloc",),
    description="register-allocation eviction, objective: the traced run's instructions in the module "
                "(the trace reward)")
POLICY = EvictionPolicy

__all__ = ["POLICY", "PROBLEM"]

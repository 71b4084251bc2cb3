"""The recommended ES settings for inlining, the one source of ``mlopt
train es``'s defaults and of the recipe's training step (:mod:`.recipe`).

Measured best on the large Debian corpus's held-out packages (LLVM 19):
sigma set so that a perturbation changes 6% of the training modules
(:mod:`.sigma_calibration`; after 90 iterations every seed smaller than at
a fixed sigma 0.05), lr 0.02 at sigma 0.05 and scaled with the calibrated
sigma (the step keeps its length in ranks), 48 modules an iteration, each
module ranking the candidates (``module-rank``: -0.46% against total's
-0.31%). Problems the recipe was not measured on (regalloc and its trace
rewards) keep the earlier settings (:data:`OTHER`) and a fixed sigma.
Light: the command line reads it while building its parser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..policy import MLPPolicy

FLIP_SHARE = 0.06
RECIPE = {"lr": 0.02, "objective": "module-rank", "modules": 48}
OTHER = {"lr": 0.05, "objective": "total", "modules": 16}
REFERENCE_SIGMA = 0.05  # the sigma the lr is given for; a calibrated sigma scales it


def calibrates(problem) -> bool:
    """Whether the flip-share sigma applies: a two-action inlining problem (its trace is the inliner's)."""
    return problem.name.startswith("inlining") and problem.num_actions == 2


def defaults(problem) -> dict:
    """lr (at :data:`REFERENCE_SIGMA`), objective and modules per iteration for ``problem``."""
    return dict(RECIPE if calibrates(problem) else OTHER)


@dataclass(frozen=True)
class RecipeSigma:
    sigma: float
    lr: float  # the given lr scaled to the calibrated sigma
    calibration: dict  # sigma, share, target, modules, rows, samples (written to the run's config)


def recipe_sigma(policy: MLPPolicy, trace, modules: set[str], lr: float, share: float = FLIP_SHARE) -> RecipeSigma:
    """The sigma whose perturbations change ``share`` of ``modules`` (names of the
    trace's modules to draw from: the training modules, not the excluded ones),
    on the heuristic's trace (the same bits on any machine), and ``lr`` scaled to it."""
    from .sigma_calibration import calibrate_sigma, flip_probe

    probe = flip_probe(policy, trace.columns, trace.module_rows,
                       among=[i for i, m in enumerate(trace.modules) if m in modules])
    cal = calibrate_sigma(policy, probe, share, start=REFERENCE_SIGMA, samples=16)
    scaled = lr * cal.sigma / REFERENCE_SIGMA
    return RecipeSigma(cal.sigma, scaled, {"sigma": cal.sigma, "share": cal.share, "target": cal.target,
                                           "modules": cal.modules, "rows": cal.rows, "samples": cal.samples,
                                           "lr": scaled})

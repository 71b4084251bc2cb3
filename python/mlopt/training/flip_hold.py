"""ES's sigma held at a share of changed modules for the whole run.

Sigma calibration (:mod:`mlopt.training.sigma_calibration`) sets sigma once,
for the starting policy: its perturbations change 6% of the training modules
there. On the Debian corpus that share holds for about 20 iterations; then a
fifth of the modules hold a call site within one logit of the decision
boundary, and a perturbation of the same sigma changes 25-30% of them
(benchmarks/README.md, stop 58). Every changed module is a compile, so an
iteration then costs 2-3 times what it did, and each candidate's value mixes
many more flipped sites.

This measures, before each iteration, the share of a fixed probe of training
modules that perturbations of the current sigma change around the current
iterate, and moves sigma toward the target share: a multiplicative step of
``(target / share) ** gain``, at most a factor ``MAX_FACTOR`` either way.
Decisions are the policy's exact decision pass
(:meth:`~mlopt.policy.mlp.MLPPolicy.decide_inputs`) on the modules' recorded
call-site features (the heuristic's trace), and the probe's modules and the
perturbations come from the run's seed alone, so a run holds the same sigmas
on any machine and when resumed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import MloptError
from ..policy import portable_math
from ..policy.mlp import MLPPolicy

MAX_FACTOR = 2.0  # sigma changes by at most this factor per iteration, either way
GAIN = 0.3  # the controller's exponent: sigma *= (target / share) ** GAIN (8 samples of a heavy-tailed share)
PROBE_STREAM = 0x40C  # the rng stream of the probe's module order and of the measuring perturbations


@dataclass(frozen=True)
class SiteProbe:
    """Normalized call-site features of some training modules (``x``) and each row's module
    (``owner``: 0..modules-1)."""

    x: np.ndarray
    owner: np.ndarray
    modules: int


def site_probe(template: MLPPolicy, sites: Mapping[str, Mapping[str, np.ndarray]], names: Sequence[str],
               rows: int, seed: int) -> SiteProbe:
    """The modules of ``names`` with recorded sites, in an order drawn from ``seed``, taken until they hold
    ``rows`` decisions (at least one module)."""
    have = [n for n in names if n in sites and len(next(iter(sites[n].values()), ()))]
    if not have:
        raise MloptError("holding the flip share needs call-site features of the training modules "
                         "(a trace of the training split), and none of them has any")
    order = np.random.default_rng([seed, PROBE_STREAM]).permutation(len(have))
    xs, owner, total = [], [], 0
    for j in order:
        x = template.training_inputs(sites[have[j]])[0]
        if not len(x):
            continue
        owner.append(np.full(len(x), len(xs), np.int64))
        xs.append(x)
        total += len(x)
        if total >= rows:
            break
    return SiteProbe(np.concatenate(xs), np.concatenate(owner), len(xs))


def changed_share(probe: SiteProbe, center: MLPPolicy, candidates: Sequence[MLPPolicy]) -> float:
    """Mean over ``candidates`` of the share of the probe's modules where some decision differs from
    ``center``'s."""
    base = center.decide_inputs(probe.x)
    shares = [np.count_nonzero(np.bincount(probe.owner[c.decide_inputs(probe.x) != base],
                                           minlength=probe.modules)) / probe.modules for c in candidates]
    return float(np.mean(shares))


def held_sigma(sigma: float, share: float, target: float) -> float:
    """The next sigma: ``sigma * (target / share) ** GAIN``, within a factor MAX_FACTOR of ``sigma``
    (a share of 0 doubles it). The power is taken by :mod:`~mlopt.policy.portable_math` (libm's ``pow``
    picks its code by the CPU), so a run holds the same sigmas on every machine."""
    if share <= 0.0:
        factor = MAX_FACTOR
    else:
        factor = float(portable_math.exp(GAIN * portable_math.log(np.float64(target) / np.float64(share))))
    return float(sigma * min(max(factor, 1.0 / MAX_FACTOR), MAX_FACTOR))


def measuring_perturbations(seed: int, iteration: int, samples: int, trained: np.ndarray) -> np.ndarray:
    """The standard normal perturbations (flat, zero outside ``trained``) that measure iteration
    ``iteration``'s share: from ``(seed, PROBE_STREAM, iteration)`` only, apart from the iteration's own."""
    rng = np.random.default_rng([seed, PROBE_STREAM, iteration])
    eps = np.zeros((samples, trained.size), np.float32)
    eps[:, trained] = rng.standard_normal((samples, int(trained.sum()))).astype(np.float32)
    return eps

"""ES's sigma set by how many modules its perturbations change.

ES's sigma is relative to each layer's weight scale, so the same sigma
moves different starting policies by very different amounts in decisions
(at sigma 0.05, five BC priors of the Debian corpus change 1.4% to 4.0%
of their training modules; benchmarks/README.md, "ES's sigma set by
its effect"), and a perturbation that changes no
decision of the iteration's modules teaches nothing. This sets sigma per
starting policy so that its perturbations change a given share of the
modules instead.

``module_flip_share`` measures, on a trace of the heuristic's decisions
(first order: every decision on the features the heuristic's trajectory
logged), the mean over ``samples`` perturbations of the share of modules
(those with at least one decision) where at least one decision differs
from the unperturbed policy's. ``calibrate_sigma`` finds the sigma whose
share reaches ``target`` by bracketing and bisection in log space.

Both decide as the policy's decision pass does (``logits``:
:func:`mlopt.policy.dense`, the same bits on every CPU; rows whose top logit
leads by more than any evaluation order can move it are taken from BLAS's
logits, the rest from the decision pass, as ``LoadedPolicy.decide`` does),
a fixed subset of modules (a seeded permutation, taken until ``rows``
decisions) and perturbations drawn from ``seed`` alone, so
the calibrated sigma, and every ES run from it, is the same on any
machine."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import MloptError
from ..policy import MLPPolicy
from .es import flatten, layer_scale, unflatten


@dataclass(frozen=True)
class FlipProbe:
    """What a flip share is measured on: the logged features (columns) of a
    subset of a trace's modules, each row's module (0..modules-1), and the
    unperturbed policy's decisions."""

    batch: dict
    owner: np.ndarray
    modules: int
    decided: np.ndarray


@dataclass(frozen=True)
class SigmaCalibration:
    sigma: float  # the calibrated sigma (relative to each layer's weight scale)
    share: float  # the share of modules its perturbations change (mean over samples)
    below: float | None  # the largest sigma measured short of the target (None: the lower bound reached it)
    target: float
    modules: int  # modules (with a decision) measured on
    rows: int  # their decisions
    samples: int  # perturbations per measured sigma
    evaluations: int  # sigmas measured


def flip_probe(policy: MLPPolicy, columns: dict, module_rows: np.ndarray, *, rows: int = 131072,
               seed: int = 0, among=None) -> FlipProbe:
    """The probe of ``policy`` on a trace (``columns`` and ``module_rows`` as in
    :class:`~mlopt.rollouts.dataset.TraceDataset`): modules with a decision (of the
    module indices ``among``, default all), in a permutation drawn from ``seed``,
    until ``rows`` decisions (at least one module)."""
    offsets = np.asarray(module_rows, np.int64)
    counts = np.diff(offsets)
    eligible = np.zeros(len(counts), bool)
    eligible[np.arange(len(counts)) if among is None else np.asarray(among, np.int64)] = True
    candidates = np.flatnonzero(eligible & (counts > 0))
    if not len(candidates):
        raise MloptError("the trace has no decision to calibrate sigma on")
    if rows < 1:
        raise MloptError(f"rows must be at least 1, got {rows!r}")
    order = np.random.default_rng([seed, 0x5167]).permutation(candidates)
    taken = order[:max(1, int(np.searchsorted(np.cumsum(counts[order]), rows)) + 1)]
    taken = np.sort(taken)
    index = np.concatenate([np.arange(offsets[m], offsets[m + 1]) for m in taken])
    owner = np.repeat(np.arange(len(taken)), counts[taken])
    batch = {k: v[index] for k, v in columns.items()}
    return FlipProbe(batch, owner, len(taken), decisions(policy, batch))


def decisions(policy: MLPPolicy, batch: dict) -> np.ndarray:
    """``argmax(policy.logits(batch))`` exactly, several times faster: rows whose top logit
    leads by more than ``logits_with_slack``'s bound are decided from BLAS's logits, the
    others by the decision pass. A policy with a decision pass of its own (not
    :class:`MLPPolicy`'s) is evaluated by it throughout."""
    own = type(policy)
    if own.logits is not MLPPolicy.logits or own.logits_with_slack is not MLPPolicy.logits_with_slack:
        return np.argmax(policy.logits(batch), axis=1)
    return policy.decide_inputs(policy.training_inputs(batch)[0])


def _perturbations(policy: MLPPolicy, samples: int, seed: int) -> np.ndarray:
    scale = layer_scale(policy)
    rng = np.random.default_rng([seed, 0x516])
    return rng.standard_normal((samples, scale.size)).astype(np.float32) * scale


def module_flip_share(policy: MLPPolicy, probe: FlipProbe, sigma: float, *, samples: int = 8, seed: int = 0,
                      _eps: np.ndarray | None = None) -> float:
    """Mean over ``samples`` perturbations (ES's: sigma times each layer's scale times a
    standard normal) of the share of the probe's modules with at least one changed decision."""
    eps = _perturbations(policy, samples, seed) if _eps is None else _eps
    theta = flatten(policy)
    shares = []
    for e in eps:
        p = unflatten(policy, (theta + np.float32(sigma) * e).astype(np.float32))
        changed = decisions(p, probe.batch) != probe.decided
        shares.append(np.count_nonzero(np.bincount(probe.owner[changed], minlength=probe.modules)) / probe.modules)
    return float(np.mean(shares))


def calibrate_sigma(policy: MLPPolicy, probe: FlipProbe, target: float, *, start: float = 0.05,
                    samples: int = 8, seed: int = 0, steps: int = 10,
                    bounds: tuple[float, float] = (1e-4, 10.0)) -> SigmaCalibration:
    """The sigma at which ``samples`` perturbations change ``target`` of the probe's
    modules on average: from ``start``, doubled or halved until the share brackets
    the target (within ``bounds``), then ``steps`` bisections in log space; the
    bracket's upper end (the smallest sigma measured to reach the target)."""
    if not 0.0 < target < 1.0:
        raise MloptError(f"the target share of modules must be in (0, 1), got {target!r}")
    lo_bound, hi_bound = bounds
    if not 0.0 < lo_bound <= start <= hi_bound:
        raise MloptError(f"start sigma {start!r} is outside the bounds {bounds!r}")
    eps = _perturbations(policy, samples, seed)
    measured: dict[float, float] = {}

    def share(s: float) -> float:
        if s not in measured:
            measured[s] = module_flip_share(policy, probe, s, _eps=eps)
        return measured[s]

    lo, hi = None, None
    s = float(start)
    while True:
        if share(s) >= target:
            hi = s
            if lo is not None or s / 2 < lo_bound:
                break
            s /= 2
        else:
            lo = s
            if hi is not None:
                break
            if s * 2 > hi_bound:
                raise MloptError(f"sigma {s:g} changes {100 * share(s):.2f}% of the modules, short of the "
                                 f"target {100 * target:.2f}%, and the bound is {hi_bound:g}")
            s *= 2
    if lo is not None:
        for _ in range(steps):
            mid = math.sqrt(lo * hi)
            if share(mid) >= target:
                hi = mid
            else:
                lo = mid
    return SigmaCalibration(sigma=hi, share=share(hi), below=lo, target=target, modules=probe.modules,
                            rows=len(probe.owner), samples=samples, evaluations=len(measured))

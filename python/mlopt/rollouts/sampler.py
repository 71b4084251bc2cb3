"""Size-stratified module sampling for the trainers (ml-compiler-opt's
bucket round-robin): modules are sorted by size (the heuristic's objective)
and cut into ``buckets`` groups of equal count; an iteration's ``k``
modules are taken round-robin over the buckets, starting at a bucket that
rotates with the iteration, each bucket's share drawn without replacement.
So every iteration sees small, middle and large modules, and the large ones
(which dominate total bytes) are never left out by chance.

``skip_largest=q`` leaves the ``floor(q * n)`` largest modules out of every
draw: their compiles cost most of an iteration (compile time grows with
size, and a large module changes under almost every perturbation), while
under a per-module objective they are a few of its modules' say.

``groups`` (a package per module) with ``group_power=a`` below 1 weighs the
draw by package: within a bucket a module is drawn with probability
proportional to ``n ** (a - 1)``, n being its package's number of modules
(those not skipped), so a package's share of the draws grows as ``n ** a``
instead of ``n`` (exactly so for one module per bucket; beyond that the
draw is without replacement, and a package of few modules gets less): 1
draws modules uniformly (the default, the same draws as without groups),
0.5 as the square root of the package's size, 0 every package alike. A
corpus split by package is judged package by package, and with uniform
draws a few packages of hundreds of modules are most of what a trainer
sees.

    sampler = SizeStratifiedSampler(sizes, buckets=4, seed=0)
    sampler.sample(iteration, k)        # sorted module indices, deterministic

The draw depends only on (seed, iteration, sizes, groups), never on the pool."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np


class SizeStratifiedSampler:
    def __init__(self, sizes: Sequence[float], buckets: int = 4, seed: int = 0, skip_largest: float = 0.0,
                 groups: Sequence[str] | None = None, group_power: float = 1.0):
        if len(sizes) == 0:
            raise ValueError("no modules to sample from")
        if buckets < 1:
            raise ValueError("buckets must be >= 1")
        if not 0.0 <= skip_largest < 1.0:
            raise ValueError(f"skip_largest must be in [0, 1) (a share of the modules), got {skip_largest!r}")
        order = np.argsort(np.asarray(sizes, np.float64), kind="stable")
        self.skipped = [int(i) for i in order[len(order) - int(skip_largest * len(order)):]] if skip_largest else []
        order = order[:len(order) - len(self.skipped)]
        if len(order) == 0:
            raise ValueError("skip_largest leaves no module to sample from")
        self.buckets = [b for b in np.array_split(order, min(buckets, len(order))) if len(b)]
        self.size = len(order)
        self.seed = seed
        if not 0.0 <= group_power <= 1.0:
            raise ValueError(f"group_power must be in [0, 1] (1: modules drawn alike), got {group_power!r}")
        if groups is not None and len(groups) != len(sizes):
            raise ValueError(f"groups names {len(groups)} modules' packages, sizes {len(sizes)} modules")
        # per module, its weight within its bucket (None: uniform, the draws made without groups)
        self.weights = None
        if groups is not None and group_power != 1.0:
            kept = [groups[int(i)] for i in order]
            count = Counter(kept)
            self.weights = {int(i): float(count[groups[int(i)]]) ** (group_power - 1.0) for i in order}

    def counts(self, iteration: int, k: int) -> list[int]:
        """Modules taken from each bucket (smallest first) for ``k`` modules."""
        k = min(k, self.size)
        nb = len(self.buckets)
        counts = [0] * nb
        at = iteration % nb
        while k:
            if counts[at] < len(self.buckets[at]):
                counts[at] += 1
                k -= 1
            at = (at + 1) % nb
        return counts

    def sample(self, iteration: int, k: int, stream: int = 0) -> list[int]:
        """``min(k, modules)`` distinct module indices, sorted."""
        rng = np.random.default_rng([self.seed, iteration, stream, 0x5A4D])
        chosen = []
        for bucket, c in zip(self.buckets, self.counts(iteration, k)):
            if c and self.weights is None:
                chosen.extend(int(i) for i in rng.choice(bucket, c, replace=False))
            elif c:
                w = np.array([self.weights[int(i)] for i in bucket], np.float64)
                chosen.extend(int(i) for i in rng.choice(bucket, c, replace=False, p=w / w.sum()))
        return sorted(chosen)

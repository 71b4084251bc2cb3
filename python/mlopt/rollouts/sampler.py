"""Size-stratified module sampling for the trainers (ml-compiler-opt's
bucket round-robin): modules are sorted by size (the heuristic's objective)
and cut into ``buckets`` groups of equal count; an iteration's ``k``
modules are taken round-robin over the buckets, starting at a bucket that
rotates with the iteration, each bucket's share drawn without replacement.
So every iteration sees small, middle and large modules, and the large ones
(which dominate total bytes) are never left out by chance.

    sampler = SizeStratifiedSampler(sizes, buckets=4, seed=0)
    sampler.sample(iteration, k)        # sorted module indices, deterministic

The draw depends only on (seed, iteration, sizes), never on the pool."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class SizeStratifiedSampler:
    def __init__(self, sizes: Sequence[float], buckets: int = 4, seed: int = 0):
        if len(sizes) == 0:
            raise ValueError("no modules to sample from")
        if buckets < 1:
            raise ValueError("buckets must be >= 1")
        order = np.argsort(np.asarray(sizes, np.float64), kind="stable")
        self.buckets = [b for b in np.array_split(order, min(buckets, len(order))) if len(b)]
        self.size = len(order)
        self.seed = seed

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
            if c:
                chosen.extend(int(i) for i in rng.choice(bucket, c, replace=False))
        return sorted(chosen)

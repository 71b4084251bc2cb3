"""A stochastic view of an MLP policy, for on-policy training (PPO): each
decision is drawn from ``softmax(logits / temperature)`` instead of the
argmax, with a random stream of its own, so a rollout that asks the same
questions in the same order (the compiler does: it is deterministic) makes
the same draws -- runs are byte-identical on 1 or N workers.

    sampled = sampled_policy(policy, seed)      # same class, .decide samples
    mlopt.compile(module, sampled)              # one draw per call site

The result is an instance of the policy's own class (so compile/allocate
treat it as that network: same features, same problem checks); only
``decide`` differs. Log-probabilities of logged decisions are recomputed by
the trainer from the same forward pass (:meth:`MLPPolicy.logits`)."""

from __future__ import annotations

import numpy as np

from . import portable_math
from .mlp import MLPPolicy


def action_probabilities(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``logits / temperature`` in float64 (the same bits on every CPU)."""
    z = np.asarray(logits, np.float64) / temperature
    z = z - z.max(axis=1, keepdims=True)
    p = portable_math.exp(z)
    return p / p.sum(axis=1, keepdims=True)


class _Sampling:
    """Mixin: ``decide`` draws from the policy's action distribution."""

    _rng: np.random.Generator
    temperature: float

    def decide(self, batch) -> np.ndarray:
        p = action_probabilities(self.logits(batch), self.temperature)
        u = self._rng.random(len(p))
        # First action whose cumulative probability exceeds u (the last one on rounding).
        out = (np.cumsum(p, axis=1) <= u[:, None]).sum(axis=1)
        return np.minimum(out, p.shape[1] - 1).astype(np.int64)

    __call__ = decide


_CLASSES: dict[type, type] = {}


def sampled_policy(policy: MLPPolicy, seed: int | tuple[int, ...], temperature: float = 1.0) -> MLPPolicy:
    """``policy`` (weights shared, not copied) deciding by sampling with
    ``numpy.random.default_rng(seed)``."""
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    cls = type(policy)
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Sampled{cls.__name__}", (_Sampling, cls), {})
    out = _CLASSES[cls].__new__(_CLASSES[cls])
    out.__dict__.update(policy.__dict__)
    out._rng = np.random.default_rng(seed)
    out.temperature = float(temperature)
    return out

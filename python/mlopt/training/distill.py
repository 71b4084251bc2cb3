"""A network of other widths that decides as a given policy does on a
trace's call sites (same vocab; cross-entropy to the policy's decisions):
how ES and PPO start from a smaller (or larger) network than their --init."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..policy import MLPPolicy
from .mlp_train import fit, forward


def distill(policy: MLPPolicy, columns, hidden: Sequence[int], *, epochs: int = 8, batch_size: int = 512,
            lr: float = 3e-3, seed: int = 0) -> tuple[MLPPolicy, float]:
    """(the new network, its agreement with ``policy`` on the rows)."""
    x, penalty = policy.training_inputs(columns)
    labels = policy.decide(columns)
    new = MLPPolicy.random(policy.vocab, hidden=hidden, seed=seed, problem=policy.problem)
    layers = [(w.copy(), b.copy()) for w, b in new.layers]
    fit(layers, x, labels, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, penalty=penalty)
    out = type(policy)(policy.vocab, layers, problem=policy.problem)
    h = x.reshape(-1, x.shape[-1]) if x.ndim == 3 else x
    logits, _ = forward(out.layers, h)
    logits = logits.reshape(len(x), -1) + (0 if penalty is None else penalty)
    return out, float((np.argmax(logits, axis=1) == labels).mean())

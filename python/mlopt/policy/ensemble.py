"""Several policies as one: the mean of their logits, as a single MLP.

    committee = logit_mean([a, b, c])     # same problem, vocab and depth
    committee.decide(log)                 # argmax of (a + b + c) / 3's logits

The members' hidden layers sit side by side (the first layer stacks their
rows on the shared inputs, deeper layers are block-diagonal), and the output
layer holds each member's output weights divided by the member count, its
bias their mean. So the logits are the mean of the members' logits up to
float rounding (the sums group differently), and the committee is an
ordinary MLP: it saves, exports and compiles like any policy, at the
members' summed forward cost. Members must share the problem, the vocab
(bucket boundaries) and the number of layers; ValueError says which differs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .mlp import MLPPolicy


def logit_mean(policies: Sequence[MLPPolicy]) -> MLPPolicy:
    """One policy whose logits are the mean of ``policies``' (module docstring)."""
    if not policies:
        raise ValueError("logit_mean needs at least one policy")
    first = policies[0]
    for i, p in enumerate(policies[1:], 1):
        if p.problem.name != first.problem.name:
            raise ValueError(f"policy {i} is for {p.problem.name!r}, policy 0 for {first.problem.name!r}")
        if len(p.layers) != len(first.layers):
            raise ValueError(f"policy {i} has {len(p.layers)} layers, policy 0 {len(first.layers)}")
        if p.vocab.fingerprint() != first.vocab.fingerprint():
            raise ValueError(f"policy {i}'s vocab differs from policy 0's (features, bucket boundaries or z-scores)")
    k = len(policies)
    depth = len(first.layers)
    layers = []
    for li in range(depth):
        ws = [np.asarray(p.layers[li][0], np.float32) for p in policies]
        bs = [np.asarray(p.layers[li][1], np.float32) for p in policies]
        if li == depth - 1:  # output: the members' weights side by side, scaled to a mean
            w = np.concatenate(ws, axis=1) / np.float32(k) if depth > 1 else np.sum(ws, axis=0) / np.float32(k)
            b = np.sum(np.stack(bs).astype(np.float64), axis=0) / k
            layers.append((w.astype(np.float32), b.astype(np.float32)))
        elif li == 0:  # hidden, on the shared inputs
            layers.append((np.concatenate(ws, axis=0), np.concatenate(bs)))
        else:  # hidden, each on its own member's units
            rows, cols = sum(w.shape[0] for w in ws), sum(w.shape[1] for w in ws)
            w = np.zeros((rows, cols), np.float32)
            r = c = 0
            for m in ws:
                w[r:r + m.shape[0], c:c + m.shape[1]] = m
                r, c = r + m.shape[0], c + m.shape[1]
            layers.append((w, np.concatenate(bs)))
    return type(first)(first.vocab, layers, problem=first.problem)

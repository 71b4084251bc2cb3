"""Gradient training of an :class:`MLPPolicy`'s layers in numpy: softmax
cross-entropy over the problem's actions, Adam. Deterministic for a seed,
on every CPU: float32 arithmetic, a fixed batch order, matrix products
summed in one fixed order (:func:`mlopt.policy.dense.matmul`, not BLAS,
whose kernel depends on the CPU) and a softmax through
:mod:`mlopt.policy.portable_math`. The cost: BC on the 37-package trace
(222,711 rows, 20 epochs) takes 7.7 times BLAS's time (33 s)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..policy import portable_math
from ..policy.dense import matmul


class Adam:
    def __init__(self, params: list[np.ndarray], lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        self.t += 1
        c1 = 1 - self.beta1**self.t
        c2 = 1 - self.beta2**self.t
        for p, g, m, v in zip(params, grads, self.m, self.v):
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * g * g
            p -= (self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)).astype(p.dtype)


def forward(layers, h: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Logits and each layer's input (for the backward pass)."""
    inputs = []
    for i, (w, b) in enumerate(layers):
        inputs.append(h)
        h = matmul(h, w.T) + b
        if i + 1 < len(layers):
            h = np.maximum(h, 0)
    return h, inputs


def loss_and_grads(layers, h: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None,
                   penalty: np.ndarray | None = None):
    """Softmax cross-entropy of ``labels``. ``h`` is [n, inputs] (the
    network's outputs are the logits) or [n, C, inputs] for a network that
    scores each of C candidates with one output (a shared per-candidate
    encoder: the logits are the C scores, plus ``penalty`` [n, C])."""
    grouped = h.ndim == 3
    n = len(labels)
    logits, inputs = forward(layers, h.reshape(-1, h.shape[-1]) if grouped else h)
    if grouped:
        logits = logits.reshape(n, h.shape[1])
    if penalty is not None:
        logits = logits + penalty
    z = logits - logits.max(axis=1, keepdims=True)
    p = portable_math.exp(z).astype(np.float32)
    p /= p.sum(axis=1, keepdims=True)
    n = len(labels)
    wts = np.ones(n, np.float32) if weights is None else weights.astype(np.float32)
    loss = float(-(portable_math.log(p[np.arange(n), labels] + 1e-12) * wts).sum() / wts.sum())
    d = p
    d[np.arange(n), labels] -= 1
    d *= (wts / wts.sum())[:, None]
    return loss, backward(layers, inputs, d.reshape(-1, 1) if grouped else d)


def backward(layers, inputs: list[np.ndarray], d: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(dW, db) of every layer from ``d`` (the loss' gradient w.r.t. the
    logits) and each layer's input (:func:`forward`'s second result)."""
    grads = []
    for i in range(len(layers) - 1, -1, -1):
        w, _ = layers[i]
        x = inputs[i]
        grads.append((matmul(d.T, x), d.sum(axis=0)))
        if i:
            d = matmul(d, w) * (x > 0)
    grads.reverse()
    return grads


def fit(layers, x: np.ndarray, labels: np.ndarray, *, epochs: int, batch_size: int, lr: float, seed: int,
        weights: np.ndarray | None = None, on_epoch: Callable[[int, float], None] | None = None,
        penalty: np.ndarray | None = None) -> list[float]:
    """Trains ``layers`` (list of (W, b), float32, updated in place); ``x``
    and ``penalty`` as in :func:`loss_and_grads`."""
    params = [a for wb in layers for a in wb]
    opt = Adam(params, lr)
    rng = np.random.default_rng(seed)
    losses = []
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total, count = 0.0, 0
        for start in range(0, len(x), batch_size):
            idx = order[start:start + batch_size]
            loss, grads = loss_and_grads(layers, x[idx], labels[idx], None if weights is None else weights[idx],
                                         None if penalty is None else penalty[idx])
            opt.step(params, [g.astype(np.float32) for wb in grads for g in wb])
            total += loss * len(idx)
            count += len(idx)
        losses.append(total / max(count, 1))
        if on_epoch:
            on_epoch(epoch, losses[-1])
    return losses

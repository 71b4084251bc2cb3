"""One dense layer, ``y = x @ w.T + b`` in float32, summed in the order of
mlopt's compiled policies (:mod:`mlopt.policy.aot`'s ``mlopt_dot``): each
dot product as 8 interleaved partial sums over the inputs in steps of 8,
combined ``((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7))``, plus the remaining
inputs summed in order, plus the bias; every product rounded on its own
(no fused multiply-add). :func:`matmul` is a matrix product for
training's passes, in another fixed order.

Why not BLAS: numpy's matmul goes through a BLAS whose kernel (and so its
order of additions, and whether it fuses) depends on the CPU, so its
logits can differ from the compiled policy's in the last bit and flip a
near-tie (on a Zen 5: 11 of 2,606 eviction decisions), and a training
run's weights differ from one CPU to another (BC seed 0 under OpenBLAS's
Haswell and SkylakeX kernels). This order gives the same bits on every
machine, and the ``.so``'s (and, where measured, LiteRT's) bits. Used by
every numpy forward pass of a policy's decisions and by BC's and PPO's
forward and backward passes.
"""

from __future__ import annotations

import numpy as np

CHUNK = 1024  # rows per step: bounds the [rows, out, 8] products held at once
_PRODUCTS = 1 << 22  # matmul's products held at once (16 MiB)


def _dot(rows: np.ndarray, w: np.ndarray) -> np.ndarray:
    """[n, K] x [out, K] -> [n, out] float32 dot products in the order above."""
    n, k = rows.shape
    k8 = k - k % 8
    out = np.empty((n, w.shape[0]), np.float32)
    for start in range(0, n, CHUNK):
        x = rows[start:start + CHUNK, None, :]
        s = np.zeros((len(x), w.shape[0], 8), np.float32)
        for t in range(0, k8, 8):
            s += x[:, :, t:t + 8] * w[None, :, t:t + 8]  # each product rounded, then added
        dot = ((s[..., 0] + s[..., 4]) + (s[..., 1] + s[..., 5])) + ((s[..., 2] + s[..., 6]) + (s[..., 3] + s[..., 7]))
        tail = np.zeros(dot.shape, np.float32)
        for t in range(k8, k):
            tail += x[:, :, t] * w[None, :, t]
        out[start:start + CHUNK] = dot + tail
    return out


def dense(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x`` [..., K] float32, ``w`` [out, K], ``b`` [out] -> [..., out] float32."""
    x = np.asarray(x, np.float32)
    w = np.asarray(w, np.float32)
    b = np.asarray(b, np.float32)
    lead = x.shape[:-1]
    out = b + _dot(x.reshape(-1, x.shape[-1]), w)
    return out.reshape(*lead, w.shape[0])


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for float32 ``a`` [n, K] and ``b`` [K, m], the same bits on
    every CPU. Not :func:`dense`'s order (training needs no match with a
    compiled policy, and that order costs one numpy step per 8 inputs): the
    K products of each element, each rounded, summed as a tree of
    elementwise halves (``P[:h] + P[h:2h]``, an odd last one added to the
    first), in steps of rows that bound the [K, rows, m] products held."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    n, k = a.shape
    if b.shape[0] != k:
        raise ValueError(f"matmul: {list(a.shape)} @ {list(b.shape)}")
    out = np.zeros((n, b.shape[1]), np.float32)
    if k == 0:
        return out
    step = max(1, _PRODUCTS // max(1, k * b.shape[1]))
    at = np.ascontiguousarray(a.T)
    for start in range(0, n, step):
        p = at[:, start:start + step, None] * b[:, None, :]  # [K, rows, m]
        while len(p) > 1:
            h = len(p) // 2
            q = p[:h] + p[h:2 * h]
            if len(p) % 2:
                q[0] += p[2 * h]
            p = q
        out[start:start + step] = p[0]
    return out

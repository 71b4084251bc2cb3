"""One dense layer, ``y = x @ w.T + b`` in float32, summed in the order of
mlopt's compiled policies (:mod:`mlopt.policy.aot`'s ``mlopt_dot``): each
dot product as 8 interleaved partial sums over the inputs in steps of 8,
combined ``((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7))``, plus the remaining
inputs summed in order, plus the bias; every product rounded on its own
(no fused multiply-add).

Why not BLAS: numpy's matmul goes through a BLAS whose kernel (and so its
order of additions, and whether it fuses) depends on the CPU, so its
logits can differ from the compiled policy's in the last bit and flip a
near-tie (on a Zen 5: 11 of 2,606 eviction decisions). This order gives
the same bits on every machine, and the ``.so``'s (and, where measured,
LiteRT's) bits. Used by every numpy forward pass of a policy's decisions;
training's gradient passes keep BLAS.
"""

from __future__ import annotations

import numpy as np

CHUNK = 1024  # rows per step: bounds the [rows, out, in] products held at once


def dense(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x`` [..., K] float32, ``w`` [out, K], ``b`` [out] -> [..., out] float32."""
    x = np.asarray(x, np.float32)
    w = np.asarray(w, np.float32)
    b = np.asarray(b, np.float32)
    k = x.shape[-1]
    lead = x.shape[:-1]
    rows = x.reshape(-1, k)
    out = np.empty((len(rows), w.shape[0]), np.float32)
    k8 = k - k % 8
    for start in range(0, len(rows), CHUNK):
        p = rows[start:start + CHUNK, None, :] * w[None, :, :]  # [c, out, K] products, each rounded
        s = np.zeros(p.shape[:2] + (8,), np.float32)
        for t in range(0, k8, 8):
            s += p[:, :, t:t + 8]
        dot = ((s[..., 0] + s[..., 4]) + (s[..., 1] + s[..., 5])) + ((s[..., 2] + s[..., 6]) + (s[..., 3] + s[..., 7]))
        tail = np.zeros(p.shape[:2], np.float32)
        for t in range(k8, k):
            tail += p[:, :, t]
        out[start:start + CHUNK] = b + (dot + tail)
    return out.reshape(*lead, w.shape[0])

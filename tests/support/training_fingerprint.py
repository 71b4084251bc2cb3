"""Prints one sha256 over the bits of training's numeric parts on fixed
synthetic data: portable exp/log, matmul, a BC fit and a PPO gradient.
Run as a script (``python -m tests.support.training_fingerprint``) under
different CPU kernels (``OPENBLAS_CORETYPE``, ``NPY_DISABLE_CPU_FEATURES``);
every run must print the same line."""

from __future__ import annotations

import hashlib

import numpy as np

from mlopt.policy import portable_math
from mlopt.policy.dense import matmul
from mlopt.training.mlp_train import fit
from mlopt.training.ppo import Batch, surrogate_and_grads


def fingerprint() -> str:
    rng = np.random.default_rng(7)
    h = hashlib.sha256()
    z = np.concatenate([rng.normal(0, 20, 5000), rng.uniform(-700, 700, 5000)])
    h.update(portable_math.exp(z).tobytes())
    h.update(portable_math.log(np.abs(z) + 1e-3).tobytes())
    a = rng.normal(size=(300, 77)).astype(np.float32)
    b = rng.normal(size=(77, 45)).astype(np.float32)
    h.update(matmul(a, b).tobytes())
    # BC: labels a nonlinear function of the inputs, a 2-hidden-layer network, 3 epochs
    x = rng.normal(size=(3000, 20)).astype(np.float32)
    labels = ((x[:, 0] * x[:, 1] + x[:, 2]) > 0).astype(np.int64)
    layers = [(rng.normal(0, 0.3, (32, 20)).astype(np.float32), np.zeros(32, np.float32)),
              (rng.normal(0, 0.3, (32, 32)).astype(np.float32), np.zeros(32, np.float32)),
              (rng.normal(0, 0.3, (2, 32)).astype(np.float32), np.zeros(2, np.float32))]
    losses = fit(layers, x, labels, epochs=3, batch_size=256, lr=3e-3, seed=0)
    h.update(np.asarray(losses).tobytes())
    for w, bias in layers:
        h.update(w.tobytes())
        h.update(bias.tobytes())
    # PPO: one clipped-surrogate gradient of the trained network
    batch = Batch(x[:1000], None, labels[:1000], rng.normal(size=1000).astype(np.float32),
                  np.full(1000, np.log(0.5)))
    loss, grads, stats = surrogate_and_grads(layers, batch, np.arange(1000), clip=0.2, entropy=0.01)
    h.update(np.float64(loss).tobytes())
    for gw, gb in grads:
        h.update(np.asarray(gw, np.float32).tobytes())
        h.update(np.asarray(gb, np.float32).tobytes())
    h.update(np.array([stats["clip_fraction"], stats["approx_kl"], stats["entropy"]]).tobytes())
    return h.hexdigest()


if __name__ == "__main__":
    print(fingerprint())

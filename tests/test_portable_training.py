"""Training's numbers do not depend on the CPU: portable exp/log, the
fixed-order matmul, and BC's and PPO's passes give the same bits under any
BLAS kernel and any numpy SIMD level (shown by switching both on this
machine), and the bits pinned here (so on every machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlopt.policy import portable_math
from mlopt.policy.dense import matmul

ROOT = Path(__file__).resolve().parents[1]
# tests/support/training_fingerprint.py on any CPU; changes only when training's arithmetic is changed on purpose
FINGERPRINT = "d261cb9293af8be9edb682e9b5181462948153c7a4edabdd9ba44bc1110eed3d"
# numpy's names for its run-time SIMD levels (2.x groups and single features; unknown names are ignored)
NO_SIMD = "X86_V3 X86_V4 AVX512_ICL AVX512_SKX AVX512F AVX2 FMA3"


def test_exp_and_log_are_within_a_few_ulps_of_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 10, 200_000), rng.uniform(-740, 705, 200_000)])
    ref = np.exp(x)
    normal = ref > np.finfo(np.float64).tiny  # a subnormal result has fewer bits to be relative to
    assert normal.sum() > 390_000
    assert np.max(np.abs(portable_math.exp(x) - ref)[normal] / ref[normal]) < 4 * np.finfo(np.float64).eps
    p = np.abs(x) + 1e-300
    assert np.max(np.abs(portable_math.log(p) - np.log(p)) / np.maximum(np.abs(np.log(p)), 1e-300)) \
        < 4 * np.finfo(np.float64).eps
    with np.errstate(all="ignore"):
        specials = np.array([np.inf, -np.inf, np.nan, 710.0, -746.0, 0.0, -0.0])
        np.testing.assert_array_equal(portable_math.exp(specials), [np.inf, 0.0, np.nan, np.inf, 0.0, 1.0, 1.0])
        logs = np.array([0.0, -1.0, np.inf, np.nan, 1.0, 5e-324])
        np.testing.assert_array_equal(portable_math.log(logs)[:5], [-np.inf, np.nan, np.inf, np.nan, 0.0])
        assert portable_math.log(logs)[5] == pytest.approx(np.log(5e-324), rel=1e-15)


@pytest.mark.parametrize("n,k,m", [(64, 512, 76), (7, 1, 3), (5, 13, 2), (0, 4, 3), (3, 0, 2), (2500, 9, 700)])
def test_matmul_is_a_matrix_product(n, k, m):
    rng = np.random.default_rng(n + k + m)
    a = rng.normal(size=(n, k)).astype(np.float32)
    b = rng.normal(size=(k, m)).astype(np.float32)
    got = matmul(a, b)
    assert got.shape == (n, m) and got.dtype == np.float32
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) * k * np.finfo(np.float32).eps + 1e-30
    assert np.all(np.abs(got - exact) <= bound)
    with pytest.raises(ValueError, match="matmul"):
        matmul(a, np.zeros((k + 1, m), np.float32))


def _fingerprint(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-m", "tests.support.training_fingerprint"], cwd=ROOT,
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_training_gives_the_same_bits_under_every_cpu_kernel():
    """BC's weights and PPO's gradients through OpenBLAS's Haswell, Zen and
    SSE3 kernels and numpy without its AVX2/AVX-512 loops: one fingerprint,
    the pinned one (BLAS's matmul fails this: each kernel sums in its own
    order)."""
    runs = {"default": _fingerprint({}),
            "haswell, no simd": _fingerprint({"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": NO_SIMD}),
            "zen": _fingerprint({"OPENBLAS_CORETYPE": "Zen"}),
            "prescott": _fingerprint({"OPENBLAS_CORETYPE": "Prescott", "NPY_DISABLE_CPU_FEATURES": NO_SIMD})}
    assert set(runs.values()) == {FINGERPRINT}, runs

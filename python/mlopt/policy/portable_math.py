"""``exp`` and ``log`` in float64 whose bits do not depend on the CPU.

numpy picks its ``exp``/``log`` loops by the CPU at run time (float32: AVX2
or the baseline; float64: AVX-512 or not), and the loops differ in the last
bit, so a softmax, and through it a training run's weights, would differ
from one machine to another. These use only operations IEEE 754 rounds
exactly (add, multiply, divide, ``rint``, ``frexp``, ``ldexp``), each its
own numpy call (nothing fused), so they give the same bits everywhere.
Accuracy: within a few float64 ulps of the true value (a float32 result
cast from them is almost always correctly rounded).
"""

from __future__ import annotations

import numpy as np

_LN2_HI = 6.93147180369123816490e-01  # ln 2's leading bits (k * _LN2_HI is exact for |k| < 2**20)
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00
_EXP_TAYLOR = [1.0 / np.prod(np.arange(1, n + 1, dtype=np.float64)) for n in range(14)]  # 1/n!, n = 0..13
_LOG_SERIES = [2.0 / (2 * n + 1) for n in range(11)]  # log m = sum 2 s^(2n+1) / (2n+1), s = (m-1)/(m+1)


def exp(x) -> np.ndarray:
    """e**x, float64, for any real array (``inf`` above ~709.78, 0 below ~-745.13, NaN stays NaN)."""
    x = np.asarray(x, np.float64)
    xc = np.clip(x, -746.0, 710.0)
    k = np.rint(xc * _INV_LN2)
    r = (xc - k * _LN2_HI) - k * _LN2_LO  # |r| <= ln2/2: the Taylor series to r**13 is below an ulp
    p = np.full(r.shape, _EXP_TAYLOR[-1])
    for c in reversed(_EXP_TAYLOR[:-1]):
        p = p * r
        p = p + c
    with np.errstate(invalid="ignore"):
        kk = np.nan_to_num(k).astype(np.int64)
    with np.errstate(over="ignore"):
        out = np.ldexp(p, kk)
    return np.where(np.isnan(x), x, out)


def log(x) -> np.ndarray:
    """Natural log, float64 (``-inf`` at 0, NaN below 0 and for NaN, ``inf`` at ``inf``)."""
    x = np.asarray(x, np.float64)
    ok = np.isfinite(x) & (x > 0)
    m, e = np.frexp(np.where(ok, x, 1.0))  # m in [0.5, 1)
    low = m < np.sqrt(0.5)
    m = np.where(low, m * 2.0, m)  # m in [sqrt(1/2), sqrt(2))
    e = (e - low).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)  # |s| <= 0.1716
    s2 = s * s
    p = np.full(s.shape, _LOG_SERIES[-1])
    for c in reversed(_LOG_SERIES[:-1]):
        p = p * s2
        p = p + c
    out = e * _LN2_HI + (s * p + e * _LN2_LO)
    with np.errstate(divide="ignore", invalid="ignore"):
        special = np.log(np.where(ok, 1.0, x))  # 0 -> -inf, < 0 -> nan, inf -> inf, nan -> nan: exact everywhere
    return np.where(ok, out, special)

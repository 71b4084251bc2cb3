"""Feature batches: many observations' features in the layout a policy wants.

A batch is a :class:`mlopt.Log` / ``LogView``, a mapping from feature name
to an array ``[n, *shape]``, or one 2-D array ``[n, W]`` whose columns are
the features' elements flattened in spec order (``W`` = total elements; a
single row may be 1-D). Problem-neutral: the feature specs are an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import FeatureError
from ..log import TensorSpec


def _widths(features: Sequence[TensorSpec]) -> list[int]:
    return [int(s.element_count) for s in features]


def feature_columns(batch, features: Sequence[TensorSpec]) -> list[np.ndarray]:
    """One C-contiguous array ``[n, *shape]`` in the spec's dtype per feature."""
    widths = _widths(features)
    if isinstance(batch, np.ndarray):
        x = batch[None, :] if batch.ndim == 1 else batch
        if x.ndim != 2 or x.shape[1] != sum(widths):
            raise FeatureError(f"feature array must be [n, {sum(widths)}], got {list(batch.shape)}")
        cols, at = [], 0
        for spec, k in zip(features, widths):
            cols.append(_as_column(x[:, at : at + k], spec))
            at += k
        return cols
    if isinstance(batch, Mapping) or hasattr(batch, "__getitem__"):
        cols = []
        for spec, k in zip(features, widths):
            try:
                col = np.asarray(batch[spec.name])
            except KeyError:
                raise FeatureError(f"batch has no feature {spec.name!r}") from None
            if col.ndim == 0:
                col = col.reshape(1)
            if col.size % k or (col.ndim >= 1 and len(col) * k != col.size):
                raise FeatureError(f"feature {spec.name!r}: {list(col.shape)} is not [n, "
                                   f"{', '.join(map(str, spec.shape))}]")
            cols.append(_as_column(col.reshape(len(col), k), spec))
        if len({len(c) for c in cols}) > 1:
            raise FeatureError("feature columns have different lengths")
        return cols
    raise TypeError(f"cannot read features from {type(batch).__name__}")


def _as_column(flat: np.ndarray, spec: TensorSpec) -> np.ndarray:
    return np.ascontiguousarray(flat, dtype=spec.dtype).reshape((len(flat), *spec.shape))


def feature_matrix(batch, features: Sequence[TensorSpec]) -> np.ndarray:
    """``[n, W]``: every feature's elements flattened, in spec order. The
    dtype is the features' common dtype (float64 when they differ). A 2-D
    array input is returned as it is when it already has that width."""
    widths = _widths(features)
    if isinstance(batch, np.ndarray):
        x = batch[None, :] if batch.ndim == 1 else batch
        if x.ndim != 2 or x.shape[1] != sum(widths):
            raise FeatureError(f"feature array must be [n, {sum(widths)}], got {list(batch.shape)}")
        return x
    cols = feature_columns(batch, features)
    dtypes = {c.dtype for c in cols}
    dtype = dtypes.pop() if len(dtypes) == 1 else np.float64
    n = len(cols[0]) if cols else 0
    if not cols:
        return np.zeros((n, 0), dtype)
    return np.concatenate([c.reshape(n, k).astype(dtype, copy=False) for c, k in zip(cols, widths)], axis=1)

"""Feature vocabularies: per-feature quantile boundaries for normalization.

Same on-disk format as ml-compiler-opt's ``vocab/<feature>.buckets`` files: one
boundary per line, ascending. A raw value ``v`` of a feature with boundaries
``b`` (length ``K``) normalizes to its bucket position ``p = #{b_i <= v} / K``
in [0, 1] (TensorFlow's Bucketize divided by K), and the policy sees ``p`` and
``p * p``. Values are compared in float32, as the exported graph does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from . import inliner

DEFAULT_BUCKETS = 1000


class VocabError(ValueError):
    """A vocabulary directory or file that cannot be used."""


class Vocab:
    """Quantile boundaries per feature (float64 as stored, float32 as used)."""

    def __init__(self, boundaries: Mapping[str, Iterable[float]], features: Iterable[str] = inliner.FEATURES):
        self.features: tuple[str, ...] = tuple(features)
        missing = [f for f in self.features if f not in boundaries]
        if missing:
            raise VocabError(f"vocab has no boundaries for feature(s): {', '.join(missing)}")
        self.boundaries: dict[str, np.ndarray] = {}
        for name in self.features:
            b = np.asarray(list(boundaries[name]), dtype=np.float64)
            if b.ndim != 1 or not np.all(np.isfinite(b)):
                raise VocabError(f"vocab boundaries of {name!r} must be finite numbers")
            if np.any(np.diff(b) < 0):
                raise VocabError(f"vocab boundaries of {name!r} are not sorted ascending")
            self.boundaries[name] = b

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_logs(cls, logs, num_buckets: int = DEFAULT_BUCKETS) -> "Vocab":
        """Quantiles of every feature over the observations of `logs`.

        `logs`: paths or :class:`mlopt.Log` objects with the inliner features.
        """
        from .log import Log, read_log

        if num_buckets < 1:
            raise ValueError("num_buckets must be >= 1")
        columns: dict[str, list[np.ndarray]] = {f: [] for f in inliner.FEATURES}
        for item in logs:
            log = item if isinstance(item, Log) else read_log(item)
            for f in inliner.FEATURES:
                if f not in log:
                    raise VocabError(f"{_where(item)}: log has no feature {f!r}")
                arr = np.asarray(log[f])
                columns[f].append(arr.reshape(len(arr), -1)[:, 0] if len(arr) else arr.reshape(0))
        out = {}
        for f, parts in columns.items():
            values = np.concatenate(parts) if parts else np.zeros(0)
            if values.size == 0:
                raise VocabError("no observations in the given logs")
            q = np.quantile(values.astype(np.float64), np.linspace(0.0, 1.0, num_buckets))
            out[f] = q
        return cls(out)

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "Vocab":
        """Read ``<directory>/<feature>.buckets`` for the 38 inliner features."""
        directory = Path(directory)
        if not directory.is_dir():
            raise VocabError(f"{directory}: not a vocab directory")
        out = {}
        for f in inliner.FEATURES:
            path = directory / f"{f}.buckets"
            if not path.exists():
                raise VocabError(f"{path}: missing (vocab needs one .buckets file per feature)")
            values = []
            for lineno, line in enumerate(path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    values.append(float(line))
                except ValueError:
                    raise VocabError(f"{path}:{lineno}: not a number: {line.strip()[:40]!r}") from None
            out[f] = values
        return cls(out)

    def save(self, directory: str | os.PathLike, overwrite: bool = False) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for f in self.features:
            path = directory / f"{f}.buckets"
            if path.exists() and not overwrite:
                raise FileExistsError(f"{path} exists (use overwrite=True / --force)")
        for f in self.features:
            text = "".join(f"{float(v)!r}\n" for v in self.boundaries[f])
            (directory / f"{f}.buckets").write_text(text)
        return directory

    # -- use ---------------------------------------------------------------------------
    def inverse_counts(self) -> np.ndarray:
        """float32 1/K per feature (0 for a feature without boundaries)."""
        inv = np.zeros(len(self.features), dtype=np.float32)
        for i, f in enumerate(self.features):
            if len(self.boundaries[f]):
                inv[i] = np.float32(1.0) / np.float32(len(self.boundaries[f]))
        return inv

    def normalize(self, x: np.ndarray) -> np.ndarray:
        """Raw features [n, 38] (any numeric dtype) -> [n, 76] float32: positions, then squares."""
        inv = self.inverse_counts()
        xf = np.asarray(x).astype(np.float32)
        n = len(self.features)
        out = np.empty((xf.shape[0], 2 * n), dtype=np.float32)
        for i, f in enumerate(self.features):
            b = self.boundaries[f].astype(np.float32)
            index = np.searchsorted(b, xf[:, i], side="right").astype(np.float32)
            out[:, i] = index * inv[i]
        np.multiply(out[:, :n], out[:, :n], out=out[:, n:])
        return out


def _where(item) -> str:
    return str(item) if isinstance(item, (str, os.PathLike)) else "log"

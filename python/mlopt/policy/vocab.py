"""Feature vocabularies: per-feature quantile boundaries for normalization.

Same on-disk format as ml-compiler-opt's ``vocab/<feature>.buckets`` files: one
boundary per line, ascending. A raw value ``v`` of a feature with boundaries
``b`` (length ``K``) normalizes to its bucket position ``p = #{b_i <= v} / K``
in [0, 1] (TensorFlow's Bucketize divided by K), and the policy sees ``p`` and
``p * p``. Values are compared in float32, as the exported graph does.

Float embeddings (LLVM 22's IR2Vec ``callee_embedding``/``caller_embedding``)
are z-scored per element instead, as ml-compiler-opt does: ``z = (v - mean)
* (1 / std)`` in float32, and the policy sees ``z`` and ``z * z``; stored as
``<feature>.zscore`` (one ``mean std`` line per element).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ..errors import OutputExistsError, VocabError
from ..log import Log, read_log

DEFAULT_BUCKETS = 1000


class Vocab:
    """Quantile boundaries per feature (float64 as stored, float32 as used).

    ``features`` names the features and their order (default: the keys of
    ``boundaries``, then of ``zscore``). ``zscore``: per-element ``(mean,
    std)`` arrays of the features normalized by z-score instead of buckets.
    Problem-neutral: a policy picks the features it needs.
    """

    def __init__(self, boundaries: Mapping[str, Iterable[float]], features: Iterable[str] | None = None,
                 zscore: Mapping[str, tuple[Iterable[float], Iterable[float]]] | None = None):
        zscore = dict(zscore or {})
        self.features: tuple[str, ...] = tuple([*boundaries, *(f for f in zscore if f not in boundaries)]
                                               if features is None else features)
        missing = [f for f in self.features if f not in boundaries and f not in zscore]
        if missing:
            raise VocabError(f"vocab has no boundaries for feature(s): {', '.join(missing)}")
        self.zscore: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name in self.features:
            if name not in zscore:
                continue
            mean, std = (_float64(a).reshape(-1) for a in zscore[name])
            if mean.shape != std.shape or not np.all(np.isfinite(mean)) or not np.all(np.isfinite(std)) \
                    or np.any(std <= 0):
                raise VocabError(f"z-score of {name!r} needs finite means and positive standard deviations, "
                                 "one of each per element")
            self.zscore[name] = (mean, std)
        self.boundaries: dict[str, np.ndarray] = {}
        for name in self.features:
            if name in self.zscore:
                continue
            b = _float64(boundaries[name])
            if b.ndim != 1 or not np.all(np.isfinite(b)):
                raise VocabError(f"vocab boundaries of {name!r} must be finite numbers")
            if np.any(np.diff(b) < 0):
                raise VocabError(f"vocab boundaries of {name!r} are not sorted ascending")
            self.boundaries[name] = b
        self._fingerprint: bytes | None = None  # fingerprint(), made once
        self._as_float32: tuple[np.ndarray, dict[str, np.ndarray]] | None = None  # _float32(), made once

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_logs(cls, logs, num_buckets: int = DEFAULT_BUCKETS, features: Iterable[str] | None = None,
                  zscore: Iterable[str] = ()) -> Vocab:
        """Quantiles of each feature over the observations of `logs`.

        `logs`: paths or :class:`mlopt.Log` objects. `features`: the names to
        compute (default: every feature column of the first log). A feature
        with a shape (e.g. [33]) pools all its elements. Features named in
        `zscore` get a per-element mean and standard deviation instead.
        """
        if num_buckets < 1:
            raise VocabError(f"the number of buckets must be at least 1, not {num_buckets}")
        columns: dict[str, list[np.ndarray]] | None = None if features is None else {f: [] for f in features}
        for item in logs:
            log = item if isinstance(item, Log) else read_log(item)
            if columns is None:
                columns = {f: [] for f in log.feature_names}
            for f in columns:
                if f not in log:
                    raise VocabError(f"{_where(item)}: log has no feature {f!r}")
                columns[f].append(_rows(np.asarray(log[f])))
        if not columns:
            raise VocabError("no features in the given logs")
        return cls.from_columns(columns, num_buckets, zscore)

    @classmethod
    def from_columns(cls, columns: Mapping[str, Iterable[np.ndarray]], num_buckets: int = DEFAULT_BUCKETS,
                     zscore: Iterable[str] = ()) -> Vocab:
        """From each feature's observations (arrays ``[n, *shape]``, concatenated)."""
        zscore = set(zscore)
        out, scores = {}, {}
        for f, parts in columns.items():
            parts = [np.asarray(p) for p in parts]
            rows = np.concatenate([_rows(p) for p in parts]) if parts else np.zeros((0, 1))
            if rows.size == 0:
                raise VocabError("no observations in the given logs")
            if f in zscore:
                scores[f] = z_score(rows)
            else:
                values = rows.reshape(-1).astype(np.float64)
                values = values[~np.isnan(values)]  # stock LLVM sends NaN in some regalloc features
                if values.size == 0:
                    raise VocabError(f"feature {f!r} has no values that are numbers")
                out[f] = np.quantile(values, np.linspace(0.0, 1.0, num_buckets))
        return cls(out, list(columns), scores)

    @classmethod
    def load(cls, directory: str | os.PathLike, features: Iterable[str] | None = None) -> Vocab:
        """Read ``<directory>/<feature>.buckets`` for each of `features`
        (default: every ``.buckets`` file there, by name)."""
        directory = Path(directory)
        if not directory.is_dir():
            raise VocabError(f"{directory}: not a vocab directory")
        if features is None:
            features = sorted([p.name[: -len(".buckets")] for p in directory.glob("*.buckets")] +
                              [p.name[: -len(".zscore")] for p in directory.glob("*.zscore")])
            if not features:
                raise VocabError(f"{directory}: no .buckets files")
        out, scores = {}, {}
        for f in features:
            path = directory / f"{f}.buckets"
            if not path.exists() and (directory / f"{f}.zscore").exists():
                scores[f] = _read_zscore(directory / f"{f}.zscore")
                continue
            if not path.exists():
                raise VocabError(f"{path}: missing (vocab needs one .buckets file per feature)")
            values = []
            for lineno, line in enumerate(_lines(path), 1):
                if not line.strip():
                    continue
                try:
                    values.append(float(line))
                except ValueError:
                    raise VocabError(f"{path}:{lineno}: not a number: {line.strip()[:40]!r}") from None
            out[f] = values
        return cls(out, features, scores)

    def save(self, directory: str | os.PathLike, overwrite: bool = False) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for f in self.features:
            path = directory / f"{f}{'.zscore' if f in self.zscore else '.buckets'}"
            if path.exists() and not overwrite:
                raise OutputExistsError(path)
        for f in self.features:
            if f in self.zscore:
                mean, std = self.zscore[f]
                text = "".join(f"{float(m)!r} {float(d)!r}\n" for m, d in zip(mean, std))
                (directory / f"{f}.zscore").write_text(text)
            else:
                text = "".join(f"{float(v)!r}\n" for v in self.boundaries[f])
                (directory / f"{f}.buckets").write_text(text)
        return directory

    # -- use ---------------------------------------------------------------------------
    def inverse_counts(self) -> np.ndarray:
        """float32 1/K per feature (0 for a feature without boundaries)."""
        inv = np.zeros(len(self.features), dtype=np.float32)
        for i, f in enumerate(self.features):
            if f in self.boundaries and len(self.boundaries[f]):
                inv[i] = np.float32(1.0) / np.float32(len(self.boundaries[f]))
        return inv

    def _float32(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(inverse_counts(), float32 boundaries per bucketed feature), as normalize() compares in float32."""
        if self._as_float32 is None:
            self._as_float32 = (self.inverse_counts(),
                                {f: b.astype(np.float32) for f, b in self.boundaries.items()})
        return self._as_float32

    def fingerprint(self) -> bytes:
        """A digest of everything normalization depends on: the features in
        order, their boundaries and z-scores (equal vocabs, equal digests)."""
        if self._fingerprint is None:
            self._fingerprint = self._digest()
        return self._fingerprint

    def _digest(self) -> bytes:
        import hashlib

        h = hashlib.blake2b(digest_size=16)
        for f in self.features:
            h.update(f.encode() + b"\0")
            parts = self.zscore[f] if f in self.zscore else (self.boundaries[f],)
            for a in parts:
                h.update(b"%d\0" % a.size + a.tobytes())
        return h.digest()

    def subset(self, features: Iterable[str]) -> Vocab:
        """The boundaries of `features` only, in that order (VocabError if one is missing); this vocab
        itself when `features` are its own, in its order (a Vocab is not changed after it is made)."""
        features = tuple(features)
        if features == self.features:
            return self
        return Vocab(self.boundaries, features, self.zscore)

    def zscore_constants(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """float32 (mean, 1/std) of a z-scored feature, as the graph uses them."""
        mean, std = self.zscore[name]
        return mean.astype(np.float32), (np.float32(1.0) / std.astype(np.float32)).astype(np.float32)

    def normalize(self, x: np.ndarray, widths: Iterable[int] | None = None) -> np.ndarray:
        """Raw features [n, w] (any numeric dtype) -> [n, 2w] float32: bucket
        positions, then their squares. Column block i (``widths[i]`` columns,
        default 1 each) belongs to feature i."""
        widths = [1] * len(self.features) if widths is None else list(widths)
        if len(widths) != len(self.features):
            raise VocabError(f"{len(widths)} feature widths for {len(self.features)} vocab features")
        xf = np.asarray(x).astype(np.float32)
        w = sum(widths)
        if xf.ndim != 2 or xf.shape[1] != w:
            raise VocabError(f"expected features [n, {w}], got {list(xf.shape)}")
        inv, bounds = self._float32()
        out = np.empty((xf.shape[0], 2 * w), dtype=np.float32)
        at = 0
        for i, (f, k) in enumerate(zip(self.features, widths)):
            if f in self.zscore:
                mean, inv_std = self.zscore_constants(f)
                if mean.shape != (k,):
                    raise VocabError(f"z-score of {f!r} has {mean.size} elements, the feature {k}")
                out[:, at : at + k] = (xf[:, at : at + k] - mean) * inv_std
                at += k
                continue
            index = np.searchsorted(bounds[f], xf[:, at : at + k], side="right").astype(np.float32)
            out[:, at : at + k] = index * inv[i]
            at += k
        np.multiply(out[:, :w], out[:, :w], out=out[:, w:])
        return out


def _float64(values) -> np.ndarray:
    """``values`` (an array or any iterable of numbers) as a new float64 array; an array is copied
    whole, not walked element by element."""
    return np.array(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64)


def _rows(column: np.ndarray) -> np.ndarray:
    """``[n, *shape]`` -> ``[n, elements]`` (also for n = 0)."""
    return column.reshape(len(column), int(np.prod(column.shape[1:], dtype=np.int64)))


def z_score(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column (mean, std) of ``[n, k]`` observations; a constant column
    gets std 1 (it normalizes to 0)."""
    rows = np.asarray(rows, dtype=np.float64)
    mean = rows.mean(axis=0)
    std = rows.std(axis=0)
    std[~(std > 1e-12)] = 1.0
    return mean, std


def _lines(path: Path) -> list[str]:
    """The lines of a vocab file; bytes that are not UTF-8 (never part of a
    number) show as \\xNN in the error that names them."""
    return path.read_bytes().decode("utf-8", "backslashreplace").splitlines()


def _read_zscore(path: Path) -> tuple[list[float], list[float]]:
    means, stds = [], []
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            m, d = (float(v) for v in parts)
        except ValueError:
            raise VocabError(f"{path}:{lineno}: expected 'mean std', got {line.strip()[:40]!r}") from None
        means.append(m)
        stds.append(d)
    return means, stds


def _where(item) -> str:
    return str(item) if isinstance(item, (str, os.PathLike)) else "log"

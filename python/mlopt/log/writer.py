"""Training logs written byte-identical to LLVM 19's ``llvm::Logger``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from .._native import core
from ..errors import LogUsageError
from .columns import _Columns
from .header import TensorSpec

PathLike = str | os.PathLike


def _as_tensor(spec: TensorSpec, value, what: str = "feature") -> np.ndarray:
    """value as a C-contiguous array of spec's dtype; refuses lossy casts."""
    arr = np.asarray(value)
    if arr.dtype != spec.dtype:
        converted = arr.astype(spec.dtype)
        lossless = arr.dtype.kind == "f" and spec.dtype.kind == "f"
        if not lossless:
            with np.errstate(invalid="ignore"):
                lossless = arr.dtype.kind in "biuf" and np.array_equal(converted, arr)
        if not lossless:
            raise LogUsageError(
                f"{what} {spec.name!r}: values of dtype {arr.dtype} do not fit {spec.type}"
            )
        arr = converted
    if arr.size != spec.element_count:
        raise LogUsageError(
            f"{what} {spec.name!r}: got {arr.size} values, its shape {list(spec.shape)} "
            f"holds {spec.element_count}"
        )
    return np.ascontiguousarray(arr)


class LogWriter:
    """Writes a training log byte-identical to LLVM 19's ``llvm::Logger``.

    ``target`` is a path (an existing file is refused unless
    ``overwrite=True``), an open file descriptor, or None to build the log in
    memory (``getvalue()``)::

        with mlopt.LogWriter("out.log", [mlopt.TensorSpec("a", "int64_t", [1])],
                             score=mlopt.TensorSpec("reward", "float", [1])) as w:
            w.switch_context("f")
            w.log_observation({"a": 5}, score=0.25)

    Calls out of order raise :class:`LogUsageError` instead of writing a
    corrupt log.
    """

    def __init__(
        self,
        target: PathLike | int | None,
        features: Sequence[TensorSpec],
        score: TensorSpec | None = None,
        advice: TensorSpec | None = None,
        *,
        overwrite: bool = False,
    ):
        self._w = core().TrainingLogWriter(target, list(features), score, advice, overwrite)
        self.features: tuple[TensorSpec, ...] = tuple(features)
        self.score = score
        self.advice = advice
        self._index = {}
        for i, spec in enumerate(self.features):
            self._index.setdefault(spec.name, i)
        self._closed = False

    def _feature(self, key: str | int) -> int:
        if isinstance(key, (int, np.integer)):
            return int(key)
        try:
            return self._index[key]
        except KeyError:
            raise LogUsageError(f"no feature named {key!r}") from None

    def switch_context(self, name: str | bytes) -> None:
        self._w.switch_context(name)

    def start_observation(self) -> None:
        self._w.start_observation()

    def log_tensor(self, feature: str | int, value) -> None:
        i = self._feature(feature)
        if not 0 <= i < len(self.features):
            raise LogUsageError(f"feature index {i} out of range ({len(self.features)} features)")
        self._w.log_tensor_bytes(i, _as_tensor(self.features[i], value))

    def end_observation(self) -> None:
        self._w.end_observation()

    def log_reward(self, value) -> None:
        if self.score is None:
            raise LogUsageError("log_reward: this log has no score spec")
        self._w.log_reward_bytes(_as_tensor(self.score, value, "score"))

    def log_observation(self, values: Mapping[str, object] | Sequence[object], *, score=None) -> None:
        """One whole observation (all features, in order) and its score."""
        if isinstance(values, Mapping):
            missing = [s.name for s in self.features if s.name not in values]
            if missing:
                raise LogUsageError(f"log_observation: missing feature(s) {', '.join(missing)}")
            values = [values[s.name] for s in self.features]
        if len(values) != len(self.features):
            raise LogUsageError(f"log_observation: got {len(values)} values for {len(self.features)} features")
        tensors = [_as_tensor(s, v) for s, v in zip(self.features, values)]
        if self.score is not None and score is None:
            raise LogUsageError("log_observation: this log has a score; pass score=")
        self.start_observation()
        for i, t in enumerate(tensors):
            self._w.log_tensor_bytes(i, t)
        self.end_observation()
        if score is not None:
            self.log_reward(score)

    def log_observations(self, columns, scores=None) -> None:
        """Many observations from columns ``[n, *shape]`` (a dict, a list or a Log)."""
        if isinstance(columns, _Columns):
            if scores is None:
                scores = columns.score
            columns = [columns[i] for i in range(len(columns.features))]
        elif isinstance(columns, Mapping):
            columns = [columns[s.name] for s in self.features]
        if len(columns) != len(self.features):
            raise LogUsageError(f"log_observations: got {len(columns)} columns for {len(self.features)} features")
        arrays = [np.asarray(c) for c in columns]
        n = len(arrays[0]) if arrays else (0 if scores is None else len(scores))
        prepared = []
        for spec, arr in zip(self.features, arrays):
            if len(arr) != n:
                raise LogUsageError(f"log_observations: column {spec.name!r} has {len(arr)} rows, expected {n}")
            prepared.append(_as_tensor(TensorSpec(spec.name, spec.type, [n, *spec.shape]), arr))
        score_arr = None
        if scores is not None:
            if self.score is None:
                raise LogUsageError("log_observations: this log has no score spec")
            rows = TensorSpec(self.score.name, self.score.type, [n, *self.score.shape])
            score_arr = _as_tensor(rows, scores, "score")
        elif self.score is not None:
            raise LogUsageError("log_observations: this log has a score; pass scores=")
        self._w.log_observations_bytes(n, prepared, score_arr)

    def flush(self) -> None:
        self._w.flush()

    def getvalue(self) -> bytes:
        """The bytes written so far (in-memory writers only)."""
        return self._w.getvalue()

    def close(self) -> None:
        """Flushes and closes; raises if an observation was left open."""
        if self._closed:
            return
        self._closed = True
        open_obs = self._w.observation_open
        self._w.close()
        if open_obs:
            raise LogUsageError("close: an observation is still open; the log ends mid-record")

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self._w.close()
            self._closed = True

"""A whole training log read into numpy: one contiguous array per feature.

The format (LLVM's ``TrainingLogger``): a JSON header line with the tensor
specs, then ``{"context":...}``, ``{"observation":N}`` + raw tensor bytes +
``\\n`` and, when the header has a score, ``{"outcome":N}`` + raw score bytes +
``\\n``. Parsing happens in the C++ core (``TrainingLogReader``).
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from .._native import core
from ..errors import FeatureError, LogFormatError, LogUsageError, OutputExistsError, TruncatedLogWarning
from .header import LogHeader, TensorSpec

PathLike = str | os.PathLike


class _Columns:
    """Shared read API of a whole log and of a subset of its rows."""

    header: LogHeader | None
    contexts: list[str]
    _columns: list[np.ndarray]
    _score: np.ndarray | None
    _context_index: np.ndarray
    _observation_id: np.ndarray

    @property
    def features(self) -> tuple[TensorSpec, ...]:
        return self.header.features if self.header else ()

    @property
    def feature_names(self) -> list[str]:
        return [s.name for s in self.features]

    @property
    def score_spec(self) -> TensorSpec | None:
        return self.header.score if self.header else None

    @property
    def advice_spec(self) -> TensorSpec | None:
        return self.header.advice if self.header else None

    @property
    def score(self) -> np.ndarray | None:
        """The score column ``[n, *shape]``, or None if the log has no score."""
        return self._score

    @property
    def context_index(self) -> np.ndarray:
        """Per row, the index of its context in ``contexts`` (int32)."""
        return self._context_index

    @property
    def observation_id(self) -> np.ndarray:
        """Per row, the observation number within its context (int64)."""
        return self._observation_id

    @property
    def row_contexts(self) -> list[str]:
        return [self.contexts[i] for i in self._context_index]

    def __len__(self) -> int:
        return len(self._observation_id)

    def _index_of(self, name: str) -> int | None:
        """The column of the first feature named ``name`` (a dict made once per header)."""
        features = self.features
        made = getattr(self, "_names", None)
        if made is None or made[0] is not features:
            made = (features, {s.name: i for i, s in reversed(list(enumerate(features)))})
            self._names = made
        return made[1].get(name)

    def __getitem__(self, key: str | int) -> np.ndarray:
        """A feature column by name or index; the score column by its name."""
        if isinstance(key, (int, np.integer)):
            return self._columns[key]
        i = self._index_of(key)
        if i is not None:
            return self._columns[i]
        if self.score_spec is not None and key == self.score_spec.name:
            return self._score
        raise FeatureError(f"no feature or score named {key!r} in this log")

    def __contains__(self, key: str) -> bool:
        return self._index_of(key) is not None or (
            self.score_spec is not None and key == self.score_spec.name
        )

    def keys(self) -> list[str]:
        names = self.feature_names
        if self.score_spec is not None:
            names.append(self.score_spec.name)
        return names

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def to_dict(self) -> dict[str, np.ndarray]:
        return dict(self.items())


class LogView(_Columns):
    """Some rows of a log (e.g. one context); columns are views when possible."""

    def __init__(self, parent: _Columns, rows: np.ndarray | slice):
        self.header = parent.header
        self.contexts = parent.contexts
        self._columns = [c[rows] for c in parent._columns]
        self._score = None if parent._score is None else parent._score[rows]
        self._context_index = parent._context_index[rows]
        self._observation_id = parent._observation_id[rows]

    def __repr__(self) -> str:
        return f"<mlopt.LogView: {len(self)} observations>"


def _rows_of(mask: np.ndarray) -> np.ndarray | slice:
    rows = np.flatnonzero(mask)
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


class Log(_Columns):
    """A whole training log, one contiguous numpy array per feature.

    ``log["callee_users"]`` is ``[n_observations, *shape]`` in the feature's
    dtype; ``log.score`` is the score column (None without a score);
    ``log.contexts`` lists context names in first-seen order (contexts with no
    observation included) and ``log.context_index`` / ``log.observation_id``
    say, per row, which context and which observation it is.
    """

    def __init__(self, raw: dict, source: str | None = None):
        self.source = source
        if raw["has_header"]:
            self.header = LogHeader(tuple(raw["features"]), raw["score"], raw["advice"])
        else:
            self.header = None
        self.contexts = list(raw["contexts"])
        self._columns = list(raw["columns"])
        self._score = raw["score_column"]
        self._context_index = raw["context_index"]
        self._observation_id = raw["observation_id"]
        self.input_bytes: int = raw["input_bytes"]
        self.truncated_bytes: int = raw["truncated_bytes"]
        self.truncation_reason: str = raw["truncation_reason"]

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays of this log."""
        n = sum(c.nbytes for c in self._columns)
        n += self._context_index.nbytes + self._observation_id.nbytes
        return n + (0 if self._score is None else self._score.nbytes)

    def context(self, name: str) -> LogView:
        """The rows of one context (empty for a context without observations)."""
        try:
            index = self.contexts.index(name)
        except ValueError:
            raise KeyError(f"no context {name!r} in this log") from None
        return LogView(self, _rows_of(self._context_index == index))

    def by_context(self) -> dict[str, LogView]:
        """Every context, in first-seen order, with its rows."""
        return {name: self.context(name) for name in self.contexts}

    def to_npz(self, path: PathLike, *, overwrite: bool = False) -> None:
        """Saves columns (by name), score, contexts and header to ``.npz``."""
        arrays: dict[str, np.ndarray] = {}
        for name, column in zip(self.feature_names, self._columns):
            if name in arrays:
                raise LogUsageError(f"feature name {name!r} appears twice; cannot save by name")
            arrays[name] = column
        if self.score_spec is not None:
            if self.score_spec.name in arrays:
                raise LogUsageError(f"score {self.score_spec.name!r} has the name of a feature")
            arrays[self.score_spec.name] = self._score
        arrays["_context_index"] = self._context_index
        arrays["_observation_id"] = self._observation_id
        arrays["_contexts"] = np.array(self.contexts, dtype=str)
        arrays["_header"] = np.array(self.header.to_json() if self.header else "")
        path = os.fspath(path)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        try:
            f = open(path, "wb" if overwrite else "xb")
        except FileExistsError:
            raise OutputExistsError(path) from None
        with f:
            np.savez(f, **arrays)

    def __repr__(self) -> str:
        src = f" from {self.source}" if self.source else ""
        return (
            f"<mlopt.Log{src}: {len(self)} observations, {len(self.features)} features, "
            f"{len(self.contexts)} contexts>"
        )


def read_log(source: PathLike | bytes | bytearray | memoryview, *, allow_truncated: bool = False) -> Log:
    """Reads a whole training log (a path, or the log's bytes) into numpy.

    Malformed input raises :class:`LogFormatError` with the byte offset and
    the reason; so does an empty input (0 bytes is not a log: a compiler
    that died before writing its header). With ``allow_truncated=True`` an incomplete last record (a
    log cut off mid-write) is dropped with a :class:`TruncatedLogWarning`,
    and ``log.truncated_bytes`` says how many bytes were dropped.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = core().read_log_buffer(source, allow_truncated)
        path = None
    else:
        path = os.fspath(source)
        try:
            raw = core().read_log_file(path, allow_truncated)
        except LogFormatError as e:
            raise e.with_path(path) from None
    log = Log(raw, path)
    if log.truncated_bytes:
        warnings.warn(
            f"{path or 'log'}: dropped an incomplete last record "
            f"({log.truncated_bytes} bytes): {log.truncation_reason}",
            TruncatedLogWarning,
            stacklevel=2,
        )
    elif log.truncation_reason:  # an empty input
        warnings.warn(f"{path or 'log'}: {log.truncation_reason}", TruncatedLogWarning, stacklevel=2)
    return log

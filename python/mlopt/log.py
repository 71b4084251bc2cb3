"""MLGO training logs: read them into numpy, stream them, write them.

The format (LLVM's ``TrainingLogger``): a JSON header line with the tensor
specs, then ``{"context":...}``, ``{"observation":N}`` + raw tensor bytes +
``\\n`` and, when the header has a score, ``{"outcome":N}`` + raw score bytes +
``\\n``. Parsing and writing happen in the C++ core (``mlopt._core``).
"""

from __future__ import annotations

import os
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import numpy as np

from . import _core
from ._core import TensorSpec
from ._errors import LogFormatError, LogUsageError, TruncatedLogWarning

PathLike = str | os.PathLike


@dataclass(frozen=True)
class LogHeader:
    """The specs of a log: its features, and its score and advice if any."""

    features: tuple[TensorSpec, ...]
    score: TensorSpec | None = None
    advice: TensorSpec | None = None

    def to_json(self) -> str:
        """The header line as LLVM writes it (without the newline)."""
        parts = ['{"features":[' + ",".join(s.to_json() for s in self.features) + "]"]
        if self.score is not None:
            parts.append('"score":' + self.score.to_json())
        if self.advice is not None:
            parts.append('"advice":' + self.advice.to_json())
        return ",".join(parts) + "}"


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
        for i, spec in enumerate(self.features):
            if spec.name == name:
                return i
        return None

    def __getitem__(self, key: str | int) -> np.ndarray:
        """A feature column by name or index; the score column by its name."""
        if isinstance(key, (int, np.integer)):
            return self._columns[key]
        i = self._index_of(key)
        if i is not None:
            return self._columns[i]
        if self.score_spec is not None and key == self.score_spec.name:
            return self._score
        raise KeyError(f"no feature or score named {key!r} in this log")

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
                raise ValueError(f"feature name {name!r} appears twice; cannot save by name")
            arrays[name] = column
        if self.score_spec is not None:
            if self.score_spec.name in arrays:
                raise ValueError(f"score {self.score_spec.name!r} has the name of a feature")
            arrays[self.score_spec.name] = self._score
        arrays["_context_index"] = self._context_index
        arrays["_observation_id"] = self._observation_id
        arrays["_contexts"] = np.array(self.contexts, dtype=str)
        arrays["_header"] = np.array(self.header.to_json() if self.header else "")
        mode = "wb" if overwrite else "xb"
        with open(path, mode) as f:
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
    the reason. With ``allow_truncated=True`` an incomplete last record (a
    log cut off mid-write) is dropped with a :class:`TruncatedLogWarning`,
    and ``log.truncated_bytes`` says how many bytes were dropped.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = _core.read_log_buffer(source, allow_truncated)
        path = None
    else:
        path = os.fspath(source)
        try:
            raw = _core.read_log_file(path, allow_truncated)
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
    return log


class StreamSchema:
    """The layout of one stream's observations, from its header."""

    def __init__(self, header: LogHeader, offsets: Sequence[int]):
        self.header = header
        self.features = header.features
        self.score = header.score
        self.advice = header.advice
        self.offsets = list(offsets)
        self.index: dict[str, int] = {}
        for i, spec in enumerate(self.features):
            self.index.setdefault(spec.name, i)

    @classmethod
    def of(cls, parser) -> "StreamSchema":
        header = LogHeader(tuple(parser.features), parser.score, parser.advice)
        return cls(header, parser.feature_offsets)


class Observation:
    """One observation from a stream: its context, number, features and score."""

    __slots__ = ("context", "id", "payload", "score_bytes", "schema")

    def __init__(self, schema: StreamSchema, context: str, id: int, payload: bytes, score: bytes | None):
        self.schema = schema
        self.context = context
        self.id = id
        self.payload = payload
        self.score_bytes = score

    def __getitem__(self, key: str | int) -> np.ndarray:
        i = key if isinstance(key, int) else self.schema.index[key]
        spec = self.schema.features[i]
        offset = self.schema.offsets[i]
        return np.frombuffer(self.payload, spec.dtype, spec.element_count, offset).reshape(spec.shape)

    @property
    def features(self) -> dict[str, np.ndarray]:
        return {s.name: self[i] for i, s in enumerate(self.schema.features)}

    @property
    def score(self) -> np.ndarray | None:
        spec = self.schema.score
        if self.score_bytes is None or spec is None:
            return None
        return np.frombuffer(self.score_bytes, spec.dtype).reshape(spec.shape)

    def __repr__(self) -> str:
        return f"<mlopt.Observation {self.id} of context {self.context!r}>"


class LogStream:
    """Reads a log or an interactive stream incrementally (file, pipe, FIFO).

    ``source`` is a path, an open binary file, or a file descriptor. Records
    are returned as soon as their bytes have arrived, so this can drive an
    interactive compiler that waits for a reply after each observation::

        with mlopt.LogStream(path) as stream:
            for obs in stream:
                print(obs.context, obs.id, obs["callee_users"])

    ``contexts`` lists every context seen so far, including empty ones.
    """

    def __init__(self, source, *, chunk_size: int = 1 << 16, allow_truncated: bool = False):
        self._owned = None
        self.name = None
        if isinstance(source, int):
            self._read = lambda n: os.read(source, n)
        elif isinstance(source, (str, os.PathLike)):
            self.name = os.fspath(source)
            self._owned = open(source, "rb", buffering=0)
            self._read = self._owned.read
        elif hasattr(source, "read1"):
            self.name = getattr(source, "name", None)
            self._read = source.read1
        elif hasattr(source, "read"):
            self.name = getattr(source, "name", None)
            self._read = source.read
        else:
            raise TypeError("LogStream needs a path, a binary file or a file descriptor")
        self._parser = _core.LogParser()
        self._chunk = chunk_size
        self._allow_truncated = allow_truncated
        self._events: deque = deque()
        self._eof = False
        self.truncated_bytes = 0
        self._schema: StreamSchema | None = None

    def _fill(self) -> bool:
        """Reads one chunk; False at end of input."""
        if self._eof:
            return False
        data = self._read(self._chunk)
        if not data:
            self._eof = True
            try:
                self._parser.finish()
            except LogFormatError as e:
                if not self._allow_truncated:
                    raise e.with_path(self.name) if self.name else e from None
                self.truncated_bytes = self._parser.pending_bytes
            return False
        try:
            self._events.extend(self._parser.feed(data))
        except LogFormatError as e:
            raise e.with_path(self.name) if self.name else e from None
        if self._parser.has_header and self._schema is None:
            self._schema = StreamSchema.of(self._parser)
        return True

    @property
    def header(self) -> LogHeader | None:
        """The header, reading until it has arrived (None for empty input)."""
        while not self._parser.has_header and self._fill():
            pass
        return self._schema.header if self._schema else None

    @property
    def features(self) -> list[TensorSpec]:
        return self._parser.features

    @property
    def score(self) -> TensorSpec | None:
        return self._parser.score

    @property
    def advice(self) -> TensorSpec | None:
        return self._parser.advice

    @property
    def contexts(self) -> list[str]:
        return self._parser.contexts

    @property
    def offset(self) -> int:
        """Bytes parsed so far."""
        return self._parser.offset

    def read_observation(self) -> Observation | None:
        """The next observation, or None at end of input."""
        while True:
            while self._events:
                event = self._events.popleft()
                if event[0] == "observation":
                    _, ctx, oid, payload, score = event
                    return Observation(self._schema, self._parser.contexts[ctx], oid, payload, score)
            if not self._fill():
                return None

    def __iter__(self) -> Iterator[Observation]:
        while (obs := self.read_observation()) is not None:
            yield obs

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> "LogStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
        self._w = _core.TrainingLogWriter(target, list(features), score, advice, overwrite)
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
            score_arr = _as_tensor(TensorSpec(self.score.name, self.score.type, [n, *self.score.shape]), scores, "score")
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

    def __enter__(self) -> "LogWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self._w.close()
            self._closed = True

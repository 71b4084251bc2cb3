"""The trace dataset: the heuristic's training logs and native ``.text``
sizes of every module of a corpus, in one ``.npz`` file the trainer reads
directly (numpy only, no pickle).

Arrays: one per log column (rows of all modules, concatenated, in module
order), ``module_rows`` (int64 offsets, ``len(modules) + 1``: module ``i``
owns rows ``module_rows[i]:module_rows[i+1]``), ``modules`` (names),
``text_size`` (the heuristic's ``.text`` bytes per module) and ``meta``
(JSON: columns, corpus, LLVM and mlopt versions, modules that failed)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import MloptError, OutputExistsError
from ..log import read_log

FORMAT = "mlopt-trace-v1"


@dataclass
class TraceDataset:
    modules: list[str]
    text_size: np.ndarray
    module_rows: np.ndarray
    columns: dict[str, np.ndarray]
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.module_rows[-1])

    def rows_of(self, i: int) -> slice:
        return slice(int(self.module_rows[i]), int(self.module_rows[i + 1]))

    def batches(self) -> dict[str, dict[str, np.ndarray]]:
        """Per module name, its rows of every column (views, no copy); modules without rows left out."""
        out = {}
        for i, m in enumerate(self.modules):
            rows = self.rows_of(i)
            if rows.stop > rows.start:
                out[m] = {k: v[rows] for k, v in self.columns.items()}
        return out

    def module_index(self) -> dict[str, int]:
        return {m: i for i, m in enumerate(self.modules)}

    @classmethod
    def from_logs(cls, modules: Sequence[str], text_sizes: Sequence[int], logs: Sequence[bytes],
                  meta: dict | None = None) -> TraceDataset:
        """One dataset from each module's training log (``b""``: a module
        whose pipeline asked no decision)."""
        offsets, parts = [0], {}
        for log_bytes in logs:
            rows = 0
            if log_bytes:
                log = read_log(log_bytes)
                for k in log.feature_names:
                    parts.setdefault(k, []).append(log[k])
                rows = len(log)
            offsets.append(offsets[-1] + rows)
        columns = {k: np.concatenate(v) for k, v in parts.items()}
        return cls(list(modules), np.array(text_sizes, np.int64), np.array(offsets, np.int64), columns, meta or {})

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        path = Path(path)
        if path.exists() and not force:
            raise OutputExistsError(str(path))
        meta = dict(self.meta, format=FORMAT, columns=list(self.columns))
        arrays = {f"col:{k}": v for k, v in self.columns.items()}
        tmp = path.with_name(path.name + ".partial.npz")
        np.savez(tmp, modules=np.array(self.modules, dtype=str), text_size=self.text_size,
                 module_rows=self.module_rows, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> TraceDataset:
        try:
            z = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise MloptError(f"{path}: not a trace dataset: {e}") from None
        with z:
            try:
                meta = json.loads(bytes(z["meta"]).decode())
                if meta.get("format") != FORMAT:
                    raise MloptError(f"{path}: not a {FORMAT} dataset (format {meta.get('format')!r})")
                columns = {k: z[f"col:{k}"] for k in meta["columns"]}
                return cls([str(m) for m in z["modules"]], z["text_size"], z["module_rows"], columns, meta)
            except KeyError as e:
                raise MloptError(f"{path}: trace dataset is missing {e}") from None

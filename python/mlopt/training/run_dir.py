"""A training run's directory: ``config.json``, ``metrics.jsonl`` (one JSON
object per line, appended as training goes), the exported ``model/``
(``model.tflite`` + ``output_spec.json``), ``policy.npz`` (weights and
vocab, to resume or continue from) and the compiled ``policy.so``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import OutputExistsError


class RunDir:
    def __init__(self, path: str | os.PathLike, *, create: bool = False, force: bool = False):
        self.path = Path(path)
        if create:
            if (self.path / "config.json").exists() and not force:
                raise OutputExistsError(str(self.path / "config.json"))
            self.path.mkdir(parents=True, exist_ok=True)
            (self.path / "metrics.jsonl").write_text("")

    def write_config(self, config: dict) -> None:
        (self.path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    def log_metrics(self, record: dict) -> None:
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def save_policy(self, policy, *, compile_so: bool = True) -> dict:
        """Writes policy.npz, model/ and (unless told not to) policy.so."""
        from ..policy import compile_policy

        policy.save(self.path / "policy.npz", overwrite=True)
        model = self.path / "model"
        if model.exists():
            import shutil

            shutil.rmtree(model)
        policy.export(model)
        out = {"weights": str(self.path / "policy.npz"), "model": str(model)}
        if compile_so:
            out["policy_so"] = str(compile_policy(model, self.path / "policy.so", overwrite=True))
        return out

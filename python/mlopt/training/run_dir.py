"""A training run's directory: ``config.json``, ``metrics.jsonl`` (one JSON
object per line, appended as training goes), the exported ``model/``
(``model.tflite`` + ``output_spec.json``), ``policy.npz`` (weights and
vocab, to resume or continue from) and the compiled ``policy.so``; a
trainer adds its own state (``checkpoint.npz``, ``best/``, ...).

How a trainer opens one (:func:`open_run`, the same for every trainer):
a new or empty directory starts a run; an existing run directory (one
with ``config.json``) is an error unless the caller says which of the two
it wants -- ``force``: start over (everything in it is deleted first:
weights, optimizer state, ``best/``, metrics) or ``resume``: continue from
its state. Never silently the other. A non-empty directory that is not a
run directory is never deleted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..errors import RunDirError

CONFIG = "config.json"


def is_run_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / CONFIG).is_file()


def open_run(path: str | os.PathLike, *, force: bool = False, resume: bool = False,
             resumable: bool = True) -> RunDir:
    """The run directory at ``path``, ready for a trainer (see the module
    docstring). ``run.resumed`` says whether it holds an earlier run to
    continue; ``resumable=False``: the trainer cannot resume (the error
    then only offers ``force``). Raises :class:`RunDirError` (a usage error on the command
    line) for a run that exists without ``force``/``resume``, ``resume``
    without a run, both flags, or a non-empty directory that is no run's."""
    path = Path(path)
    if force and resume:
        raise RunDirError(f"{path}: --force (start over) and --resume (continue) exclude each other")
    exists = is_run_dir(path)
    if resume:
        if not exists:
            raise RunDirError(f"{path}: nothing to resume (no {CONFIG}: not a run directory)")
        return RunDir(path, resumed=True)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{path}: exists and is not a directory")
    if exists:
        if not force:
            how = "--resume to continue it, --force to start over" if resumable else "--force to start over"
            raise RunDirError(f"{path}: a run directory exists ({how})")
        for child in path.iterdir():  # everything of the old run: weights, optimizer state, best/, metrics
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    elif path.is_dir() and any(path.iterdir()):
        raise RunDirError(f"{path}: a non-empty directory that is not a run directory (no {CONFIG}); "
                          "choose a new or empty one")
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("")
    return RunDir(path)


class RunDir:
    """The files of one run directory (``open_run`` to start or resume one)."""

    def __init__(self, path: str | os.PathLike, *, resumed: bool = False):
        self.path = Path(path)
        self.resumed = resumed

    def write_config(self, config: dict) -> None:
        (self.path / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    def read_config(self) -> dict:
        return json.loads((self.path / CONFIG).read_text())

    def log_metrics(self, record: dict) -> None:
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def save_policy(self, policy, *, compile_so: bool = True) -> dict:
        """Writes policy.npz, model/ and (unless told not to) policy.so."""
        from ..policy import compile_policy

        policy.save(self.path / "policy.npz", overwrite=True)
        model = self.path / "model"
        if model.exists():
            shutil.rmtree(model)
        policy.export(model)
        out = {"weights": str(self.path / "policy.npz"), "model": str(model)}
        if compile_so:
            out["policy_so"] = str(compile_policy(model, self.path / "policy.so", overwrite=True))
        return out

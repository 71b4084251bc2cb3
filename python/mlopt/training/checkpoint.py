"""A trainer's checkpoint: ``checkpoint.npz`` in its run directory, written
atomically, holding its arrays and the config it was started with; reading
it back refuses a config that differs (but for ``iterations``)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from ..errors import MloptError


def save_checkpoint(run_dir: Path, config, **arrays) -> None:
    tmp = run_dir / "checkpoint.partial.npz"
    np.savez(tmp, **arrays, config=encoded_json(asdict(config)))
    os.replace(tmp, run_dir / "checkpoint.npz")


def load_checkpoint(run_dir: Path, config) -> dict[str, np.ndarray] | None:
    """The checkpoint's arrays (None without one); a run started with other
    settings is an error naming the first that differs."""
    path = run_dir / "checkpoint.npz"
    if not path.exists():
        return None
    with np.load(path) as z:
        saved = json.loads(bytes(z["config"]).decode())
        mine = json.loads(json.dumps(asdict(config)))  # as saved: tuples are lists
        # A setting newer than the checkpoint was saved with its default.
        saved = json.loads(json.dumps({f.name: f.default for f in fields(config)})) | saved
        changed = [k for k in mine if k != "iterations" and saved.get(k) != mine[k]]
        if changed:
            raise MloptError(f"{path}: the run was started with other settings ({changed[0]}: "
                             f"{saved.get(changed[0])!r}, now {mine[changed[0]]!r})")
        return {k: z[k].copy() for k in z.files if k != "config"}


def encoded_json(value) -> np.ndarray:
    """A JSON value as a uint8 array (stored beside the arrays)."""
    return np.frombuffer(json.dumps(value, sort_keys=True).encode(), np.uint8)


def decoded_json(array: np.ndarray):
    return json.loads(bytes(array).decode())

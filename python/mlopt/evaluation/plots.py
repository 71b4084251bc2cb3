"""PNG plots of an evaluation (matplotlib: ``pip install 'mlopt[plot]'``):
the per-module delta distribution, the cumulative size delta, and -- for a
training run directory with ``metrics.jsonl`` -- the training curve."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import MloptError
from .report import ModuleResult


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MloptError("plots need matplotlib: pip install 'mlopt[plot]'") from None
    return plt


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_evaluation(rows: list[ModuleResult], out_dir: str | os.PathLike, title: str = "") -> list[Path]:
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    deltas = np.array([r.delta_percent for r in rows])
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(deltas, bins=min(50, max(10, len(rows) // 3)), color="#4c72b0")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel(".text delta vs heuristic (%)  [negative = smaller]")
    ax.set_ylabel("modules")
    ax.set_title(title or "per-module .text delta")
    paths.append(_save(plt, fig, out / "delta_distribution.png"))

    order = np.argsort([r.delta for r in rows], kind="stable")
    cumulative = np.cumsum([rows[i].delta for i in order])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(np.arange(1, len(rows) + 1), cumulative, color="#dd8452")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("modules, largest size win first")
    ax.set_ylabel("cumulative .text delta (bytes)")
    ax.set_title(title or "cumulative .text delta")
    paths.append(_save(plt, fig, out / "cumulative_delta.png"))
    return paths


def plot_training_curve(run_dir: str | os.PathLike, out_dir: str | os.PathLike) -> Path | None:
    """The training and validation .text deltas per iteration from ``metrics.jsonl``."""
    metrics = Path(run_dir) / "metrics.jsonl"
    if not metrics.exists():
        return None
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    if not records:
        return None
    plt = _pyplot()
    it = [r.get("iteration", i) for i, r in enumerate(records)]
    fig, ax = plt.subplots(figsize=(7, 4))
    # One sign convention: every series is a total .text delta vs -Oz in percent (- = smaller). Runs
    # written before train_delta_percent existed logged reward = -delta / 100.
    train = [r.get("train_delta_percent", None if r.get("reward") is None else -100.0 * r["reward"])
             for r in records]
    series = ((train, "training .text delta vs -Oz (%, sampled modules)", "#4c72b0"),
              ([r.get("validation_delta_percent") for r in records], "validation .text delta vs -Oz (%)",
               "#c44e52"))
    for ys, label, color in series:
        if any(y is not None for y in ys):
            ax.plot(it, [np.nan if y is None else y for y in ys], label=label, color=color, marker="o")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("iteration")
    ax.set_ylabel("%")
    ax.legend()
    ax.set_title("training curve")
    return _save(plt, fig, Path(out_dir) / "training_curve.png")

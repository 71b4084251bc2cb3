"""PNG plots of an evaluation (matplotlib: ``pip install 'mlopt[plot]'``):
the per-module delta distribution, the cumulative size delta, and -- for a
training run directory with ``metrics.jsonl`` -- the training curve. One
sign convention everywhere: delta vs -Oz, negative = smaller; a title
names the LLVM major that produced the numbers when given."""

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


def _titled(title: str, llvm: int | str | None) -> str:
    return title if llvm is None else f"{title} (LLVM {llvm})"


def plot_evaluation(rows: list[ModuleResult], out_dir: str | os.PathLike, title: str = "", *,
                    llvm: int | str | None = None) -> list[Path]:
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    deltas = np.array([r.delta_percent for r in rows])
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(deltas, bins=min(50, max(10, len(rows) // 3)), color="#4c72b0")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel(".text delta vs -Oz (%)  [negative = smaller]")
    ax.set_ylabel("modules")
    ax.set_title(_titled(title or "per-module .text delta", llvm))
    paths.append(_save(plt, fig, out / "delta_distribution.png"))

    order = np.argsort([r.delta for r in rows], kind="stable")
    cumulative = np.cumsum([rows[i].delta for i in order])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(np.arange(1, len(rows) + 1), cumulative, color="#dd8452")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("modules, largest size win first")
    ax.set_ylabel("cumulative .text delta vs -Oz (bytes)  [negative = smaller]")
    ax.set_title(_titled(title or "cumulative .text delta", llvm))
    paths.append(_save(plt, fig, out / "cumulative_delta.png"))
    return paths


# (metrics key, factor to "delta % vs -Oz, negative = smaller", label, colour): ES logs its reward
# (mean per-module 1 - size/-Oz size: positive = smaller), search its training delta, both their validation
CURVES = (("reward", -100.0, "training (mean per sampled module)", "#4c72b0"),
          ("train_delta_percent", 1.0, "training (total of its modules)", "#55a868"),
          ("validation_delta_percent", 1.0, "validation (total)", "#c44e52"))


def training_curve_series(records: list[dict]) -> dict[str, list[float]]:
    """The curves of a run's metrics records, each as "% vs -Oz, negative =
    smaller" (NaN where a record lacks it); only those present."""
    out = {}
    has_total = any(r.get("train_delta_percent") is not None for r in records)
    for key, factor, label, _ in CURVES:
        if key == "reward" and has_total:
            continue  # ES logs both: its total delta is the objective it reports
        ys = [r.get(key) for r in records]
        if any(y is not None for y in ys):
            out[label] = [np.nan if y is None else factor * y for y in ys]
    return out


def plot_training_curve(run_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                        llvm: int | str | None = None, test: dict[int, float] | None = None) -> Path | None:
    """The training and validation delta per iteration (round) from
    ``metrics.jsonl``, on one axis, one sign convention; ``test``:
    iteration -> test delta of the policy of that iteration (looked at after
    training, never used to choose), drawn as a third curve."""
    metrics = Path(run_dir) / "metrics.jsonl"
    if not metrics.exists():
        return None
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    if not records:
        return None
    plt = _pyplot()
    it = [r.get("iteration", r.get("round", i)) for i, r in enumerate(records)]
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {label: color for _, _, label, color in CURVES}
    for label, ys in training_curve_series(records).items():
        xs = [x for x, y in zip(it, ys) if not np.isnan(y)]  # validation may skip iterations
        ax.plot(xs, [y for y in ys if not np.isnan(y)], label=label, color=colors[label], marker="o", ms=3)
    if test:
        xs = sorted(test)
        ax.plot(xs, [test[x] for x in xs], label="test (total; after training, not used to choose)",
                color="#8172b2", marker="s", ms=4)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("round" if "round" in records[0] else "iteration")
    ax.set_ylabel(".text delta vs -Oz (%)  [negative = smaller]")
    ax.legend()
    ax.set_title(_titled("training curve", llvm))
    return _save(plt, fig, Path(out_dir) / "training_curve.png")

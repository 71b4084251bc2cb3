"""How many training modules each ES step changes: along a run of
``bench_es_ppo.py`` (its validated snapshots, ``es/validated/NNNN.npz``),
the share of the training trace's modules where at least one decision of a
snapshot differs from the previous snapshot's (the steps between two
validations) and from the starting policy's, beside the share a
perturbation of the run's sigma changes (what ``--es-flip-share`` sets).
First order, as sigma calibration measures it: every decision on the
features the heuristic's trajectory logged (``sigma_calibration.py``: the
same subset of modules, about 131,000 decisions, the same bits on any CPU).

    python3 benchmarks/step_flips.py SPLITS PRIOR RUN [RUN ...]    # SPLITS/train's trace (cached)

Prints one line per snapshot and a summary per run: the median share
changed per validation interval over the first and the second half of the
run, and how far the snapshots are from the start."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.training.sigma_calibration import decisions, flip_probe, module_flip_share


def changed_share(probe, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(share of the probe's modules, share of its decisions) where ``a`` and ``b`` differ."""
    diff = a != b
    modules = np.count_nonzero(np.bincount(probe.owner[diff], minlength=probe.modules)) / probe.modules
    return float(modules), float(diff.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, help="the runs' SPLITS (its train/ trace is read from mlopt's cache)")
    ap.add_argument("prior", type=Path, help="the runs' starting policy")
    ap.add_argument("runs", type=Path, nargs="+", help="bench_es_ppo.py output directories")
    ap.add_argument("--trainer", default="es")
    args = ap.parse_args()
    trace = trace_corpus(args.splits / "train", quiet=True)
    start = load_weights(args.prior)
    for run in args.runs:
        result = json.loads((run / "es_ppo.json").read_text()) if (run / "es_ppo.json").exists() else {}
        if result.get("train_languages") or result.get("languages"):
            raise SystemExit(f"{run}: trained on some languages only; the probe here takes every module")
        probe = flip_probe(start, trace.columns, trace.module_rows)
        sigma = (result.get("es_sigma_calibration") or {}).get("sigma")
        perturbation = module_flip_share(start, probe, sigma, samples=16) if sigma else None
        snaps = sorted((run / args.trainer / "validated").glob("*.npz"))
        if not snaps:
            raise SystemExit(f"{run}: no validated snapshots under {args.trainer}/validated")
        previous, rows = probe.decided, []
        for path in snaps:
            d = decisions(load_weights(path), probe.batch)
            step_m, step_d = changed_share(probe, d, previous)
            from_m, from_d = changed_share(probe, d, probe.decided)
            rows.append((int(path.stem), step_m, step_d, from_m, from_d))
            print(f"{run.name} {int(path.stem):4d}: since the last snapshot {100 * step_m:6.2f}% of modules "
                  f"({100 * step_d:.3f}% of decisions); since the start {100 * from_m:6.2f}% "
                  f"({100 * from_d:.3f}%)", flush=True)
        half = len(rows) // 2
        first, second = [r[1] for r in rows[:half]], [r[1] for r in rows[half:]]
        print(json.dumps({"run": str(run), "modules": probe.modules, "decisions": len(probe.owner),
                          "perturbation_share": perturbation,
                          "median_interval_share_first_half": float(np.median(first)) if first else None,
                          "median_interval_share_second_half": float(np.median(second)),
                          "last_share_from_start": rows[-1][3]}))


if __name__ == "__main__":
    main()

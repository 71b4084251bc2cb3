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
run, and how far the snapshots are from the start. With ``--sigma-curve``,
at the iterations ``--at`` (0: the starting policy) it also prints what a
perturbation of each listed sigma changes (16 perturbations relative to
the starting policy's layer scale, as ES draws them) and the share of
modules with a call site within 0.01, 0.1 and 1 of the decision boundary
(logit of inlining minus logit of not).

    python3 benchmarks/step_flips.py SPLITS PRIOR RUN --sigma-curve 0.002,0.005,0.01,0.02,0.04,0.075 \
        --at 0,20,40,60,80"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.training.sigma_calibration import _perturbations, decisions, flip_probe, module_flip_share


def changed_share(probe, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(share of the probe's modules, share of its decisions) where ``a`` and ``b`` differ."""
    diff = a != b
    modules = np.count_nonzero(np.bincount(probe.owner[diff], minlength=probe.modules)) / probe.modules
    return float(modules), float(diff.mean())


def sigma_curve(start, policy, trace, sigmas: list[float]) -> tuple[list[float], list[float]]:
    """What perturbations of each sigma (relative to ``start``'s layer scale) change of the probe's modules
    around ``policy``, and the shares of modules with a site within 0.01, 0.1, 1 of the boundary."""
    probe = flip_probe(policy, trace.columns, trace.module_rows)
    eps = _perturbations(start, 16, 0, 0)  # ES's draws: the starting policy's layer scale
    shares = [module_flip_share(policy, probe, sigma, _eps=eps) for sigma in sigmas]
    logits = policy.logits(probe.batch)
    margin = np.abs(logits[:, 1] - logits[:, 0])
    near = [np.count_nonzero(np.bincount(probe.owner[margin < t], minlength=probe.modules)) / probe.modules
            for t in (0.01, 0.1, 1.0)]
    return shares, near


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, help="the runs' SPLITS (its train/ trace is read from mlopt's cache)")
    ap.add_argument("prior", type=Path, help="the runs' starting policy")
    ap.add_argument("runs", type=Path, nargs="+", help="bench_es_ppo.py output directories")
    ap.add_argument("--trainer", default="es")
    ap.add_argument("--sigma-curve", type=lambda t: [float(v) for v in t.split(",")], metavar="S,S",
                    help="also: what perturbations of these sigmas change, at the iterations --at")
    ap.add_argument("--at", type=lambda t: [int(v) for v in t.split(",")], default=[0], metavar="I,I",
                    help="iterations with a validated snapshot (0: the starting policy) for --sigma-curve")
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
            previous = d
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
        for it in args.at if args.sigma_curve else []:
            policy = start if it == 0 else load_weights(run / args.trainer / "validated" / f"{it:04d}.npz")
            shares, near = sigma_curve(start, policy, trace, args.sigma_curve)
            print(f"{run.name} {it:4d}: a perturbation changes " +
                  ", ".join(f"{100 * v:.1f}% at {s:g}" for s, v in zip(args.sigma_curve, shares)) +
                  "; modules with a site within 0.01 / 0.1 / 1 of the boundary: " +
                  " / ".join(f"{100 * v:.1f}%" for v in near), flush=True)


if __name__ == "__main__":
    main()

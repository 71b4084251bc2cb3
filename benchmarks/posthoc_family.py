"""Whether a one-parameter family around a finished ES run's choice holds
a better policy, chosen on validation. For each run, the policy the run
returned at SECONDS of training (``budget_cut.py``'s choice: the best
validation among the iterations that ended by then) is theta_c. Families:

- ``scale``: theta_0 + a (theta_c - theta_0), theta_0 the run's prior
  (RUN:PRIOR), for each a of ``--values`` (1 is the run's choice);
- ``vote``: theta_c with a more vote for the heuristic
  (``with_added_vote``: logit difference + a (inlining_default - 1/2)),
  for each a of ``--values`` (0 is the run's choice); a positive a keeps
  only the call sites where the policy disagrees most with the heuristic.

Each member is measured on the validation packages; the rule returns the
value with the best validation (ties: the one nearest the run's choice,
then the smaller). Test is measured for every value and reported, never
used to choose.

    python3 benchmarks/posthoc_family.py SPLITS RUN:PRIOR [RUN:PRIOR ...] --family scale --values 0.5,1.5,2
    python3 benchmarks/posthoc_family.py SPLITS RUN [RUN ...] --family vote --values 2,5,10

Writes RUN/posthoc-<FAMILY>-<SECONDS>.json and prints one table: per run
the validation and test figure of every value, the chosen value, and the
mean over runs of the chosen policy's test against the run's own. Every
figure is a total ``.text`` delta vs -Oz in percent (negative = smaller),
from the LLVM that SPLITS' traces name (set MLOPT_LLVM as for the runs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from budget_cut import _judge, choose
from mlopt.problems import load_weights
from mlopt.problems.inlining_default.prior import with_added_vote
from mlopt.training.es import flatten, unflatten
from mlopt.workers import make_pool
from seeds_table import _pct

ORIGIN = {"scale": 1.0, "vote": 0.0}  # the value that is the run's own choice


def scaled(prior, chosen, alpha: float):
    """prior + alpha (chosen - prior), weight by weight (same shapes)."""
    t0, tc = flatten(prior).astype(np.float64), flatten(chosen).astype(np.float64)
    return unflatten(chosen, (t0 + alpha * (tc - t0)).astype(np.float32))


def pick(values: dict[float, float], origin: float) -> float:
    """The key with the smallest value; ties to the key nearest ``origin``, then the smaller."""
    best = min(values.values())
    return min((a for a, v in values.items() if v == best), key=lambda a: (abs(a - origin), a))


def run_arg(text: str) -> tuple[Path, Path | None]:
    run, sep, prior = text.partition(":")
    if not run or (sep and not prior):
        raise argparse.ArgumentTypeError(f"expected RUN or RUN:PRIOR, got {text!r}")
    return Path(run), Path(prior) if prior else None


def value_list(text: str) -> list[float]:
    try:
        values = sorted({float(a) for a in text.split(",") if a.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--values wants numbers separated by commas, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("--values wants at least one number")
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, help="the runs' SPLITS (validation/ chooses, test/ is reported)")
    ap.add_argument("runs", type=run_arg, nargs="+", metavar="RUN[:PRIOR]",
                    help="a bench_es_ppo.py output directory (and, for --family scale, the prior it started from)")
    ap.add_argument("--family", choices=sorted(ORIGIN), required=True)
    ap.add_argument("--values", type=value_list, required=True, help="the family's values besides the run's own")
    ap.add_argument("--seconds", type=float, default=1800.0, help="seconds of training (default: the issue's 1,800)")
    ap.add_argument("--trainer", default="es")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    origin = ORIGIN[args.family]
    values = sorted(set(args.values) | {origin})
    if args.family == "scale" and any(a < 0 for a in values):
        ap.error("--family scale wants --values >= 0")
    for run, prior in args.runs:
        if args.family == "scale" and prior is None:
            ap.error(f"--family scale needs RUN:PRIOR, got {run} alone")
    rows = []
    with make_pool(args.workers) as pool:
        judge = validate = None
        for run, prior_path in args.runs:
            results = json.loads((run / "es_ppo.json").read_text())
            result = results[args.trainer]
            iteration, val, _ = choose(run, result, args.trainer, args.seconds)
            if iteration == 0:
                raise SystemExit(f"{run}: the run returned its prior at {args.seconds:g} s: no family around it")
            llvm = results.get("llvm_version")
            judge = judge or _judge(args.splits / "test", pool, llvm, run)
            validate = validate or _judge(args.splits / "validation", pool, llvm, run)
            chosen = load_weights(run / args.trainer / "validated" / f"{iteration:04d}.npz")
            if args.family == "scale":
                prior = load_weights(prior_path)
                if flatten(prior).shape != flatten(chosen).shape:
                    raise SystemExit(f"{run}: {prior_path} is not the prior of this run (its weights differ in shape)")

                def member(a, prior=prior, chosen=chosen):
                    return scaled(prior, chosen, a)
            else:
                def member(a, chosen=chosen):
                    return with_added_vote(chosen, a)
            report = {}
            for a in values:
                policy = member(a)
                if a == origin:  # the run's choice: its validation is recorded, its test too if it is the run's own
                    v = val
                    t = result["test"] if val == result["validation_best"] else judge(chosen, run / "work")
                else:
                    v = validate(policy, run / "work")["all"]["delta_percent"]
                    t = judge(policy, run / "work")
                report[a] = {"validation": v, "test": t}
                print(run, f"{args.family} {a:g}: validation {_pct(v)}, test {_pct(t['all']['delta_percent'])}",
                      flush=True)
            a = pick({k: r["validation"] for k, r in report.items()}, origin)
            out = {"family": args.family, "seconds": args.seconds, "iteration": iteration, "llvm_version": llvm,
                   "seed": results["seed"], "prior": str(prior_path) if prior_path else None, "chosen": a,
                   "values": {f"{k:g}": r for k, r in report.items()}}
            (run / f"posthoc-{args.family}-{args.seconds:g}.json").write_text(json.dumps(out, indent=2) + "\n")
            rows.append((run, out))
    llvm = sorted({o["llvm_version"] or "?" for _, o in rows})
    print(f"\n{args.family} family around each run's choice, cut at {args.seconds:g} s, LLVM {', '.join(llvm)}, "
          f"{len(rows)} runs")
    print("| run | iteration | " + " | ".join(f"{a:g}: validation / test" for a in values) +
          " | chosen | test chosen | test of the run's choice |")
    print("|---|---|" + "---|" * len(values) + "---|---|---|")
    chosen_tests, own_tests = [], []
    for run, o in rows:
        per = [o["values"][f"{a:g}"] for a in values]
        cells = [f"{_pct(r['validation'])} / {_pct(r['test']['all']['delta_percent'])}" for r in per]
        t_c = o["values"][f"{o['chosen']:g}"]["test"]["all"]["delta_percent"]
        t_o = o["values"][f"{origin:g}"]["test"]["all"]["delta_percent"]
        chosen_tests.append(t_c)
        own_tests.append(t_o)
        print(f"| {run} | {o['iteration']} | " + " | ".join(cells) +
              f" | {o['chosen']:g} | {_pct(t_c)} | {_pct(t_o)} |")
    print("| mean | | " + " | ".join("" for _ in values) + f" | | {_pct(float(np.mean(chosen_tests)))} | "
          f"{_pct(float(np.mean(own_tests)))} |")


if __name__ == "__main__":
    main()

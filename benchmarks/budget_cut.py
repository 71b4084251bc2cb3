"""What a run of ``bench_es_ppo.py`` would have returned had its clock
stopped at SECONDS of training: the policy with the best validation among
those validated in iterations that ended by then (the starting policy
included; ties go to the earlier, as the trainer keeps them), judged on the
test packages like the run's own choice (all, C, C++, per package).

    python3 benchmarks/budget_cut.py SPLITS es-s0 es-s1 es-s2 --seconds 1800 [--trainer es] [--packages]
    python3 benchmarks/budget_cut.py SPLITS es-s0 es-s1 es-s2 --mean-last 12     # the tail-mean rule

``--mean-last K`` returns instead the mean weights of the last K validated
snapshots ended by then (``selection_rules.py`` compares the rules on
validation alone) and writes DIR/cut-<SECONDS>-mean-last<K>.json; its
"validation" is then the averaged policy's, measured on all of validation.

An iteration's end is the run's record (es_ppo.json ``iteration_ended_s``,
written since stop 52) or, for older runs, the file time of its validated
snapshot counted back from the run's end (validated/<last>.npz was written
at ``seconds``); the output says which. Runs made before stop 60 started
their clock after ES's sigma calibration; ``--count-setup`` counts it
(DIR/cut-<SECONDS>-setup.json), as later runs' clocks do. Writes DIR/cut-<SECONDS>.json and
prints one table over the runs with the mean and half the range; every
figure is a total ``.text`` delta vs -Oz in percent (negative = smaller),
from the LLVM that SPLITS' traces name (set MLOPT_LLVM as for the runs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench_es_ppo import module_languages, test_report
from mlopt.corpus import corpus_entries
from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.training.environment import CompilerEnvironment
from mlopt.training.es import flatten, unflatten
from mlopt.workers import make_pool
from seeds_table import _pct, _spread, print_packages, worst_package


def setup_seconds(run: Path, trainer: str) -> float:
    """The seconds of set-up a run's clock left out: ES's sigma calibration in runs made before stop 60
    (their clock started after it); 0 for later runs (their clock counts it) and runs without one."""
    results = json.loads((run / "es_ppo.json").read_text())
    if trainer != "es" or results[trainer].get("setup_s") is not None:  # extended old runs record None
        return 0.0
    return float(results.get("es_sigma_calibration", {}).get("seconds", 0.0))


def iteration_ends(run: Path, result: dict, trainer: str, count_setup: bool = False) -> tuple[dict[int, float], str]:
    """Iteration -> seconds of training when it ended (validated iterations at least), and the clock's source;
    ``count_setup``: plus the set-up an older run's clock left out (:func:`setup_seconds`)."""
    if count_setup:
        extra = setup_seconds(run, trainer)
        ends, clock = iteration_ends(run, result, trainer)
        return {k: v + extra for k, v in ends.items()}, clock + (f" + {extra:.0f} s set-up" if extra else "")
    if "iteration_ended_s" in result:
        return {int(k): v for k, v in result["iteration_ended_s"].items()}, "recorded"
    snapshots = sorted((run / trainer / "validated").glob("*.npz"))
    if not snapshots:
        raise SystemExit(f"{run}: no iteration_ended_s in es_ppo.json and no {trainer}/validated/ snapshots")
    last = snapshots[-1].stat().st_mtime
    if int(snapshots[-1].stem) != result["iterations"]:
        raise SystemExit(f"{run}: its last iteration ({result['iterations']}) was not validated: no clock to count")
    return {int(s.stem): result["seconds"] - (last - s.stat().st_mtime) for s in snapshots}, "file times"


def choose(run: Path, result: dict, trainer: str, seconds: float,
           count_setup: bool = False) -> tuple[int, float | None, str]:
    """(iteration, its validation delta, clock source) of the policy a ``seconds`` run would have returned."""
    ends, clock = iteration_ends(run, result, trainer, count_setup)
    best_iteration, best = 0, result["validation_start"]
    for line in (run / trainer / "metrics.jsonl").read_text().splitlines():
        m = json.loads(line)
        val = m.get("validation_delta_percent")
        if m["iteration"] == 0 or val is None or ends.get(m["iteration"], float("inf")) > seconds:
            continue
        if best is None or val < best:
            best_iteration, best = m["iteration"], val
    return best_iteration, best, clock


def averaged(paths: list[Path]):
    """The policy whose weights are the mean of the saved policies' (same vocab and widths)."""
    policies = [load_weights(p) for p in paths]
    return unflatten(policies[0], np.mean([flatten(p) for p in policies], axis=0))


def validated_by(run: Path, result: dict, trainer: str, seconds: float, count_setup: bool = False) -> list[Path]:
    """The run's validated snapshots (oldest first) of the iterations that ended by ``seconds``."""
    ends, _ = iteration_ends(run, result, trainer, count_setup)
    return [p for p in sorted((run / trainer / "validated").glob("*.npz"))
            if ends.get(int(p.stem), float("inf")) <= seconds]


def tail_mean(run: Path, result: dict, trainer: str, seconds: float, k: int, count_setup: bool = False):
    """(last iteration averaged, the policy averaging the last ``k`` validated snapshots ended by ``seconds``)."""
    snaps = validated_by(run, result, trainer, seconds, count_setup)
    if len(snaps) < k:
        raise SystemExit(f"{run}: {len(snaps)} validated snapshots by {seconds:g} s, --mean-last {k} needs {k}")
    return int(snaps[-1].stem), averaged(snaps[-k:])


def _judge(split: Path, pool, llvm: str | None, run: Path):
    """policy, work dir -> its report (bench_es_ppo's test report) on ``split``, traced by the runs' LLVM."""
    ds = trace_corpus(split, pool=pool, quiet=True)
    if ds.meta["llvm"] != llvm:
        raise SystemExit(f"{run}: run on LLVM {llvm}, SPLITS traced by {ds.meta['llvm']}")
    baseline = {m: float(v) for m, v in zip(ds.modules, ds.text_size)}
    test = [e for e in corpus_entries(split) if e.name in baseline]
    languages = module_languages(split)
    envs = {}

    def judge(policy, work: Path) -> dict:
        if policy.problem.name not in envs:
            envs[policy.problem.name] = CompilerEnvironment(policy.problem, pool)
        return test_report(envs[policy.problem.name], policy, test, baseline, work, languages)

    return judge


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, help="the runs' SPLITS (its test/ is judged)")
    ap.add_argument("runs", type=Path, nargs="+", help="bench_es_ppo.py output directories")
    ap.add_argument("--seconds", type=float, default=1800.0, help="seconds of training (default: the issue's 1,800)")
    ap.add_argument("--trainer", default="es")
    ap.add_argument("--packages", action="store_true", help="also one row per test package")
    ap.add_argument("--mean-last", type=int, default=0, metavar="K",
                    help="return the mean weights of the last K validated snapshots instead of the best")
    ap.add_argument("--count-setup", action="store_true",
                    help="count the sigma calibration that runs made before stop 60 left off their clock")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    rows = []
    with make_pool(args.workers) as pool:
        judge = validate = None  # policy -> its test / validation report; built on first need (tracing)
        for run in args.runs:
            results = json.loads((run / "es_ppo.json").read_text())
            result = results[args.trainer]
            iteration, val, clock = choose(run, result, args.trainer, args.seconds, args.count_setup)
            if args.mean_last:
                judge = judge or _judge(args.splits / "test", pool, results.get("llvm_version"), run)
                validate = validate or _judge(args.splits / "validation", pool, results.get("llvm_version"), run)
                iteration, policy = tail_mean(run, result, args.trainer, args.seconds, args.mean_last,
                                              args.count_setup)
                val = validate(policy, run / "work")["all"]["delta_percent"]
                report = judge(policy, run / "work")
            elif iteration == 0:
                report = results["bc"]["test"]  # the starting policy
            elif val == result["validation_best"]:
                report = result["test"]  # the run's own choice: judged already
            else:
                judge = judge or _judge(args.splits / "test", pool, results.get("llvm_version"), run)
                report = judge(load_weights(run / args.trainer / "validated" / f"{iteration:04d}.npz"), run / "work")
            cut = {"seconds": args.seconds, "clock": clock, "iteration": iteration, "validation": val,
                   "llvm_version": results.get("llvm_version"), "seed": results["seed"], "test": report}
            tag = (f"-mean-last{args.mean_last}" if args.mean_last else "") + ("-setup" if args.count_setup else "")
            (run / f"cut-{args.seconds:g}{tag}.json").write_text(json.dumps(cut, indent=2) + "\n")
            rows.append(cut)
            print(run, json.dumps({k: cut[k] for k in ("iteration", "validation", "clock")}),
                  _pct(report["all"]["delta_percent"]), flush=True)
    llvm = sorted({r["llvm_version"] or "?" for r in rows})
    print(f"\ntrainer {args.trainer} cut at {args.seconds:g} s of training, LLVM {', '.join(llvm)}, {len(rows)} runs")
    print("| seed | iteration chosen (clock) | validation | test all | test C | test C++ | worst test package |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        t = r["test"]
        print(f"| {r['seed']} | {r['iteration']} ({r['clock']}) | {_pct(r['validation'])} | "
              f"{_pct(t['all']['delta_percent'])} | {_pct(t['C']['delta_percent'])} | "
              f"{_pct(t['C++']['delta_percent'])} | {worst_package(t)} |")
    print("| mean (± half range) | | | " + " | ".join(
        _spread([r["test"][k]["delta_percent"] for r in rows]) for k in ("all", "C", "C++")) + " | |")
    if args.packages:
        print_packages([r["test"] for r in rows], [r["seed"] for r in rows])

if __name__ == "__main__":
    main()

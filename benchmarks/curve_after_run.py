"""The test curve of a finished ``bench_es_ppo.py`` run, drawn afterwards:
the test delta of N of the run's validated policies (evenly spaced, the last
included; iteration 0 is the start), next to its training and validation
curves, without training again. The test split is looked at after training
and never used to choose (as ``bench_es_ppo.py --test-curve``, which draws
the same curve at the end of a run).

    python3 benchmarks/curve_after_run.py splits149 start-s2.npz linked-s2 --problem inlining-linked --points 8

Reads DIR/<trainer>/validated/*.npz (ES keeps them: ``keep_validated``) and,
for ``inlining-linked``, the run's own DIR/linked-shares.npz and its -Oz
charges; writes DIR/<trainer>/test_curve.json and training_curve.png.
Figures: delta vs -Oz in percent, negative = smaller, by the run's objective,
on the LLVM major the run recorded (DIR/es_ppo.json; a different $MLOPT_LLVM
is refused).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench_es_ppo import test_curve
from mlopt.corpus import corpus_entries
from mlopt.errors import MloptError
from mlopt.evaluation import plot_training_curve
from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.training.environment import CompilerEnvironment
from mlopt.workers import make_pool


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: python3 benchmarks/curve_after_run.py splits149 start-s2.npz "
                                        "linked-s2 --problem inlining-linked --points 8")
    ap.add_argument("splits", type=Path, help="the run's SPLITS (test/ is read)")
    ap.add_argument("start", type=Path, help="the run's starting weights (.npz)")
    ap.add_argument("out", type=Path, help="the run's --out directory")
    ap.add_argument("--trainer", default="es")
    ap.add_argument("--problem", default=None)
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--workers", type=int)
    args = ap.parse_args()
    run_dir = args.out / args.trainer
    if not (run_dir / "validated").is_dir():
        print(f"curve_after_run: {run_dir}/validated: no validated policies (was the run made by bench_es_ppo.py?)",
              file=sys.stderr)
        return 2
    summary = json.loads((args.out / "es_ppo.json").read_text()) if (args.out / "es_ppo.json").exists() else {}
    llvm = summary.get("llvm_version")  # "19.1.7": the run's LLVM, or the curve would mix majors
    major = str(llvm).split(".")[0] if llvm is not None else None
    if major is not None and os.environ.setdefault("MLOPT_LLVM", major) != major:
        print(f"curve_after_run: the run used LLVM {llvm}, MLOPT_LLVM is {os.environ['MLOPT_LLVM']}", file=sys.stderr)
        return 2
    init = load_weights(args.start, args.problem)
    test = corpus_entries(args.splits / "test")
    if init.problem.objective == "linked_share":
        table, charges = args.out / "linked-shares.npz", args.out / "linked-shares-oz.json"
        if not table.exists() or not charges.exists():
            print(f"curve_after_run: {table} or {charges} missing: the run's table is needed", file=sys.stderr)
            return 2
        os.environ["MLOPT_LINKED_SHARES"] = str(table.resolve())  # read by the workers, which start next
        baseline = {m: float(c) for m, c in json.loads(charges.read_text()).items()}
    with make_pool(args.workers) as pool:
        if init.problem.objective != "linked_share":
            ds = trace_corpus(args.splits / "test", pool=pool, quiet=True,
                              callee_linkage="callee_linkage" in init.problem.feature_names)
            baseline = {m: float(v) for m, v in zip(ds.modules, ds.text_size)}
        test = [e for e in test if e.name in baseline]
        env = CompilerEnvironment(init.problem, pool, heuristic_costs=baseline)
        curve = test_curve(env, init, run_dir, test, baseline, args.out / "work", args.points)
    (run_dir / "test_curve.json").write_text(json.dumps({str(k): v for k, v in sorted(curve.items())}, indent=1)
                                             + "\n")
    for it, d in sorted(curve.items()):
        print(f"iteration {it}: test {d:+.3f}%")
    try:
        path = plot_training_curve(run_dir, run_dir, llvm=llvm, test=curve)
        print(f"wrote {path}")
    except MloptError as e:
        print(f"curve_after_run: no plot ({e})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

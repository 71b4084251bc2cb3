"""How much smaller can a split's modules get by inlining decisions alone?

A bound on what any inlining policy could reach on a corpus: the searches
of ``mlopt train search`` (``--moves callee``: every site of one callee at
once; ``--moves flip``: one decision, the policy deciding the rest) run on
the split's own modules, each move judged by compiling it. Nothing is
trained or chosen here: run on a test split, this is an oracle that knows
every module's outcome, so a policy that never saw the split can only do
worse. The searches start from ``--init``'s own compiles (a policy that
decides as -Oz does, such as ``mlopt policy default-prior``); the
combined row takes each module's better search.

    python3 benchmarks/bench_search_headroom.py splits/test --init prior20-s0.npz --evaluations 16,48 --out /tmp/hr

Every figure is a total ``.text`` delta vs -Oz in percent (negative =
smaller), over all the split's modules (those with more than
``--max-decisions`` decisions keep the starting compile).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.corpus.split import package_of  # noqa: E402
from mlopt.problems import load_weights  # noqa: E402
from mlopt.rollouts import trace_corpus  # noqa: E402
from mlopt.training.callee_search import CalleeSearch  # noqa: E402
from mlopt.training.local_search import SearchConfig, TrajectorySearch  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402


def delta(best: dict[str, int], base: dict[str, int], modules=None) -> float:
    modules = list(base) if modules is None else modules
    return 100.0 * sum(best[m] - base[m] for m in modules) / sum(base[m] for m in modules)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--init", type=Path, required=True, help="the starting policy's weights (.npz)")
    ap.add_argument("--evaluations", default="16,48", help="compiles per module, one search per value")
    ap.add_argument("--moves", default="callee,flip")
    ap.add_argument("--max-decisions", type=int, default=3000)
    ap.add_argument("--max-flips", type=int, default=10, help="accepted moves per module (BC-Max: 10)")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    policy = load_weights(args.init)
    classes = {"callee": CalleeSearch, "flip": TrajectorySearch}
    runs = {}
    with make_pool(args.workers, timeout=600) as pool:
        ds = trace_corpus(args.corpus, workers=args.workers)
        entries = corpus_entries(args.corpus)
        for evals in (int(v) for v in args.evaluations.split(",")):
            for moves in args.moves.split(","):
                start = time.perf_counter()
                config = SearchConfig(evaluations_per_module=evals, batch=8, max_decisions=args.max_decisions,
                                      max_flips=args.max_flips)
                search = classes[moves](policy, ds, entries, config, work=args.out / "work", pool=pool)
                rounds = search.run()
                runs[f"{moves} x{evals}"] = {
                    "seconds": time.perf_counter() - start, "evaluations": sum(r["evaluations"] for r in rounds),
                    "modules": {r["module"]: {"heuristic": r["heuristic_text"], "start": r["start_text"],
                                              "best": r["best_text"]} for r in search.report()}}
                print(f"{moves} x{evals}: {search.delta_percent():+.3f}%", file=sys.stderr, flush=True)
    base = {m: v["heuristic"] for m, v in next(iter(runs.values()))["modules"].items()}
    start = {m: v["start"] for m, v in next(iter(runs.values()))["modules"].items()}
    rows = {name: {m: v["best"] for m, v in r["modules"].items()} for name, r in runs.items()}
    if len(rows) > 1:
        rows["combined (each module's best)"] = {m: min(r[m] for r in rows.values()) for m in base}
    packages: dict[str, list[str]] = {}
    for m in base:
        packages.setdefault(package_of(m), []).append(m)
    print(f"{args.corpus}: {len(base)} modules, {len(packages)} packages, LLVM {default_llvm()}; "
          f"the starting policy: {delta(start, base):+.3f}%")
    print("| search | compiles (s) | all | largest package gain | packages smaller |")
    print("|---|---|---|---|---|")
    for name, best in rows.items():
        per = {p: delta(best, base, ms) for p, ms in packages.items()}
        top = min(per.items(), key=lambda kv: kv[1])
        r = runs.get(name)
        cost = f"{r['evaluations']:,} ({r['seconds']:.0f})" if r else "-"
        print(f"| {name} | {cost} | **{delta(best, base):+.3f}%** | {top[0]} {top[1]:+.2f}% | "
              f"{sum(v < 0 for v in per.values())} of {len(per)} |")
    report = {"llvm": default_llvm(), "corpus": str(args.corpus), "init": str(args.init), "runs": runs,
              "delta_percent": {name: delta(best, base) for name, best in rows.items()},
              "packages": {name: {p: delta(best, base, ms) for p, ms in packages.items()}
                           for name, best in rows.items()}}
    (args.out / "headroom.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

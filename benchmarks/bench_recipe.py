"""The recommended recipe for inlining for size (``mlopt demo``: the package
rule, ES with the rule, the validation gate) over several seeds and LLVM
majors, scored on the default corpus's test packages against ``clang -Oz``
compiled in the same run: per module and package-linked, C and C++ apart.

    python3 benchmarks/bench_recipe.py [--seeds 0,1,2] [--llvm 19,22] [--out DIR] [--record]
    python3 benchmarks/bench_recipe.py --quick          # the reduced corpus, one seed, one major

Each run is ``mlopt demo --llvm N --seed S --json`` in its own process (its
directory under ``--out``, default a temporary one). ``--record`` writes the
figures to ``benchmarks/results/inlining-size-default-corpus.json``, which
``docs/make_results.py`` renders into docs/results.md and README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "inlining-size-default-corpus.json"
CONFIGS = (("rule", "-Oz + the one-site-linkonce rule"), ("rule_and_policy", "the rule + ES (the demo's budget)"),
           ("policy_alone", "ES alone (no rule)"))


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def llvm_version(major: int) -> str:
    return subprocess.run([f"llvm-config-{major}", "--version"], capture_output=True, text=True,
                          check=True).stdout.strip()


def run_demo(major: int, seed: int, out: Path, small: bool) -> dict:
    """One ``mlopt demo`` in its own process; its JSON result."""
    argv = [sys.executable, "-m", "mlopt", "demo", "--llvm", str(major), "--seed", str(seed), "-o", str(out),
            "--force", "--quiet", "--json"] + (["--small"] if small else [])
    print(f"LLVM {major}, seed {seed}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_recipe: {' '.join(argv[1:])} exited {r.returncode}:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def figures(results: list[dict]) -> list[dict]:
    """Per configuration: every seed's package-linked and per-module deltas (all, C, C++), the worst package."""
    rows = []
    for key, label in CONFIGS:
        runs = [r["test"][key] for r in results if key in r["test"]]
        if not runs:
            continue
        rows.append({"config": key, "label": label,
                     "linked": [t["linked"]["all"]["delta_percent"] for t in runs],
                     "per_module": [t["per_module"]["all"]["delta_percent"] for t in runs],
                     "C": [t["linked"].get("C", {}).get("delta_percent") for t in runs],
                     "C++": [t["linked"].get("C++", {}).get("delta_percent") for t in runs],
                     "worst_package": max(((p, v["delta_percent"]) for t in runs
                                           for p, v in t["linked_per_package"].items()), key=lambda pv: pv[1]),
                     "heuristic_text": runs[0]["linked"]["all"]["heuristic_text"]})
    return rows


def _mean(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:+.2f}%"
    return f"{statistics.mean(values):+.2f}% ±{statistics.stdev(values):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=_ints, default=[0, 1, 2])
    ap.add_argument("--llvm", type=_ints, default=[19, 22], metavar="MAJORS")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--record", action="store_true", help=f"write {RESULT.relative_to(ROOT)}")
    ap.add_argument("--quick", action="store_true",
                    help="the reduced corpus (mlopt demo --small), seed 0, the first major only")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.llvm = args.seeds[:1], args.llvm[:1]
        if args.record:
            sys.exit("bench_recipe: --quick figures are not recorded")
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-recipe-"))
    runs = []
    for major in args.llvm:
        results = [run_demo(major, s, out / f"llvm{major}-seed{s}", args.quick) for s in args.seeds]
        first = results[0]
        runs.append({"llvm": llvm_version(major), "major": major, "seeds": args.seeds,
                     "test_packages": first["packages"]["test"], "validation_packages": first["packages"]["validation"],
                     "test_modules": first["modules"]["test"],
                     "shipped": [r["shipped"] for r in results],
                     "verified": [f"{r['verify_with_clang']['modules'] - len(r['verify_with_clang']['mismatches'])}/"
                                  f"{r['verify_with_clang']['modules']}" for r in results],
                     "minutes": [round(r["seconds"]["done"] / 60, 2) for r in results],
                     "configs": figures(results)})
        print(f"\nLLVM {runs[-1]['llvm']}, test packages {', '.join(first['packages']['test'])}: package-linked "
              f".text vs clang -Oz (same run), negative = smaller; {len(args.seeds)} seed(s)")
        for row in runs[-1]["configs"]:
            ratio = 1 + statistics.mean(row["linked"]) / 100
            print(f"  {row['label']:<40} {_mean(row['linked']):>16}  ratio {ratio:.4f}  "
                  f"per module {_mean(row['per_module'])}")
        print(f"  shipped by the validation gate: {', '.join(runs[-1]['shipped'])}; "
              f"stock clang checks: {', '.join(runs[-1]['verified'])}")
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
        RESULT.parent.mkdir(parents=True, exist_ok=True)
        RESULT.write_text(json.dumps({
            "benchmark": "benchmarks/bench_recipe.py", "command": "python3 benchmarks/bench_recipe.py "
            f"--seeds {','.join(map(str, args.seeds))} --llvm {','.join(map(str, args.llvm))} --record",
            "problem": "inlining for size", "corpus": "the default corpus (C and C++ from 7 pinned PyPI sdists)",
            "baseline": "clang -Oz", "metric": "package-linked .text", "date": datetime.date.today().isoformat(),
            "commit": commit, "runs": runs}, indent=2) + "\n")
        print(f"recorded: {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""One table over seeds of ``bench_es_ppo.py``: per seed and trainer, the
iterations, validation start -> best, and the test deltas (all, C, C++, the
worst package); then the mean over seeds with half the range as the spread.

    python3 benchmarks/seeds_table.py es-s0 es-s1 es-s2 [--trainer es] [--packages]

Every figure is a total ``.text`` delta vs -Oz in percent (negative =
smaller), as ``bench_es_ppo.py`` wrote it (DIR/es_ppo.json, which names the
LLVM version that produced it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.3f}%"


def _spread(values: list[float]) -> str:
    mean = sum(values) / len(values)
    return f"{mean:+.3f}% (±{(max(values) - min(values)) / 2:.3f})"


def worst_package(test: dict) -> str:
    """``name +x.xxx%`` of the test package that grew most (a ``test_report``'s dict)."""
    packages = {k.removeprefix("package "): v["delta_percent"] for k, v in test.items() if k.startswith("package ")}
    worst = max(packages, key=packages.get)
    return f"{worst} {_pct(packages[worst])}"


def print_packages(tests: list[dict], seeds: list) -> None:
    """One row per test package, one column per run."""
    names = sorted({k.removeprefix("package ") for t in tests for k in t if k.startswith("package ")})
    print("\n| test package | modules | " + " | ".join(f"seed {s}" for s in seeds) + " |")
    print("|---|---|" + "---|" * len(tests))
    for name in names:
        cells = [t.get(f"package {name}") for t in tests]
        modules = next(c["modules"] for c in cells if c)
        print(f"| {name} | {modules} | " + " | ".join(_pct(c and c["delta_percent"]) for c in cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", type=Path, nargs="+", help="bench_es_ppo.py output directories")
    ap.add_argument("--trainer", default="es")
    ap.add_argument("--packages", action="store_true", help="also one row per test package")
    args = ap.parse_args()
    results = [json.loads((d / "es_ppo.json").read_text()) for d in args.runs]
    llvm = sorted({r.get("llvm_version", "?") for r in results})
    print(f"trainer {args.trainer}, LLVM {', '.join(llvm)}, {len(results)} seeds")
    print("| seed | iterations (s) | validation start -> best | test all | test C | test C++ | worst test package |")
    print("|---|---|---|---|---|---|---|")
    columns: dict[str, list[float]] = {"all": [], "C": [], "C++": []}
    for r in results:
        t = r[args.trainer]
        test = t["test"]
        for k in columns:
            columns[k].append(test[k]["delta_percent"])
        print(f"| {r['seed']} | {t['iterations']} ({t['seconds']:.0f}) | {_pct(t['validation_start'])} -> "
              f"{_pct(t['validation_best'])} | {_pct(test['all']['delta_percent'])} | "
              f"{_pct(test['C']['delta_percent'])} | {_pct(test['C++']['delta_percent'])} | {worst_package(test)} |")
    print(f"| mean (± half range) | | | {_spread(columns['all'])} | {_spread(columns['C'])} | "
          f"{_spread(columns['C++'])} | |")
    if args.packages:
        print_packages([r[args.trainer]["test"] for r in results], [r["seed"] for r in results])

if __name__ == "__main__":
    main()

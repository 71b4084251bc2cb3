"""Where a trained policy's savings are: the same policy on the packages it
trained on, on validation and on test, from ``mlopt eval`` outputs. Per
split and seed: total ``.text`` vs -Oz, the share of the heuristic's bytes
the policy's smaller modules save and its larger modules cost, modules
smaller / larger, call sites inlined against the heuristic's (and the
modules inlining fewer / more, and the delta those fewer-inlining modules
make), and the packages that save the most bytes (which tells
whether a split's total is many packages or a few outliers).

    mlopt policy export --weights RUN/es/best/policy.npz -o best-model
    mlopt eval best-model splits149/train -o eval-train-s0 --no-plots
    python3 benchmarks/split_gap.py --seed 0 train=eval-train-s0 validation=eval-val-s0 test=eval-test-s0 \\
        [--seed 1 train=... ...] [--top 5]

Negative = smaller. Each ``mlopt eval`` summary names the LLVM major that
produced it; the table says it too (and refuses a mix)."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from seeds_table import _spread


def split_row(directory: Path, top: int) -> dict:
    """The figures of one ``mlopt eval`` output directory."""
    summary = json.loads((directory / "summary.json").read_text())
    with open(directory / "modules.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    heuristic = sum(int(r["heuristic_text"]) for r in rows)
    deltas = [int(r["policy_text"]) - int(r["heuristic_text"]) for r in rows]
    packages = sorted(summary["packages"].items(), key=lambda kv: kv[1]["delta"])
    return {
        "llvm": summary["llvm"],
        "modules": len(rows),
        "total": summary["total"]["delta_percent"],
        "saved": 100.0 * sum(d for d in deltas if d < 0) / heuristic,
        "cost": 100.0 * sum(d for d in deltas if d > 0) / heuristic,
        "smaller": sum(d < 0 for d in deltas),
        "larger": sum(d > 0 for d in deltas),
        "inlined": sum(int(r["inlined"]) for r in rows) / max(1, sum(int(r["heuristic_inlined"]) for r in rows)),
        "inline_less": sum(int(r["inlined"]) < int(r["heuristic_inlined"]) for r in rows),
        "inline_more": sum(int(r["inlined"]) > int(r["heuristic_inlined"]) for r in rows),
        "delta_fewer": 100.0 * sum(d for d, r in zip(deltas, rows) if int(r["inlined"]) < int(r["heuristic_inlined"]))
        / heuristic,
        "top": [(name, p["delta_percent"], 100.0 * p["delta"] / heuristic) for name, p in packages[:top]
                if p["delta"] < 0],
    }


def usage_error(message: str) -> SystemExit:
    """Exit 2 with a one-line error, as a usage error."""
    print(f"split_gap.py: error: {message}", file=sys.stderr)
    return SystemExit(2)


def parse_runs(argv: list[str]) -> list[tuple[str, dict[str, Path]]]:
    """``--seed S split=DIR ...`` groups, in order."""
    runs: list[tuple[str, dict[str, Path]]] = []
    it = iter(argv)
    for arg in it:
        if arg == "--seed":
            seed = next(it, None)
            if seed is None:
                raise usage_error("--seed needs a value")
            runs.append((seed, {}))
        elif "=" in arg and runs:
            split, _, directory = arg.partition("=")
            if not (Path(directory) / "summary.json").is_file():
                raise usage_error(f"{directory}: no summary.json (an `mlopt eval` output?)")
            runs[-1][1][split] = Path(directory)
        else:
            raise usage_error(f"expected --seed S then split=DIR, got {arg!r}")
    if not runs or not all(dirs for _, dirs in runs):
        raise usage_error("give at least one --seed S split=DIR")
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=3, help="packages saving the most bytes, per split (default 3)")
    args, rest = ap.parse_known_args(argv)
    runs = parse_runs(rest)
    table = [(seed, split, split_row(d, args.top)) for seed, dirs in runs for split, d in dirs.items()]
    majors = {r["llvm"] for _, _, r in table}
    if len(majors) != 1:
        raise usage_error(f"evaluations of different LLVM majors: {sorted(majors)}")
    print(f"LLVM {majors.pop()}; total .text vs -Oz, negative = smaller; saved/cost: bytes of the modules that got "
          "smaller/larger, as a share of the split's -Oz bytes\n")
    print("| seed | split | modules | total | saved | cost | smaller / larger | inlined (fewer / more) "
          "| delta of the modules inlining fewer | packages saving most (share of split) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed, split, r in table:
        top = ", ".join(f"{n} {p:+.1f}% ({s:+.2f})" for n, p, s in r["top"])
        print(f"| {seed} | {split} | {r['modules']} | {r['total']:+.3f}% | {r['saved']:+.3f}% | {r['cost']:+.3f}% "
              f"| {r['smaller']} / {r['larger']} | {r['inlined']:.3f}x ({r['inline_less']} / {r['inline_more']}) "
              f"| {r['delta_fewer']:+.3f}% | {top} |")
    if len(runs) > 1:
        print("\n| split | seeds | mean total (± half range) | mean saved | mean cost |")
        print("|---|---|---|---|---|")
        for split in dict.fromkeys(s for _, s, _ in table):  # in the order given
            rows = [r for _, s, r in table if s == split]
            saved, cost = (sum(r[k] for r in rows) / len(rows) for k in ("saved", "cost"))
            print(f"| {split} | {len(rows)} | {_spread([r['total'] for r in rows])} | {saved:+.3f}% | {cost:+.3f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

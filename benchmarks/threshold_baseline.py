"""The baseline a learned inlining policy must beat: LLVM's own heuristic
with its boundary moved, one number tuned on validation.

At a call site LLVM logs ``cost_estimate`` and ``threshold``; the -Oz
heuristic inlines almost exactly where ``cost_estimate - threshold < 0``.
The rule ``shift D`` inlines where the heuristic does or, for D > 0, also
where ``0 <= cost_estimate - threshold < D`` (more inlining); for D < 0 it
inlines where the heuristic does and ``cost_estimate - threshold < D``
(less). Every D is compiled on the validation split; the best total there
is compiled on the test split, once. Sizes are through the in-process
compiler (stock LLVM's pipeline and codegen; D = 0 is the heuristic's
compile byte for byte).

    python3 benchmarks/threshold_baseline.py splits149 --shifts=-5,-2,1,3,5,10,20

Every figure is total ``.text`` against -Oz in percent (negative = smaller).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import mlopt  # noqa: E402
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.corpus.debian import language_of  # noqa: E402
from mlopt.corpus.split import package_of  # noqa: E402
from mlopt.problems.inlining import FEATURES  # noqa: E402

COST, THRESHOLD = list(FEATURES).index("cost_estimate"), list(FEATURES).index("threshold")


class Shift:
    """The heuristic with its boundary moved by ``d`` cost units (module docstring)."""

    takes_default = True  # mlopt.compile passes the heuristic's decision as a 39th feature

    def __init__(self, d: float):
        self.d = d

    def __call__(self, row) -> int:
        heuristic, margin = int(row[38]), int(row[COST]) - int(row[THRESHOLD])
        if self.d > 0:
            return int(heuristic or margin < self.d)
        if self.d < 0:
            return int(heuristic and margin < self.d)
        return heuristic


def compile_module(job):
    entry, shifts = job
    m = entry.load()
    sizes = {0.0: mlopt.compile(m, log=False).text_size}
    for d in shifts:
        sizes[d] = mlopt.compile(m, policy=Shift(d), log=False).text_size
    return entry.name, language_of(Path(str(entry.bitcode_path)[:-3] + ".cmd").read_bytes()), sizes


def run(corpus: Path, shifts: list[float], workers: int) -> dict:
    entries = corpus_entries(corpus)
    rows = {}
    start = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        for i, (name, lang, sizes) in enumerate(pool.map(compile_module, [(e, shifts) for e in entries],
                                                         chunksize=4), 1):
            rows[name] = (lang, sizes)
            if i % 200 == 0 or i == len(entries):
                print(f"  {corpus.name}: {i}/{len(entries)} modules, {time.perf_counter() - start:.0f} s",
                      file=sys.stderr, flush=True)
    return rows


def delta(rows: dict, d: float, keep=lambda name, lang: True) -> float:
    base = sum(s[0.0] for n, (lang, s) in rows.items() if keep(n, lang))
    return 100.0 * (sum(s[d] for n, (lang, s) in rows.items() if keep(n, lang)) - base) / base if base else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: python3 benchmarks/threshold_baseline.py splits149 --shifts=1,3,5,10")
    ap.add_argument("splits", type=Path, help="a directory with validation/ and test/ corpora")
    ap.add_argument("--shifts", default="-5,-2,1,3,5,10,20", help="D values to try on validation (cost units)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, help="write the per-module sizes and the summary here (JSON)")
    try:
        args = ap.parse_args()
        shifts = [float(v) for v in args.shifts.split(",") if float(v) != 0]
    except ValueError as e:
        print(f"threshold_baseline: --shifts: {e}", file=sys.stderr)
        return 2
    for split in ("validation", "test"):
        if not (args.splits / split / "corpus_description.json").is_file():
            print(f"threshold_baseline: {args.splits / split} is not a corpus", file=sys.stderr)
            return 2
    print(f"LLVM {default_llvm()}, {args.splits}")
    val = run(args.splits / "validation", shifts, args.workers)
    print("| shift D | validation | C | C++ |")
    print("|---|---|---|---|")
    for d in shifts:
        print(f"| {d:+g} | {delta(val, d):+.3f}% | {delta(val, d, lambda n, lang: lang == 'c'):+.3f}% | "
              f"{delta(val, d, lambda n, lang: lang == 'c++'):+.3f}% |")
    chosen = min(shifts, key=lambda d: (delta(val, d), abs(d)))
    if delta(val, chosen) >= 0:
        chosen = 0.0
    test = run(args.splits / "test", [chosen] if chosen else [], args.workers)
    per = defaultdict(list)
    for name in test:
        per[package_of(name)].append(name)
    packages = {p: delta(test, chosen, lambda n, lang, ms=set(ms): n in ms) for p, ms in sorted(per.items())}
    print(f"chosen on validation: D = {chosen:+g} ({delta(val, chosen):+.3f}%)")
    print(f"test: {delta(test, chosen):+.3f}% (C {delta(test, chosen, lambda n, lang: lang == 'c'):+.3f}%, "
          f"C++ {delta(test, chosen, lambda n, lang: lang == 'c++'):+.3f}%); largest package "
          f"{max(packages.items(), key=lambda kv: kv[1])[0]} {max(packages.values()):+.3f}%, "
          f"smallest {min(packages.items(), key=lambda kv: kv[1])[0]} {min(packages.values()):+.3f}%")
    if args.out:
        args.out.write_text(json.dumps({
            "llvm": default_llvm(), "shifts": shifts, "chosen": chosen,
            "validation": {str(d): delta(val, d) for d in shifts}, "test": delta(test, chosen),
            "test_packages": packages,
            "modules": {split: {n: {"language": lang, "sizes": {str(k): v for k, v in s.items()}}
                                for n, (lang, s) in rows.items()} for split, rows in (("validation", val),
                                                                                      ("test", test))}},
            indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Compile-time cost of shipping a policy: LLVM's feature upkeep vs mlopt's, in `clang -Oz`.

Corpus: the default corpus' sources (`mlopt corpus fetch`'s pinned C and C++
sdists: lz4, brotli, zstd, pycryptodome, jsonnet, marisa-trie, ujson), each
compiled as that build compiles it (`clang-N`/`clang++-N -Oz -c`, without
embedding bitcode), to an object that is thrown away. Configurations, run
interleaved (every module under every configuration, in a rotating order,
then the next module; --reps rounds), each module's time the best of its
runs (user + sys CPU seconds of the compiler process; after the first
round a module under --min-seconds runs several times per round):

  stock        stock clang -Oz
  so-llvm      the plugin with a compiled .so policy evaluated at every
               decision, the decisions replayed from the heuristic's own
               (-mlopt-inline-replay; recorded once per module before the
               rounds), so the code is stock's and what is measured is what a
               shipped policy pays: features, their upkeep, the model; LLVM's
               feature upkeep (-mlopt-inline-features=llvm)
  so-mlopt     the same with mlopt's upkeep (-mlopt-inline-features=mlopt)
  log-llvm     the plugin writing a training log (heuristic decisions), LLVM's upkeep
  log-mlopt    the same with mlopt's upkeep

With --measure instructions each compile runs once under valgrind
(exp-bbv) instead (user-mode instructions of the compiler: deterministic,
so a shared machine does not disturb them; ~35x slower; --jobs N). --configs picks a
subset of the configurations.

In the first round every plugin configuration's object is compared with
stock's, byte for byte (the replay and the heuristic give stock's code).
Reported: total time vs stock (the headline), the median and the worst
module's ratio to stock, and the modules above +10%. The machine may be
shared: ratios are taken within one run, module by module.

Run:  python3 benchmarks/bench_feature_upkeep.py [--llvm 19] [--reps 3] [--limit N] [--packages lz4,jsonnet] [--quick]
      python3 benchmarks/bench_feature_upkeep.py --measure instructions --configs stock,so-mlopt
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import mlopt
from _common import QUICK_HELP, random_policy
from mlopt.compiler.plugin import clang_flags
from mlopt.corpus import fetch
from mlopt.corpus.description import load_corpus


def commands(packages: list[str] | None, work: Path, llvm: int) -> list[tuple[str, list[str], str]]:
    """(name, clang-<llvm> command without output, directory) per source of the default corpus."""
    selected = [p for p in fetch.PACKAGES if not packages or p.name in packages]
    (work / "build").mkdir()
    entries = fetch.compile_commands(selected, fetch.cache_dir(), work / "build")
    out = []
    for e in entries:
        args = list(e["arguments"])
        i = args.index("-fembed-bitcode=all")
        del args[i - 1:i + 1]  # "-Xclang", "-fembed-bitcode=all"
        args[0] = args[0].replace("-19", f"-{llvm}")
        out.append((Path(e["output"]).name, args, e["directory"]))
    return out


def random_compiled_policy(work: Path, llvm: int, packages: list[str] | None = None) -> Path:
    """A compiled 64x64 MLP (.so) over a vocab of the corpus' own features."""
    report = fetch.fetch_corpus(None, packages)  # the extracted default corpus or those packages (cached)
    mods = load_corpus(report.output, llvm=llvm)[::3]
    logs = [r.log for r in mlopt.compile_many(mods, codegen=False, threads=2)]
    model = random_policy(logs).export(work / "model")
    return mlopt.compile_policy(model, work / "policy.so")


def heuristic_decisions(cmds, llvm: int, out: Path) -> list[Path]:
    """Per module, a file of the heuristic's decisions ('0'/'1', in the order
    the inliner asks), from a training log of one compile with the plugin."""
    out.mkdir()
    files = []
    for k, (_, cmd, cwd) in enumerate(cmds):
        log = out / f"{k}.log"
        subprocess.run([cmd[0], *clang_flags(llvm=llvm, training_log=log), *cmd[1:], "-o", os.devnull], cwd=cwd,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        decisions = mlopt.read_log(log)["inlining_decision"].ravel() if log.stat().st_size else []
        files.append(out / f"{k}.txt")
        files[-1].write_text("".join("1" if d else "0" for d in decisions))
    return files


def instructions(cmd: list[str], cwd: str) -> float:
    """Instructions the command (and its children) executed, counted by
    valgrind's exp-bbv tool (deterministic; a rep-prefixed string
    instruction counts once; ~35x slower than native, callgrind ~50x)."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(["valgrind", "--tool=exp-bbv", f"--bb-out-file={d}/bb.%p", "--interval-size=2000000000",
                            "--trace-children=yes", *cmd],
                           cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        counts = re.findall(r"Total instructions: (\d+)", r.stderr)
        if r.returncode != 0 or not counts:
            raise RuntimeError(f"{' '.join(cmd)} failed under valgrind: {r.stderr[-500:]}")
        return float(sum(int(n) for n in counts))


def saved_stock_counts(path: Path, llvm: int, cmds) -> dict[str, float]:
    """Module -> stock's instruction count, from an earlier ``--save`` file of
    the same LLVM major (modules it lacks are measured again)."""
    names = [name for name, _, _ in cmds]
    if len(set(names)) != len(names):
        raise SystemExit("--stock-from: the corpus has two sources of one object name")
    counts = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("llvm") == llvm and row.get("measure") == "instructions" and "stock" in row:
            counts[row["module"]] = row["stock"]
    counts = {n: counts[n] for n in names if n in counts}
    print(f"--stock-from {path}: stock's LLVM {llvm} counts of {len(counts)} of {len(names)} modules "
          f"(the other {len(names) - len(counts)} are measured)", file=sys.stderr)
    return counts


def cpu_seconds(cmd: list[str], cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, help="only the first N sources")
    ap.add_argument("--packages", help="comma-separated subset of the default corpus' packages")
    ap.add_argument("--llvm", type=int, default=19, choices=(19, 22), help="the clang-N and plugin to measure")
    ap.add_argument("--measure", choices=("cpu", "instructions"), default="cpu",
                    help="CPU seconds (best of --reps) or valgrind's instruction count (one run)")
    ap.add_argument("--configs", help="comma-separated subset of the configurations (stock is always measured)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="with --measure instructions: modules measured at once (counts do not depend on load)")
    ap.add_argument("--min-seconds", type=float, default=0.3,
                    help="with --measure cpu: after the first round, a module whose stock compile is faster than "
                         "this runs every configuration ceil(S / its time) times per round (at most 20), "
                         "interleaved, so that tiny modules get a best of more runs (0: once per round)")
    ap.add_argument("--save", help="append each module's measurements to this JSON-lines file as they finish")
    ap.add_argument("--stock-from", metavar="JSONL",
                    help="with --measure instructions: stock's counts from an earlier --save of the same LLVM "
                         "(deterministic; stock is then compiled once natively, for the object comparison; "
                         "modules the file lacks are measured)")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": 2 lz4 sources, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.packages, args.limit, args.reps, args.min_seconds = "lz4", 2, 1, 0.0
    if args.measure == "instructions":
        args.reps = 1
    elif args.stock_from:
        ap.error("--stock-from needs --measure instructions (CPU times are not comparable across runs)")
    elif args.jobs != 1:
        ap.error("--jobs needs --measure instructions (CPU times of concurrent compiles disturb each other)")

    work = Path(tempfile.mkdtemp(prefix="mlopt-bench-upkeep-"))
    cmds = commands(args.packages.split(",") if args.packages else None, work, args.llvm)[:args.limit]
    so = random_compiled_policy(work, args.llvm, ["lz4"] if args.quick else None)
    replays = heuristic_decisions(cmds, args.llvm, work / "replay")
    stock_counts = saved_stock_counts(Path(args.stock_from), args.llvm, cmds) if args.stock_from else None
    logs = work / "logs"

    def plugin(upkeep: str, **kw) -> list[str]:
        return clang_flags(llvm=args.llvm, **kw) + ["-mllvm", f"-mlopt-inline-features={upkeep}"]

    configs = {
        "stock": lambda k: [],
        "so-llvm": lambda k: plugin("llvm", model=so, replay=replays[k]),
        "so-mlopt": lambda k: plugin("mlopt", model=so, replay=replays[k]),
        "log-llvm": lambda k: plugin("llvm", training_log=f"{logs}/llvm-%m.log", overwrite_log=True),
        "log-mlopt": lambda k: plugin("mlopt", training_log=f"{logs}/mlopt-%m.log", overwrite_log=True),
    }
    if args.configs:
        wanted = {"stock", *args.configs.split(",")}
        unknown = wanted - set(configs)
        if unknown:
            ap.error(f"unknown configuration(s) {', '.join(sorted(unknown))}; known: {', '.join(configs)}")
        configs = {n: c for n, c in configs.items() if n in wanted}
    names = list(configs)
    measure = instructions if args.measure == "instructions" else cpu_seconds
    langs = {"c": 0, "c++": 0}
    for _, cmd, _ in cmds:
        langs["c++" if cmd[0].startswith("clang++") else "c"] += 1
    print(f"LLVM {args.llvm} ({cmds[0][1][0]}); corpus: {len(cmds)} sources ({langs['c']} C, {langs['c++']} C++); "
          f"configurations: {', '.join(names)}; {args.reps} interleaved rounds, best per module; "
          + ("CPU s of the compiler (user + sys)" if args.measure == "cpu" else "instructions (valgrind exp-bbv)")
          + f"; load average at start {os.getloadavg()[0]:.2f}")
    best = {n: np.full(len(cmds), np.inf) for n in names}
    differ: dict[str, list[str]] = {n: [] for n in names}
    start = time.time()
    save_lock = threading.Lock()

    def measure_module(rep: int, i: int) -> None:
        name, cmd, cwd = cmds[i]
        order = names[(i + rep) % len(names):] + names[:(i + rep) % len(names)]
        # After the first round, a module faster than --min-seconds runs its configurations
        # several times over (interleaved) in each round: tiny compiles get a best of more runs.
        if args.measure == "cpu" and rep > 0 and args.min_seconds > 0:
            order = order * max(1, min(20, math.ceil(args.min_seconds / best["stock"][i])))
        objects = {}
        for n in order:
            out = str(work / f"{n}-{i}.o") if rep == 0 else os.devnull
            c = [cmd[0], *configs[n](i), *cmd[1:], "-o", out]
            if n == "stock" and stock_counts and name in stock_counts:
                subprocess.run(c, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                best[n][i] = stock_counts[name]
            else:
                best[n][i] = min(best[n][i], measure(c, cwd))
            if rep == 0 and n not in objects:
                objects[n] = Path(out).read_bytes()
                os.unlink(out)
        for n in objects:
            if objects[n] != objects["stock"]:
                differ[n].append(name)
        if args.save:
            row = {"module": name, "round": rep, "llvm": args.llvm, "measure": args.measure,
                   **{n: float(best[n][i]) for n in names}}
            with save_lock, open(args.save, "a") as f:
                f.write(json.dumps(row) + "\n")

    for rep in range(args.reps):
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for k, _ in enumerate(pool.map(measure_module, [rep] * len(cmds), range(len(cmds)))):
                if args.measure == "instructions" and (k + 1) % 10 == 0:
                    print(f"  {k + 1}/{len(cmds)} modules ({time.time() - start:.0f} s)", file=sys.stderr)
        print(f"  round {rep + 1}/{args.reps} done ({time.time() - start:.0f} s)", file=sys.stderr)

    stock = best["stock"]
    unit, scale = ("total s", 1.0) if args.measure == "cpu" else ("total G", 1e-9)
    print(f"\n{'configuration':<12}{unit:>9}{'vs stock':>10}{'median':>9}{'worst':>9}"
          "  worst module, modules > +10%")
    for n in names:
        r = best[n] / stock
        worst = int(np.argmax(r))
        over = [cmds[i][0] for i in np.flatnonzero(r > 1.10)]
        print(f"{n:<12}{best[n].sum() * scale:>9.2f}{best[n].sum() / stock.sum():>10.3f}"
              f"{np.median(r):>9.3f}{r.max():>9.3f}"
              f"  {cmds[worst][0]}, {len(over)}{': ' + ' '.join(over[:6]) if over else ''}")
    for a, b in (("so-mlopt", "so-llvm"), ("log-mlopt", "log-llvm")):
        if a not in best or b not in best:
            continue
        print(f"{a} / {b}: total {best[a].sum() / best[b].sum():.3f}, "
              f"median module {np.median(best[a] / best[b]):.3f}")
    for n in names[1:]:
        print(f"objects of {n} identical to stock's: {len(cmds) - len(differ[n])} of {len(cmds)}"
              + (f" (differ: {' '.join(differ[n][:6])})" if differ[n] else ""))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"\nlargest stock modules ({'CPU s' if args.measure == 'cpu' else 'G instructions'}) and their ratios:")
    for i in np.argsort(-stock)[:8]:
        print(f"  {cmds[i][0]:<40}{stock[i] * scale:>7.2f}"
              + "".join(f"  {n} {best[n][i] / stock[i]:.3f}" for n in names[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""In-process compile vs the subprocess pipeline, same policy, same parallelism.

For every module of the benchmark corpus (92 real C modules) and a compiled
random policy (.so, the release path), measure the wall time to get what a
training step needs -- the .text size and the training log as numpy -- by

  subprocess:  opt-19 -load-pass-plugin=mlopt -mlopt-inline-model=policy.so
               -mlopt-inline-training-log=m.log -passes=default<Oz> m.bc -o m.opt.bc
               && llc-19 -filetype=obj m.opt.bc -o m.o ; .text size read from m.o,
               mlopt.read_log(m.log)
  in-process:  mlopt.compile(module, policy)           (mlopt.compile_many for N threads)

with 1 and 2 workers (threads running the subprocess chains / compiling;
both start the largest modules first), interleaved, best of --reps. Prints throughput ratios and the per-module
overhead in ms; the two sides are checked to agree on every size and log.

    python3 benchmarks/bench_inprocess.py [--reps 2] [--limit N] [--quick]
"""

from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import mlopt
from _common import QUICK_HELP, QUICK_SDISTS, SDISTS, bench_corpus, random_policy
from mlopt.compiler.plugin import plugin_path


def elf_text_size(data: bytes) -> int:
    """Sum of .text* section sizes of an ELF64 little-endian object."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def section(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    strtab = section(shstrndx)
    names = data[strtab[4]: strtab[4] + strtab[5]]
    total = 0
    for i in range(shnum):
        s = section(i)
        name = names[s[0]: names.index(b"\0", s[0])]
        if name == b".text" or name.startswith(b".text."):
            total += s[5]
    return total


def subprocess_one(module: Path, policy: Path, plugin: str, work: Path):
    stem = work / module.stem
    subprocess.run(["opt-19", f"-load-pass-plugin={plugin}", f"-mlopt-inline-model={policy}",
                    f"-mlopt-inline-training-log={stem}.log", "-mlopt-inline-training-log-overwrite",
                    "-passes=default<Oz>", str(module),
                    "-o", f"{stem}.opt.bc"], check=True, stderr=subprocess.PIPE)
    subprocess.run(["llc-19", "-filetype=obj", f"{stem}.opt.bc", "-o", f"{stem}.o"], check=True)
    return elf_text_size(Path(f"{stem}.o").read_bytes()), mlopt.read_log(f"{stem}.log")


def run_subprocess(modules, policy, plugin, work, threads):
    """Same scheduling as compile_many: largest modules first, results in input order."""
    order = sorted(range(len(modules)), key=lambda i: (-modules[i].stat().st_size, i))
    results = [None] * len(modules)
    with ThreadPoolExecutor(max_workers=threads) as ex:
        futures = {ex.submit(subprocess_one, modules[i], policy, plugin, work): i for i in order}
        for f, i in futures.items():
            results[i] = f.result()
    return results


def run_inprocess(modules, policy, threads):
    results = mlopt.compile_many(modules, policy=policy, threads=threads)
    return [(r.text_size, r.log) for r in results]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="use only the first N modules")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": lz4's 2 smallest modules, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.limit = 1, 2

    with tempfile.TemporaryDirectory(prefix="mlopt-bench-inprocess-") as tmp:
        work = Path(tmp)
        (work / "corpus").mkdir()
        paths = bench_corpus(work / "corpus", args.limit, QUICK_SDISTS if args.quick else SDISTS, smallest=args.quick)
        # opt-19 + llc-19 as the subprocess side runs them (a module without a command
        # line is otherwise compiled as clang -Oz -c would: PIE, SLP on).
        modules = [mlopt.Module(p, opt_level="Oz", reloc_model="static") for p in paths]
        traces = [r.log for r in mlopt.compile_many(modules, codegen=False)]
        so = mlopt.compile_policy(random_policy(traces).export(work / "policy"), work / "policy.so")
        loaded = mlopt.load_policy(so)
        plugin = str(plugin_path())
        out = work / "out"
        out.mkdir()

        # both sides must produce the same sizes and logs
        sub = run_subprocess(paths, so, plugin, out, 2)
        inp = run_inprocess(modules, loaded, 2)
        for p, (s_size, s_log), (i_size, i_log) in zip(paths, sub, inp):
            assert s_size == i_size, p.name
            assert np.array_equal(s_log["inlining_decision"], i_log["inlining_decision"]), p.name
        decisions = sum(len(log) for _, log in inp)
        print(f"policy: compiled random MLP; {decisions} decisions, "
              f"{sum(s for s, _ in inp)} bytes of .text over the corpus; both sides agree")

        best: dict[tuple[str, int], float] = {}
        for rep in range(args.reps):
            for threads in (1, 2):
                for side in ("subprocess", "in-process"):
                    start = time.perf_counter()
                    if side == "subprocess":
                        run_subprocess(paths, so, plugin, out, threads)
                    else:
                        run_inprocess(modules, loaded, threads)
                    t = time.perf_counter() - start
                    best[side, threads] = min(best.get((side, threads), np.inf), t)
            print(f"  rep {rep + 1}/{args.reps} done", file=sys.stderr)

        # per-module times (1 worker) for the overhead distribution
        per_sub, per_in = [], []
        for p, m in zip(paths, modules):
            start = time.perf_counter()
            subprocess_one(p, so, plugin, out)
            per_sub.append(time.perf_counter() - start)
            start = time.perf_counter()
            mlopt.compile(m, policy=loaded)
            per_in.append(time.perf_counter() - start)
        per_sub, per_in = np.array(per_sub), np.array(per_in)

        n = len(paths)
        print(f"\n{'workers':<9}{'subprocess s':>14}{'in-process s':>14}{'modules/s sub':>15}"
              f"{'modules/s in':>14}{'throughput x':>14}{'overhead ms/module':>20}")
        for threads in (1, 2):
            s, i = best["subprocess", threads], best["in-process", threads]
            print(f"{threads:<9}{s:>14.2f}{i:>14.2f}{n / s:>15.2f}{n / i:>14.2f}{s / i:>14.2f}"
                  f"{(s - i) / n * 1000 * threads:>20.1f}")
        ratio = per_sub / per_in
        small = per_in < np.median(per_in)
        print(f"\nper module (1 worker, one run): subprocess - in-process = "
              f"{np.median(per_sub - per_in) * 1000:.1f} ms median, "
              f"{np.mean(per_sub - per_in) * 1000:.1f} ms mean")
        print(f"per-module speed-up: median {np.median(ratio):.2f}x, "
              f"smaller half of the corpus {per_sub[small].sum() / per_in[small].sum():.2f}x, "
              f"larger half {per_sub[~small].sum() / per_in[~small].sum():.2f}x, "
              f"min {ratio.min():.2f}x, max {ratio.max():.2f}x")


if __name__ == "__main__":
    main()

"""How well does the trace reward predict a variant's run, and how much faster is it than running? (issue 24)

For a real program -- lz4 (HC level 9 compress + decompress of 1 MiB, the
driver benchmarks/regalloc_speed/codec_bench.c) or zstd -- built by clang-19
with `mlopt reward build-flags` and the default eviction advisor (the
baseline, measured in the same run) and with N random eviction policies
(`mlopt policy export --problem regalloc --random --seed K`, loaded by the
plugin): the default build is traced once under valgrind, every variant is
estimated from that trace, then every variant is measured -- instructions
under callgrind (the same recording, same arguments) and native wall time
(rounds interleaved across variants, mean and 95% CI). Prints per variant
predicted vs measured instructions and the error, predicted cycles, the
time; then Spearman rho (predicted instructions vs measured instructions,
predicted instructions and cycles vs time) and the estimate's time against
running under valgrind and natively.

    python3 benchmarks/bench_reward_trace.py --out /tmp/brt [--program lz4] [--variants 8] [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

os.environ.setdefault("MLOPT_LLVM", "19")
from mlopt.cli import main as mlopt_main  # noqa: E402
from mlopt.compiler.plugin import clang_flags  # noqa: E402
from mlopt.corpus.fetch import PACKAGES, cache_dir, package_sources, sdist_source  # noqa: E402
from mlopt.reward import Trace, build_flags, estimate, record  # noqa: E402

HERE = Path(__file__).resolve().parent
PROGRAMS = {"lz4": ("lz4", "CODEC_LZ4", ["lz4.c", "lz4hc.c"]), "zstd": ("zstandard", "CODEC_ZSTD", None)}


def sources(program: str) -> tuple[list[Path], list[str]]:
    pkg_name, define, only = PROGRAMS[program]
    pkg = next(p for p in PACKAGES if p.name == pkg_name)
    top = sdist_source(pkg, cache_dir())
    srcs = [s for s in package_sources(pkg, top) if only is None or s.name in only]
    return [*srcs, HERE / "regalloc_speed" / "codec_bench.c"], [*(f"-I{top / i}" for i in pkg.include),
                                                                  *pkg.flags, f"-D{define}"]


def build(out: Path, srcs: list[Path], cflags: list[str], extra: list[str], clang: str) -> Path:
    """Objects in parallel (2 at a time), then the link."""
    out.parent.mkdir(parents=True, exist_ok=True)
    objs = [out.parent / f"{out.name}.{i:03d}.o" for i in range(len(srcs))]

    def one(i):
        subprocess.run(["nice", "-n", "10", clang, "-O2", *cflags, *build_flags(19), *extra, "-c", str(srcs[i]),
                        "-o", str(objs[i])], check=True)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, range(len(srcs))))
    subprocess.run([clang, *map(str, objs), "-o", str(out), "-lm"], check=True)
    return out


def cpu_call(fn, *a, **kw):
    """(fn's result, wall seconds, CPU seconds of this process and its children)."""
    t, c = time.perf_counter(), os.times()
    r = fn(*a, **kw)
    d = os.times()
    return r, time.perf_counter() - t, (d.user - c.user + d.system - c.system + d.children_user - c.children_user
                                        + d.children_system - c.children_system)


def spearman(a, b) -> float:
    def ranks(x):
        x = np.asarray(x, float)
        r = np.empty(len(x))
        r[np.argsort(x, kind="stable")] = np.arange(len(x))
        for v in np.unique(x):
            r[x == v] = r[x == v].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    return float(np.corrcoef(ra, rb)[0, 1]) if ra.std() > 0 and rb.std() > 0 else float("nan")


def ci95(xs) -> float:
    return 1.96 * statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--program", choices=sorted(PROGRAMS), default="lz4")
    ap.add_argument("--variants", type=int, default=8, help="random eviction policies (seeds 1..N)")
    ap.add_argument("--runs", type=int, default=10, help="native timed runs per variant (interleaved)")
    ap.add_argument("--rounds", default="1", help="the driver's argument (codec rounds) for every run")
    ap.add_argument("--cpu", default=None, help="llvm-mca -mcpu (default: this host)")
    ap.add_argument("--clang", default="clang-19")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    srcs, cflags = sources(args.program)
    variants: dict[str, list[str]] = {"default": []}
    for seed in range(1, args.variants + 1):
        so = out / "policies" / f"seed{seed}.so"
        if not so.exists():
            d = out / "policies" / f"seed{seed}"
            mlopt_main(["policy", "export", "--problem", "regalloc", "--random", "--seed", str(seed), "-o", str(d),
                        "--force"])
            mlopt_main(["policy", "compile", str(d), "-o", str(so), "--force"])
        variants[f"seed{seed}"] = clang_flags(llvm=19, regalloc_model=so)
    exes = {}
    for name, extra in variants.items():
        exe = out / "bin" / args.program / name
        if not exe.exists():
            t = time.perf_counter()
            build(exe, srcs, cflags, extra, args.clang)
            print(f"built {name} in {time.perf_counter() - t:.0f} s", flush=True)
        exes[name] = exe
    run_args = shlex.split(args.rounds)
    want = subprocess.run([exes["default"], *run_args], capture_output=True, check=True).stdout
    correct = {n: subprocess.run([e, *run_args], capture_output=True).stdout == want for n, e in exes.items()}

    trace_path = out / f"{args.program}.trace"
    t = time.perf_counter()
    trace = record(str(exes["default"]), run_args, stdout=subprocess.DEVNULL)
    trace_s = time.perf_counter() - t
    trace.save(trace_path, overwrite=True)
    trace = Trace.load(trace_path)
    rows = {}
    for name, exe in exes.items():
        e, _, cpu1 = cpu_call(estimate, trace, exe, cpu=args.cpu)
        # the llvm-mca costs cached: the steady-state estimate time
        e2, _, cpu2 = cpu_call(estimate, trace, exe, cpu=args.cpu)
        rows[name] = {"predicted": e.instructions, "cycles": e.cycles, "cfg_differs": e.cfg_differs,
                      "estimate_s": e.seconds, "estimate_cached_s": e2.seconds, "estimate_cpu_s": cpu1,
                      "estimate_cached_cpu_s": cpu2, "correct": correct[name], "cpu": e.cpu}
    for name, exe in exes.items():
        m, rows[name]["valgrind_s"], rows[name]["valgrind_cpu_s"] = cpu_call(
            record, str(exe), run_args, stdout=subprocess.DEVNULL)
        rows[name]["measured"] = m.total_instructions
        rows[name]["error_pct"] = 100 * (rows[name]["predicted"] - m.total_instructions) / m.total_instructions
    for _ in range(args.runs):
        for name, exe in exes.items():
            _, wall, cpu = cpu_call(subprocess.run, [exe, *run_args], capture_output=True,
                                    check=True)
            rows[name].setdefault("times", []).append(wall)
            rows[name].setdefault("cpu_times", []).append(cpu)

    base = rows["default"]
    print(f"\n{args.program}, {len(rows)} variants, run '{' '.join(run_args)}', trace {trace_s:.1f} s under "
          f"valgrind, llvm-mca -mcpu={base['cpu']}")
    print(f"{'variant':10} {'predicted':>13} {'measured':>13} {'error%':>8} {'instr/def':>9} {'cycles/def':>10} "
          f"{'time/def':>9} {'+-95%':>7} {'ok':>3}")
    bt = statistics.mean(base["times"])
    for name, r in rows.items():
        mt = statistics.mean(r["times"])
        print(f"{name:10} {r['predicted']:13d} {r['measured']:13d} {r['error_pct']:8.3f} "
              f"{r['measured'] / base['measured']:9.4f} {r['cycles'] / base['cycles']:10.4f} {mt / bt:9.4f} "
              f"{ci95(r['times']) / bt:7.4f} {'y' if r['correct'] else 'N':>3}")
    names = list(rows)
    pred = [rows[n]["predicted"] for n in names]
    meas = [rows[n]["measured"] for n in names]
    cyc = [rows[n]["cycles"] for n in names]
    tim = [statistics.mean(rows[n]["times"]) for n in names]
    summary = {
        "program": args.program, "variants": len(names), "trace_s": trace_s,
        "max_abs_error_pct": max(abs(rows[n]["error_pct"]) for n in names),
        "rho_pred_vs_measured_instr": spearman(pred, meas), "rho_pred_instr_vs_time": spearman(pred, tim),
        "rho_pred_cycles_vs_time": spearman(cyc, tim), "rho_measured_instr_vs_time": spearman(meas, tim),
        "estimate_s_mean": statistics.mean(rows[n]["estimate_s"] for n in names),
        "estimate_cached_s_mean": statistics.mean(rows[n]["estimate_cached_s"] for n in names),
        "valgrind_s_mean": statistics.mean(rows[n]["valgrind_s"] for n in names),
        "native_s_mean": statistics.mean(tim),
        "estimate_cached_cpu_s_mean": statistics.mean(rows[n]["estimate_cached_cpu_s"] for n in names),
        "valgrind_cpu_s_mean": statistics.mean(rows[n]["valgrind_cpu_s"] for n in names),
        "native_cpu_s_mean": statistics.mean(statistics.mean(rows[n]["cpu_times"]) for n in names),
        "rho_pred_instr_vs_cpu_time": spearman(pred, [statistics.mean(rows[n]["cpu_times"]) for n in names]),
        "rho_pred_cycles_vs_cpu_time": spearman(cyc, [statistics.mean(rows[n]["cpu_times"]) for n in names]),
        "load_average": os.getloadavg()[0],
        "cfg_differs": sorted({f for n in names for f in rows[n]["cfg_differs"]}),
    }
    summary["speedup_vs_valgrind"] = summary["valgrind_s_mean"] / summary["estimate_cached_s_mean"]
    summary["speedup_vs_native"] = summary["native_s_mean"] / summary["estimate_cached_s_mean"]
    summary["cpu_speedup_vs_valgrind"] = summary["valgrind_cpu_s_mean"] / summary["estimate_cached_cpu_s_mean"]
    summary["cpu_speedup_vs_native"] = summary["native_cpu_s_mean"] / summary["estimate_cached_cpu_s_mean"]
    print(json.dumps(summary, indent=2))
    (out / f"{args.program}_summary.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

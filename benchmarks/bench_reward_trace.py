"""How well does the trace reward predict a variant's run, and how much faster is it than running?

For real programs (benchmarks/regalloc_speed/programs.py: lz4 and zstd from
the default corpus through codec_bench.c; zlib's minigzip, libdeflate's gzip,
ncompress and cJSON from Debian source packages that are in no training
corpus of mlopt), each built by clang-19 -O2 with `mlopt reward
build-flags`: the default eviction advisor (the baseline, measured in the
same run), N random eviction policies (`mlopt policy export --problem
regalloc --random --seed K`, loaded by the plugin) and M of them capped at
one eviction per virtual register (`-mlopt-regalloc-max-evictions=1`:
closer to the default), and trained policies given with ``--policy
NAME=SO``. The default build is traced once under valgrind,
every variant is estimated from that trace, then measured: instructions
under callgrind (the same recording, same arguments) and native wall and CPU
time (rounds interleaved across variants, mean and 95% CI). Beside them,
each variant's RegAllocScore (the engine allocating every module's -O2
bitcode with the same policy: the static reward regalloc training used so
far). Prints per variant predicted vs measured instructions and the error,
predicted cycles, the score, the time; then Spearman rho of each predictor
(predicted instructions, llvm-mca cycles, RegAllocScore) vs measured
instructions and time, and the estimate's time against running.

    python3 benchmarks/bench_reward_trace.py --out /tmp/brt --program zlib,libdeflate,ncompress,cjson \\
        --variants 10 --capped 9 --runs 10 [--policy es=runs/es.so ...]
    python3 benchmarks/bench_reward_trace.py --out /tmp/brt --quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

os.environ.setdefault("MLOPT_LLVM", "19")
from mlopt.cli import main as mlopt_main  # noqa: E402
from mlopt.compiler.plugin import clang_flags  # noqa: E402
from mlopt.reward import Trace, build_flags, estimate, record  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "regalloc_speed"))
from programs import PROGRAMS  # noqa: E402


def build(out: Path, srcs: list[Path], cflags: list[str], extra: list[str], clang: str) -> Path:
    """Objects in parallel (2 at a time), then the link."""
    out.parent.mkdir(parents=True, exist_ok=True)
    objs = [out.parent / f"{out.name}.{i:03d}.o" for i in range(len(srcs))]

    def one(i):
        subprocess.run(["nice", "-n", "10", clang, "-O2", "-w", *cflags, *build_flags(19), *extra, "-c", str(srcs[i]),
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


def policies(out: Path, seeds: int) -> dict[int, Path]:
    """Random eviction policies compiled to .so, seeds 1..N."""
    made = {}
    for seed in range(1, seeds + 1):
        so = out / "policies" / f"seed{seed}.so"
        if not so.exists():
            d = out / "policies" / f"seed{seed}"
            mlopt_main(["policy", "export", "--problem", "regalloc", "--random", "--seed", str(seed), "-o", str(d),
                        "--force"])
            mlopt_main(["policy", "compile", str(d), "-o", str(so), "--force"])
        made[seed] = so
    return made


def regalloc_scores(out: Path, srcs: list[Path], cflags: list[str], variants: dict, clang: str) -> dict[str, float]:
    """Each variant's RegAllocScore: the engine allocates every module's -O2 bitcode with its policy."""
    from mlopt.compiler.allocate import allocate

    out.mkdir(parents=True, exist_ok=True)
    bcs = []
    for k, src in enumerate(srcs):
        bc = out / f"{k:03d}.bc"
        if not bc.exists():
            subprocess.run(["nice", "-n", "10", clang, "-O2", "-w", *cflags, "-emit-llvm", "-c", str(src), "-o",
                            str(bc)], check=True)
        bcs.append(bc)
    return {name: sum(allocate(bc, so, pipeline="", log=False, llvm=19, max_evictions=cap).score for bc in bcs)
            for name, (so, cap) in variants.items()}


def study(program, out: Path, args, seeds: dict[int, Path]) -> dict:
    tree = program.tree(out)
    srcs, cflags = program.source_files(tree), program.flags(tree)
    variants: dict[str, tuple[Path | None, int]] = {"default": (None, 100)}
    for seed in range(1, args.variants + 1):
        variants[f"seed{seed}"] = (seeds[seed], 100)
    for seed in range(1, args.capped + 1):
        variants[f"seed{seed}-cap1"] = (seeds[seed], 1)
    for name, so in args.policy:
        variants[name] = (so, 100)
    exes = {}
    for name, (so, cap) in variants.items():
        exe = out / "bin" / program.name / name
        extra = [] if so is None else [*clang_flags(llvm=19, regalloc_model=so), "-mllvm",
                                       f"-mlopt-regalloc-max-evictions={cap}"]
        if not exe.exists():
            t = time.perf_counter()
            build(exe, srcs, cflags, extra, args.clang)
            print(f"{program.name}: built {name} in {time.perf_counter() - t:.0f} s", flush=True)
        exes[name] = exe
    run_args = program.run_args(program.make_input(tree, out))
    want = subprocess.run([exes["default"], *run_args], capture_output=True, check=True).stdout
    correct = {n: subprocess.run([e, *run_args], capture_output=True).stdout == want for n, e in exes.items()}

    t = time.perf_counter()
    scores = regalloc_scores(out / "bc" / program.name, srcs, cflags, variants, args.clang) \
        if not args.no_score else {}
    score_s = time.perf_counter() - t
    trace_path = out / f"{program.name}.trace"
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
        rows[name] = {"predicted": e.instructions, "cycles": e.cycles, "block_cycles": e.block_cycles,
                      "cycles_model": e.cycles_model, "paths_costed": e.paths_costed, "cfg_differs": e.cfg_differs,
                      "cfg_differs_instruction_share": e.cfg_differs_instruction_share,
                      "estimate_s": e.seconds, "estimate_cached_s": e2.seconds, "estimate_cpu_s": cpu1,
                      "estimate_cached_cpu_s": cpu2, "correct": correct[name], "cpu": e.cpu,
                      "score": scores.get(name, float("nan"))}
    for name, exe in exes.items():
        m, rows[name]["valgrind_s"], rows[name]["valgrind_cpu_s"] = cpu_call(
            record, str(exe), run_args, stdout=subprocess.DEVNULL, order=False)
        rows[name]["measured"] = m.total_instructions
        rows[name]["error_pct"] = 100 * (rows[name]["predicted"] - m.total_instructions) / m.total_instructions
    for _ in range(args.runs):
        for name, exe in exes.items():
            _, wall, cpu = cpu_call(subprocess.run, [exe, *run_args], capture_output=True, check=True)
            rows[name].setdefault("times", []).append(wall)
            rows[name].setdefault("cpu_times", []).append(cpu)

    base = rows["default"]
    print(f"\n{program.name}, {len(rows)} variants, run '{' '.join(run_args)}' ({program.input}), "
          f"trace {trace_s:.1f} s under valgrind, llvm-mca -mcpu={base['cpu']}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':13} {'predicted':>13} {'measured':>13} {'error%':>8} {'instr/def':>9} {'cycles/def':>10} "
          f"{'block/def':>9} "
          f"{'score/def':>9} {'cpu/def':>8} {'+-95%':>7} {'ok':>3}")
    bt = statistics.mean(base["cpu_times"])
    for name, r in rows.items():
        mt = statistics.mean(r["cpu_times"])
        print(f"{name:13} {r['predicted']:13d} {r['measured']:13d} {r['error_pct']:8.3f} "
              f"{r['measured'] / base['measured']:9.4f} {r['cycles'] / base['cycles']:10.4f} "
              f"{r['block_cycles'] / base['block_cycles']:9.4f} "
              f"{r['score'] / base['score'] if scores else float('nan'):9.4f} {mt / bt:8.4f} "
              f"{ci95(r['cpu_times']) / bt:7.4f} {'y' if r['correct'] else 'N':>3}")
    names = list(rows)
    col = lambda k: [rows[n][k] for n in names]  # noqa: E731
    tim = [statistics.mean(rows[n]["times"]) for n in names]
    cput = [statistics.mean(rows[n]["cpu_times"]) for n in names]
    # Variants whose time differs from the default's by more than the noise (95% CIs apart).
    noise = [abs(c - bt) > ci95(rows[n]["cpu_times"]) + ci95(base["cpu_times"]) for n, c in zip(names, cput)]
    separable = [n for n, k in zip(names, noise) if k] + ["default"]
    sep = lambda k: [rows[n][k] for n in separable]  # noqa: E731
    sep_cpu = [statistics.mean(rows[n]["cpu_times"]) for n in separable]
    summary = {
        "program": program.name, "input": program.input, "in_corpus": program.in_corpus, "variants": len(names),
        "trace_s": trace_s,
        "max_abs_error_pct": max(abs(rows[n]["error_pct"]) for n in names),
        "rho_pred_vs_measured_instr": spearman(col("predicted"), col("measured")),
        "rho_cycles_vs_measured_instr": spearman(col("cycles"), col("measured")),
        "rho_score_vs_measured_instr": spearman(col("score"), col("measured")) if scores else None,
        "rho_pred_instr_vs_time": spearman(col("predicted"), tim),
        "rho_pred_instr_vs_cpu_time": spearman(col("predicted"), cput),
        "rho_pred_cycles_vs_cpu_time": spearman(col("cycles"), cput),
        "cycles_model": base["cycles_model"],
        "rho_block_cycles_vs_measured_instr": spearman(col("block_cycles"), col("measured")),
        "rho_block_cycles_vs_cpu_time": spearman(col("block_cycles"), cput),
        "rho_block_cycles_vs_cpu_time_separable": spearman(sep("block_cycles"), sep_cpu),
        "rho_score_vs_cpu_time": spearman(col("score"), cput) if scores else None,
        "rho_measured_instr_vs_cpu_time": spearman(col("measured"), cput),
        "separable_variants": len(separable),
        "rho_pred_instr_vs_cpu_time_separable": spearman(sep("predicted"), sep_cpu),
        "rho_pred_cycles_vs_cpu_time_separable": spearman(sep("cycles"), sep_cpu),
        "rho_score_vs_cpu_time_separable": spearman(sep("score"), sep_cpu) if scores else None,
        "estimate_s_mean": statistics.mean(col("estimate_s")),
        "estimate_cached_s_mean": statistics.mean(col("estimate_cached_s")),
        "estimate_cached_cpu_s_mean": statistics.mean(col("estimate_cached_cpu_s")),
        "valgrind_s_mean": statistics.mean(col("valgrind_s")),
        "valgrind_cpu_s_mean": statistics.mean(col("valgrind_cpu_s")),
        "native_s_mean": statistics.mean(tim), "native_cpu_s_mean": statistics.mean(cput),
        "score_s": score_s, "load_average": os.getloadavg()[0],
        "all_correct": all(correct.values()),
        "cfg_differs": sorted({f for n in names for f in rows[n]["cfg_differs"]}),
        "cfg_differs_instruction_share_max": max(col("cfg_differs_instruction_share")),
    }
    summary["speedup_vs_valgrind"] = summary["valgrind_s_mean"] / summary["estimate_cached_s_mean"]
    summary["speedup_vs_native"] = summary["native_s_mean"] / summary["estimate_cached_s_mean"]
    summary["cpu_speedup_vs_native"] = summary["native_cpu_s_mean"] / summary["estimate_cached_cpu_s_mean"]
    print(json.dumps(summary, indent=2))
    (out / f"{program.name}_summary.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    return summary


def named_policy(text: str) -> tuple[str, Path]:
    """NAME=SO of --policy: a variant name and an existing compiled eviction policy."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=SO")
    if name == "default" or name.startswith("seed"):
        raise argparse.ArgumentTypeError(f"{name!r} names a built-in variant; choose another name")
    if not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{path}: no such file")
    return name, Path(path).resolve()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--program", default="lz4", help=f"comma-separated, of: {', '.join(PROGRAMS)}")
    ap.add_argument("--variants", type=int, default=8, help="random eviction policies (seeds 1..N)")
    ap.add_argument("--capped", type=int, default=0,
                    help="also seeds 1..M with at most one eviction per virtual register (closer to the default)")
    ap.add_argument("--policy", type=named_policy, action="append", default=[], metavar="NAME=SO",
                    help="also a trained eviction policy (a compiled .so), e.g. es=runs/es/policy.so; repeatable")
    ap.add_argument("--runs", type=int, default=10, help="native timed runs per variant (interleaved)")
    ap.add_argument("--cpu", default=None, help="llvm-mca -mcpu (default: this host)")
    ap.add_argument("--clang", default="clang-19")
    ap.add_argument("--no-score", action="store_true", help="skip RegAllocScore (needs the engine's regalloc)")
    ap.add_argument("--input-scale", type=int, default=1, metavar="K",
                    help="K times the program's input (a run K times longer; the trace's size and the estimate's "
                         "time should not grow with it)")
    ap.add_argument("--quick", action="store_true", help="lz4 on 256 KiB, 1 random variant, 2 runs")
    args = ap.parse_args()
    if args.quick:
        args.program, args.variants, args.capped, args.runs = "lz4", 1, 0, 2
    names = args.program.split(",")
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(PROGRAMS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = policies(args.out, max(args.variants, args.capped))
    programs = [PROGRAMS[n].scaled(args.input_scale) for n in names]
    if args.quick:  # codec_bench's second argument: KiB of input
        programs = [replace(p, args=(*p.args, "256")) for p in programs]
    summaries = [study(p, args.out, args, seeds) for p in programs]
    print(f"\n{'program':11} {'variants':>8} {'max err%':>8} {'rho pred~instr':>14} {'rho score~instr':>15} "
          f"{'rho pred~cpu':>12} {'rho cyc~cpu':>11} {'rho blk~cpu':>11} {'rho score~cpu':>13} {'separable':>9} "
          f"{'est s':>6} "
          f"{'run s':>6} {'valgrind s':>10}")
    for m in summaries:
        f = lambda v: "n/a" if v is None or v != v else f"{v:.2f}"  # noqa: E731
        print(f"{m['program']:11} {m['variants']:>8} {m['max_abs_error_pct']:>8.3f} "
              f"{f(m['rho_pred_vs_measured_instr']):>14} {f(m['rho_score_vs_measured_instr']):>15} "
              f"{f(m['rho_pred_instr_vs_cpu_time']):>12} {f(m['rho_pred_cycles_vs_cpu_time']):>11} "
              f"{f(m['rho_block_cycles_vs_cpu_time']):>11} "
              f"{f(m['rho_score_vs_cpu_time']):>13} {m['separable_variants']:>9} "
              f"{m['estimate_cached_s_mean']:>6.2f} {m['native_s_mean']:>6.2f} {m['valgrind_s_mean']:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Train a regalloc eviction policy on the trace reward and measure its speed.

One program is the training program (default zlib's minigzip, from Debian,
in no corpus of mlopt): its modules become a corpus (pre-optimization
bitcode and the -O2 command line), its default build (clang-19 -O2 with
`mlopt reward build-flags`) is traced once under valgrind. Then:

1. behavioral cloning of an EvictionPolicy to the default advisor's
   choices on those modules (the warm start, problem regalloc);
2. ES on the trace reward, problem regalloc-trace-cycles (default: the
   cycles the recorded run spends in each sampled module's functions, the
   path model of a trace that kept the order) or regalloc-trace (its
   instructions): every candidate policy compiles each module in process
   and is costed by the trace (no link, no run); with --compare-score, ES
   from the same start on problem regalloc (RegAllocScore, the static
   reward) with the same settings, for comparison;
3. each best policy (by its objective on the training program: there
   is one program, so no validation split) is compiled to a .so and every
   program of --programs is built with it by stock clang-19 and the plugin,
   and measured against its default build in the same run: instructions
   under callgrind, CPU time of interleaved native runs (mean, 95% CI).
   Programs other than the training one are held out (never seen).

    python3 benchmarks/bench_regalloc_trace_es.py --out /tmp/brte --iterations 10 \\
        --programs zlib,libdeflate,ncompress,cjson --compare-score
    python3 benchmarks/bench_regalloc_trace_es.py --out /tmp/brte --quick   # lz4 on 256 KiB, 1 iteration
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "regalloc_speed"))
os.environ.setdefault("MLOPT_LLVM", "19")

from programs import PROGRAMS  # noqa: E402

import mlopt  # noqa: E402
from bench_reward_trace import build, ci95, cpu_call  # noqa: E402
from mlopt.compiler.plugin import clang_flags  # noqa: E402
from mlopt.corpus import CorpusEntry  # noqa: E402
from mlopt.policy import Vocab  # noqa: E402
from mlopt.problems import load_weights, regalloc  # noqa: E402
from mlopt.reward import record  # noqa: E402
from mlopt.rollouts.tasks import REWARD_TRACE_ENV  # noqa: E402
from mlopt.training import ESConfig, ESTrainer  # noqa: E402
from mlopt.training.bc import clone_logs  # noqa: E402
from mlopt.training.validation import costs_of  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402


def corpus_of(program, out: Path, clang: str) -> list[CorpusEntry]:
    """The program's modules: pre-optimization bitcode, compiled -O2 as its build."""
    tree = program.tree(out)
    cflags = program.flags(tree)
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    entries = []
    for k, src in enumerate(program.source_files(tree)):
        bc = out / "corpus" / f"{k:03d}_{src.stem}.bc"
        if not bc.exists():
            subprocess.run([clang, "-O2", "-w", *cflags, "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                            str(src), "-o", str(bc)], check=True)
        entries.append(CorpusEntry(f"{program.name}/{src.name}", bc, ("-O2", "-c", src.name)))
    return entries


def measure(program, out: Path, policies: dict[str, Path | None], runs: int, clang: str) -> dict:
    """Each policy's build of the program: callgrind instructions and native CPU time (interleaved)."""
    tree = program.tree(out)
    srcs, cflags = program.source_files(tree), program.flags(tree)
    exes = {}
    for name, so in policies.items():
        exe = out / "bin" / program.name / name
        if not exe.exists():
            build(exe, srcs, cflags, [] if so is None else clang_flags(llvm=19, regalloc_model=so), clang)
        exes[name] = exe
    args = program.run_args(program.make_input(tree, out))
    want = subprocess.run([exes["default"], *args], capture_output=True, check=True).stdout
    rows = {n: {"correct": subprocess.run([e, *args], capture_output=True).stdout == want,
                "instructions": record(str(e), args, stdout=subprocess.DEVNULL, order=False).total_instructions,
                "cpu": [], "wall": []}
            for n, e in exes.items()}
    for _ in range(runs):
        for n, e in exes.items():
            _, wall, cpu = cpu_call(subprocess.run, [e, *args], capture_output=True, check=True)
            rows[n]["cpu"].append(cpu)
            rows[n]["wall"].append(wall)
    base = rows["default"]
    # a run shorter than the clock's tick can measure 0 CPU seconds: no change to report then
    bt, bw = statistics.mean(base["cpu"]) or float("nan"), statistics.mean(base["wall"])
    for r in rows.values():
        r["instructions_change_percent"] = 100 * (r["instructions"] / base["instructions"] - 1)
        r["cpu_change_percent"] = 100 * (statistics.mean(r["cpu"]) / bt - 1)
        r["cpu_ci95_percent"] = 100 * ci95(r["cpu"]) / bt
        r["wall_change_percent"] = 100 * (statistics.mean(r["wall"]) / bw - 1)
        r["wall_ci95_percent"] = 100 * ci95(r["wall"]) / bw
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--program", default="zlib", choices=sorted(PROGRAMS), help="the training program")
    ap.add_argument("--programs", default="zlib,libdeflate,ncompress,cjson", help="measured after training")
    ap.add_argument("--problem", default="regalloc-trace-cycles", choices=("regalloc-trace-cycles", "regalloc-trace"),
                    help="the trace objective: predicted cycles (default) or instructions")
    ap.add_argument("--compare-score", action="store_true",
                    help="also train on RegAllocScore (problem regalloc) from the same start, same settings")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--perturbations", type=int, default=8)
    ap.add_argument("--sigma", type=float, default=0.02)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--bc-epochs", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10, help="native timed runs per build (interleaved)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clang", default="clang-19")
    ap.add_argument("--measure-only", action="store_true",
                    help="measure the policies an earlier run of --out trained (its *.so), no training")
    ap.add_argument("--quick", action="store_true", help="train on and measure lz4 alone (on 256 KiB of input: "
                    "codec_bench's second argument), 1 BC epoch, 1 ES iteration of 2 pairs, 2 runs")
    args = ap.parse_args()
    if args.quick:
        args.program, args.programs, args.iterations, args.perturbations, args.bc_epochs, args.runs = \
            "lz4", "lz4", 1, 2, 1, 2
        PROGRAMS["lz4"] = replace(PROGRAMS["lz4"], args=(*PROGRAMS["lz4"].args, "256"))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.measure_only:
        policies = {"default": None, **{so.stem: so for so in sorted(out.glob("*.so"))}}
        results = {n: measure(PROGRAMS[n], out, policies, args.runs, args.clang) for n in args.programs.split(",")}
        report(results, args.program)
        (out / "measured.json").write_text(json.dumps(results, indent=2, default=str))
        return 0
    t0 = time.perf_counter()
    program = PROGRAMS[args.program]
    entries = corpus_of(program, out, args.clang)
    tree = program.tree(out)
    default_exe = out / "bin" / program.name / "default"
    if not default_exe.exists():
        build(default_exe, program.source_files(tree), program.flags(tree), [], args.clang)
    trace_path = out / f"{program.name}.trace"
    if not trace_path.exists():
        record(str(default_exe), program.run_args(program.make_input(tree, out)),
               stdout=subprocess.DEVNULL).save(trace_path)
    os.environ[REWARD_TRACE_ENV] = str(trace_path)  # before the pool: workers inherit it
    with make_pool(args.workers) as pool:
        from mlopt.rollouts import RolloutTask, run_rollouts

        rs = run_rollouts([RolloutTask(e, None, log=True, problem="regalloc") for e in entries], pool=pool,
                          quiet=True)
        logs = [mlopt.read_log(r.value.log_bytes) for r in rs if r.ok and r.value.log_bytes]
        logs = [log for log in logs if len(log)]
        vocab = Vocab.from_logs(logs, num_buckets=100, features=regalloc.FEATURES)
        bc = clone_logs(regalloc.EvictionPolicy.random(vocab, hidden=(32, 32), seed=args.seed), logs,
                        epochs=args.bc_epochs, seed=args.seed)
        bc.policy.save(out / "bc.npz", overwrite=True)
        trace_base = costs_of([(None, e) for e in entries], args.problem, pool=pool)
        covering = [e for e, c in zip(entries, trace_base) if c]  # modules the traced run executes
        print(f"{program.name}: {len(entries)} modules, {len(covering)} executed by the traced run; "
              f"default: {sum(c for c in trace_base if c):,.0f} ({args.problem}) in them", flush=True)
        trained, runs = {}, {}
        for name, problem in (("es", args.problem), *((("es-score", "regalloc"),) if args.compare_score else ())):
            start = load_weights(out / "bc.npz", problem)  # the same network, this objective
            base = costs_of([(None, e) for e in covering], problem, pool=pool)
            baseline = {e.name: c for e, c in zip(covering, base)}
            cfg = ESConfig(iterations=args.iterations, perturbations=args.perturbations, sigma=args.sigma,
                           lr=args.lr, modules_per_perturbation=len(covering), seed=args.seed)
            trainer = ESTrainer(start, covering, baseline, out / name, cfg, validation=covering, pool=pool)
            trainer.resume()
            es_start = time.perf_counter()
            trainer.run(on_iteration=lambda m, name=name: print(json.dumps({"run": name, **m}), flush=True))
            best = out / name / "best" / "policy.npz"
            trained[name] = load_weights(best, problem) if best.exists() else trainer.current_policy()
            runs[name] = {"problem": problem, "iterations": trainer.iteration,
                          "seconds": round(time.perf_counter() - es_start, 1),
                          "objective_start_percent": trainer.start_validation,
                          "objective_best_percent": trainer.best}
    policies: dict[str, Path | None] = {"default": None}
    for name, p in (("bc", bc.policy), *trained.items()):
        model = p.export(out / f"{name}_model", overwrite=True) if hasattr(p, "export") else None
        policies[name] = mlopt.compile_policy(model, out / f"{name}.so", overwrite=True)
    results = {n: measure(PROGRAMS[n], out, policies, args.runs, args.clang) for n in args.programs.split(",")}
    summary = {"program": program.name, "modules": len(entries), "covering": len(covering), "runs": runs,
               "seconds": round(time.perf_counter() - t0, 1), "load_average": os.getloadavg()[0],
               "bc_agreement_heldout": bc.heldout_agreement}
    for name, r in runs.items():
        print(f"\n{name}: trained on {program.name} ({len(covering)} modules the run executes), problem "
              f"{r['problem']}, {r['iterations']} iterations in {r['seconds']:.0f} s; its objective on "
              f"{program.name}: {r['objective_start_percent']:+.3f}% (BC) -> "
              f"{r['objective_best_percent']:+.3f}% (best)")
    report(results, program.name)
    (out / "summary.json").write_text(json.dumps({**summary, "results": results}, indent=2, default=str))
    return 0


def report(results: dict, trained_on: str) -> None:
    print(f"{'program':11} {'policy':8} {'instructions':>13} {'instr %':>8} {'wall %':>7} {'+-95%':>6} "
          f"{'cpu %':>7} {'+-95%':>6} {'ok':>3}")
    for n, rows in results.items():
        for p, r in rows.items():
            print(f"{n + ('' if n != trained_on else '*'):11} {p:8} {r['instructions']:13d} "
                  f"{r['instructions_change_percent']:+8.3f} {r['wall_change_percent']:+7.2f} "
                  f"{r['wall_ci95_percent']:6.2f} {r['cpu_change_percent']:+7.2f} {r['cpu_ci95_percent']:6.2f} "
                  f"{'y' if r['correct'] else 'N':>3}")
    print("* the training program; the others are held out")


if __name__ == "__main__":
    sys.exit(main())

"""Does the RegAllocScore predict speed?

For each eviction-policy variant (the default advisor first, as the
baseline measured in the same run) this builds three real programs -- lz4
(HC level 9), brotli (quality 7) and zstd (level 9) compressing and
decompressing 1 MiB, driven by benchmarks/regalloc_speed/codec_bench.c --
from the same -O2 bitcode, code generation in process with the variant
deciding evictions, and measures:
  (a) the programs' RegAllocScore (the sum over their functions),
  (b) run time (rounds interleaved across variants, mean and 95% CI) and
      instructions executed under valgrind (cachegrind, no cache model).
Every build must print the default build's checksum (a miscompile check).
Then Spearman's rho between (a) and (b) across variants, per program.

    python3 benchmarks/bench_regalloc_speed.py --policies DIR --out /tmp/brs [--runs 10]
    python3 benchmarks/bench_regalloc_speed.py --out /tmp/brs --quick   # lz4 on 256 KiB, one random policy

``--policies``: a directory of policies (.tflite, .so or EvictionPolicy .npz),
each one variant (names sorted). Prints a JSON summary (also out/speed.json).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

import mlopt
from mlopt.corpus.fetch import PACKAGES, cache_dir, package_sources, sdist_source

HERE = Path(__file__).resolve().parent
PROGRAMS = {"lz4": ("lz4", "CODEC_LZ4", ["lz4.c", "lz4hc.c"]), "brotli": ("brotli", "CODEC_BROTLI", None),
            "zstd": ("zstandard", "CODEC_ZSTD", None)}
ROUNDS = {"lz4": 3, "brotli": 1, "zstd": 3}


def bitcode(out: Path, clang: str) -> dict[str, list[Path]]:
    """-O2 bitcode of each program's sources and of its driver."""
    progs = {}
    for prog, (pkg_name, define, only) in PROGRAMS.items():
        pkg = next(p for p in PACKAGES if p.name == pkg_name)
        top = sdist_source(pkg, cache_dir())
        sources = [s for s in package_sources(pkg, top) if only is None or s.name in only]
        includes = [f"-I{top / i}" for i in pkg.include]
        d = out / "bc" / prog
        d.mkdir(parents=True, exist_ok=True)
        mods = []
        for i, src in enumerate([*sources, HERE / "regalloc_speed" / "codec_bench.c"]):
            bc = d / f"{i:03d}_{src.stem}.bc"
            if not bc.exists():
                subprocess.run([clang, "-O2", *includes, *pkg.flags, f"-D{define}", "-emit-llvm", "-c", str(src),
                                "-o", str(bc)], check=True)
            mods.append(bc)
        progs[prog] = mods
    return progs


def spearman(a, b) -> float:
    def ranks(x):
        x = np.asarray(x, float)
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x))
        for v in np.unique(x):  # ties: average rank
            r[x == v] = r[x == v].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    return float(np.corrcoef(ra, rb)[0, 1]) if ra.std() > 0 and rb.std() > 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policies", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per program and variant")
    ap.add_argument("--clang", default="clang-19")
    ap.add_argument("--no-valgrind", action="store_true")
    ap.add_argument("--quick", action="store_true", help="lz4 alone on 256 KiB, one random eviction policy "
                    "(mlopt policy export --problem regalloc --random), 2 runs")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    size = []  # codec_bench's second argument, KiB of input (default 1024)
    if args.quick:
        from mlopt.cli import main as mlopt_main

        args.policies, args.runs, size = out / "policies", 2, ["256"]
        mlopt_main(["policy", "export", "--problem", "regalloc", "--random", "--seed", "1",
                    "-o", str(args.policies / "seed1"), "--force"])
        for prog in ("brotli", "zstd"):
            PROGRAMS.pop(prog)
    elif args.policies is None:
        ap.error("give --policies DIR, or --quick")
    progs = bitcode(out, args.clang)
    modules = {p: [mlopt.Module(bc, reloc_model="pic", llvm=19) for bc in bcs] for p, bcs in progs.items()}
    variants: list[tuple[str, object]] = [("default", None)]
    for path in sorted(args.policies.iterdir()):
        if path.suffix == ".npz":
            from mlopt.problems import load_weights

            variants.append((path.stem, load_weights(path)))
        elif path.suffix in (".tflite", ".so") or path.is_dir():
            variants.append((path.stem, mlopt.load_policy(path, "regalloc")))
    rows = {}
    for name, policy in variants:
        row = {}
        for prog, mods in modules.items():
            t = time.perf_counter()
            rs = mlopt.allocate_many(mods, policy, pipeline="", log=False, keep_object=True, threads=2)
            objs = []
            for m, r in zip(progs[prog], rs):
                obj = out / "obj" / name / prog / (m.stem + ".o")
                obj.parent.mkdir(parents=True, exist_ok=True)
                obj.write_bytes(r.object)
                objs.append(str(obj))
            exe = out / "bin" / name / prog
            exe.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([args.clang, *objs, "-o", str(exe), "-lm"], check=True)
            row[prog] = {"score": sum(r.score for r in rs), "text": sum(r.text_size for r in rs),
                         "replaced": sum(r.replaced for r in rs), "exe": str(exe),
                         "build_s": time.perf_counter() - t}
        rows[name] = row
        print(f"built {name}: " + ", ".join(f"{p} score {v['score']:.4g}" for p, v in row.items()), flush=True)
    # Correctness: every build prints the default build's checksum.
    for prog in modules:
        want = subprocess.run([rows["default"][prog]["exe"], "1", *size], capture_output=True, text=True,
                              check=True).stdout
        for name in rows:
            got = subprocess.run([rows[name][prog]["exe"], "1", *size], capture_output=True, text=True)
            rows[name][prog]["correct"] = got.returncode == 0 and got.stdout == want
    # Time: rounds interleaved across variants, so drift hits all alike.
    for _ in range(args.runs):
        for prog in modules:
            for name in rows:
                t = time.perf_counter()
                subprocess.run([rows[name][prog]["exe"], str(ROUNDS[prog]), *size], capture_output=True, check=True)
                rows[name][prog].setdefault("times", []).append(time.perf_counter() - t)
    if not args.no_valgrind:
        for prog in modules:
            for name in rows:
                r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                                    "--cachegrind-out-file=/dev/null", rows[name][prog]["exe"], "1", *size],
                                   capture_output=True, text=True, check=True)
                m = re.search(r"I\s+refs:\s+([\d,]+)", r.stderr)
                rows[name][prog]["instructions"] = int(m.group(1).replace(",", "")) if m else None
    summary = {"variants": list(rows), "programs": {}}
    for prog in modules:
        base = rows["default"][prog]
        per = []
        for name, row in rows.items():
            r = row[prog]
            ts = r["times"]
            mean = statistics.fmean(ts)
            ci = 1.96 * statistics.stdev(ts) / len(ts) ** 0.5 if len(ts) > 1 else float("nan")
            bmean = statistics.fmean(base["times"])
            per.append({
                "variant": name, "correct": r["correct"],
                "score_change_percent": 100 * (r["score"] - base["score"]) / base["score"],
                "text_change_percent": 100 * (r["text"] - base["text"]) / base["text"],
                "time_s": mean, "time_ci95_s": ci, "time_change_percent": 100 * (mean - bmean) / bmean,
                "instructions": r.get("instructions"),
                "instructions_change_percent": (100 * (r["instructions"] - base["instructions"]) / base["instructions"]
                                                if r.get("instructions") and base.get("instructions") else None),
            })
        others = [p for p in per if p["variant"] != "default"]
        score = [p["score_change_percent"] for p in per]
        summary["programs"][prog] = {
            "variants": per,
            "spearman_score_vs_time": spearman(score, [p["time_change_percent"] for p in per]),
            "spearman_score_vs_instructions": (spearman(score, [p["instructions_change_percent"] for p in per])
                                               if all(p["instructions_change_percent"] is not None for p in per)
                                               else None),
            "all_correct": all(p["correct"] for p in per),
            "variants_faster_beyond_ci": sum(
                1 for p in others if p["time_change_percent"] < 0
                and (p["time_s"] + p["time_ci95_s"]) < statistics.fmean(rows["default"][prog]["times"])),
        }
    (out / "speed.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({p: {k: v for k, v in s.items() if k != "variants"} for p, s in summary["programs"].items()},
                     indent=2))
    for prog, s in summary["programs"].items():
        for v in s["variants"]:
            instr = v["instructions_change_percent"]
            instr_text = "-" if instr is None else f"{instr:+.3f}%"
            print(f"{prog:7s} {v['variant']:14s} score {v['score_change_percent']:+7.3f}%  time "
                  f"{v['time_change_percent']:+6.2f}% (±{100 * v['time_ci95_s'] / v['time_s']:.2f}%)  instr "
                  f"{instr_text}  {'ok' if v['correct'] else 'WRONG OUTPUT'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

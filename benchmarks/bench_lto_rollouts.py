"""Evaluations per second under full LTO: the trainers' rollouts (problem
``inlining-lto``: the merged module compiled in process, machine code reused
per unchanged function and the policy-independent prefix, then a link with
``--gc-sections --icf=all``) against the naive loop, the build's own lld
link redone with the plugin running each policy; same binaries, same
policies, the same two workers, measured in one run.

The code base is brotli 1.1.0 (its library and command-line tool, from the
PyPI sdist, as ``bench_tune_versions.py`` builds them); the policies are what
an ES iteration evaluates: a BC policy of the binaries' own trace and
``--policies`` Gaussian perturbations of its weights (sigma ``--sigma``
relative to each layer's scale). Every rollout's cost must equal the
``.text`` of the binary the naive link wrote with the same policy.

    python3 benchmarks/bench_lto_rollouts.py --out /tmp/lr --record [--policies 8] [--sigma 0.02]
    python3 benchmarks/bench_lto_rollouts.py --quick --out /tmp/lr     # lz4's library, 2 policies
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import write_report  # noqa: E402
from bench_tune_versions import GC_ICF, LIBRARY, PAIRS, build, text_of  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policies", type=int, default=8)
    ap.add_argument("--sigma", type=float, default=0.02)
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record", action="store_true", help="write benchmarks/results/lto-rollouts-llvm<N>.json")
    ap.add_argument("--quick", action="store_true", help="lz4's library, 2 policies")
    args = ap.parse_args()
    os.environ["MLOPT_LLVM"] = str(args.llvm)
    pair = "lz4" if args.quick else "brotli"
    if args.quick:
        args.policies = 2
    from mlopt._native import engine
    from mlopt.compiler.plugin import clang_flags
    from mlopt.corpus import corpus_entries
    from mlopt.corpus.lto import extract_lto_corpus
    from mlopt.problems import get, load_weights
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.rollouts import trace_corpus
    from mlopt.training import train_bc
    from mlopt.training.es import flatten, layer_scale, unflatten
    from mlopt.training.validation import costs_of
    from mlopt.workers import make_pool

    _, _, version, *_ = PAIRS[pair]
    where = args.out / f"{pair}-{version}"
    save = clang_flags(lto="full", llvm=args.llvm, save_lto_modules=where / "modules")
    binaries = build(pair, version, where / "build", args.llvm, save)
    extract_lto_corpus(where / "modules", where / "corpus", force=True)
    entries = corpus_entries(where / "corpus")
    binary_of = {e.name: Path(e.name).name.removesuffix(".lto") for e in entries}
    ds = trace_corpus(where / "corpus", callee_linkage=True, quiet=True)
    bc = with_linkage_input(with_default_prior(train_bc(ds, get("inlining"), epochs=5).policy, 1e-3))
    bc.save(args.out / "bc.npz", overwrite=True)
    start = load_weights(args.out / "bc.npz", "inlining-lto")
    theta, scale = flatten(start), layer_scale(start)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(args.policies):
        p = unflatten(start, theta + args.sigma * scale * rng.standard_normal(theta.size))
        paths.append(p.export(args.out / "policies" / str(i), overwrite=True))

    # naive: each policy's link of the build's objects by lld with the plugin (objects are bitcode: lld runs LTO)
    project, _, _, patterns, includes, tools = PAIRS[pair]
    obj = where / "build" / "obj"

    def naive(i: int) -> dict[str, int]:
        out = args.out / "naive" / str(i)
        out.mkdir(parents=True, exist_ok=True)
        flags = clang_flags(lto="full", llvm=args.llvm, model=str(paths[i]))
        lib = sorted(str(o) for o in obj.glob("*.o") if not any(o.name.startswith(t.replace("/", "_"))
                                                                  for ts in tools.values() for t in ts))
        cc = [f"clang-{args.llvm}", "-Oz", "-fPIC", *flags]
        subprocess.run([*cc, "-shared", *lib, GC_ICF, "-o", LIBRARY[pair]], check=True, capture_output=True, cwd=out)
        built = {LIBRARY[pair]: out / LIBRARY[pair]}
        for tool, own in tools.items():
            subprocess.run([*cc, *(str(obj / (t.replace("/", "_") + ".o")) for t in own), *lib, GC_ICF, "-lm",
                            "-o", tool], check=True, capture_output=True, cwd=out)
            built[tool] = out / tool
        return text_of(built)

    t = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        naive_sizes = list(pool.map(naive, range(args.policies)))
    naive_s = time.perf_counter() - t
    with make_pool(args.workers) as pool:
        costs_of([(None, e) for e in entries], "inlining-lto", pool=pool)  # the workers' first compile of each
        t = time.perf_counter()
        costs = costs_of([(str(p), e) for p in paths for e in entries], "inlining-lto", pool=pool)
        ours_s = time.perf_counter() - t
    n = args.policies * len(entries)
    mismatch = [(i, e.name) for k, (i, e) in enumerate((i, e) for i in range(args.policies) for e in entries)
                if costs[k] != naive_sizes[i][binary_of[e.name]]]
    print(f"{pair} {version} under full LTO + gc-sections + ICF, LLVM {engine(args.llvm).llvm_version}: "
          f"{len(entries)} binaries x {args.policies} policies, {args.workers} workers; stock .text "
          f"{sum(text_of(binaries).values()):,} bytes")
    print("| loop | evaluations | seconds | evaluations/s | ratio |")
    print("|---|---|---|---|---|")
    print(f"| naive: lld's LTO link with the plugin | {n} | {naive_s:.1f} | {n / naive_s:.2f} | 1.00 |")
    print(f"| mlopt rollouts (inlining-lto, cached) | {n} | {ours_s:.1f} | {n / ours_s:.2f} | "
          f"{naive_s / ours_s:.2f} |")
    print(f"rollout costs equal to the naive links' .text: {n - len(mismatch)} of {n}")
    version_text = engine(args.llvm).llvm_version
    report = {"benchmark": "benchmarks/bench_lto_rollouts.py", "llvm": args.llvm, "llvm_version": version_text,
              "command": "python3 benchmarks/bench_lto_rollouts.py " + " ".join(sys.argv[1:]),
              "problem": "inlining-lto: the trainers' rollouts (no training)",
              "corpus": f"{pair} {version} (PyPI sdist): {len(entries)} binaries", "workers": args.workers,
              "baseline": "the naive loop: the build's lld LTO link redone with the plugin running each policy",
              "metric": "evaluations (one binary, one policy) per second, both loops on the same workers",
              "policies": args.policies, "evaluations": n, "naive_seconds": naive_s, "rollout_seconds": ours_s,
              "equal": n - len(mismatch)}
    write_report(report, args.out / "rollouts.json", f"lto-rollouts-llvm{args.llvm}.json" if args.record else None)
    return 0 if not mismatch else 1


if __name__ == "__main__":
    sys.exit(main())

"""Module evaluations per second: mlopt's rollouts (workers compiling in
process, with the codegen cache) against the naive pipeline, same corpus,
same policies, same parallelism, measured in one run.

The work is what evolution strategies does: a random 64x64 policy and
``--perturbations`` antithetic-free Gaussian perturbations of its weights
(sigma ``--sigma`` relative to each weight matrix's scale), each evaluated
on every module of the default corpus (``mlopt corpus fetch``: C and C++).

  naive:      per module, opt-19 -load-pass-plugin=mlopt -mlopt-inline-model=policy.so
              -relocation-model=pic -passes=default<Oz> m.bc | llc-19 -relocation-model=pic
              -filetype=obj, .text read from the object (``--workers`` in parallel)
  clang -cc1: per module, stock clang-19 -cc1 from the module's .cmd with the plugin and the
              policy (what ml-compiler-opt runs per module; the same work as in-process, so
              its sizes must equal in-process sizes exactly)
  in-process: mlopt.rollouts.run_rollouts on a LocalPool (1 and --workers processes),
              without and with the TextSizeCache, each level adding to the one before:
              decision cache (repeated decisions skip code generation), per-function
              codegen (only functions whose optimized IR is new are generated), the inliner
              prefix (a module's compiles after its first start at the inliner from the module
              the passes before it left), trajectory
              replay (a policy that reproduces a stored trajectory of the module on its
              logged features is not compiled at all; the default)

Every configuration's sizes are checked against the uncached in-process run.
Prints wall seconds, CPU seconds of all processes doing the work (the
compilers, or the pool's workers: rusage of the reaped children, so other
load on the machine changes them little), evaluations/s, the ratio to the
naive pipeline's and to stock clang's CPU seconds ("per core"), the share of worker time spent
inside the engine (LLVM + policy), and the cache hit rate.

    python3 benchmarks/bench_rollouts.py [--perturbations 3] [--sigma 0.05] [--start random|prior] [--limit N]
    python3 benchmarks/bench_rollouts.py --quick
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

os.environ.setdefault("MLOPT_LLVM", "19")  # it times clang-19 -cc1 + the plugin against mlopt on LLVM 19
import mlopt  # noqa: E402
from _common import QUICK_HELP, quick_corpus  # noqa: E402
from mlopt.compiler.plugin import plugin_path  # noqa: E402
from mlopt.corpus import corpus_entries, fetch_corpus  # noqa: E402
from mlopt.evaluation import text_size
from mlopt.problems import inlining
from mlopt.rollouts import RolloutTask, run_rollouts, trace_corpus
from mlopt.workers import LocalPool


def policies(corpus: Path, work: Path, count: int, sigma: float, start: str = "random") -> list[Path]:
    """The base policy and ``count`` perturbations of it, as ES makes them
    (every weight plus sigma x its layer's mean |w| x a normal draw), as
    compiled .so files. ``start``: "random" (a random 64x64 MLP over a
    vocab of the corpus' features) or "prior" (BC of the heuristic on the
    corpus' trace with the heuristic as a prior, margin 20: where ES starts
    on the Debian corpus, benchmarks/README.md)."""
    from mlopt.training.es import flatten, layer_scale, unflatten

    ds = trace_corpus(corpus, quiet=True)
    if start == "prior":
        from mlopt.problems.inlining_default.prior import with_default_prior
        from mlopt.training.bc import train_bc

        base = with_default_prior(train_bc(ds, inlining.PROBLEM, epochs=5, seed=0).policy, 20.0)
    else:
        vocab = mlopt.Vocab({f: np.quantile(ds.columns[f].reshape(-1).astype(float), np.linspace(0, 1, 100))
                             for f in inlining.FEATURES})
        base = mlopt.InlinePolicy.random(vocab, hidden=(64, 64), seed=2)
    theta, scale = flatten(base), layer_scale(base)
    rng = np.random.default_rng(0)
    out = []
    for k in range(count + 1):
        p = base if k == 0 else unflatten(base, theta + sigma * scale * rng.standard_normal(theta.size))
        p.export(work / f"p{k}")
        out.append(mlopt.compile_policy(work / f"p{k}", work / f"p{k}.so"))
    return out


def naive(entries, policy: Path, work: Path, workers: int) -> list[int]:
    plugin = str(plugin_path())

    def one(i: int) -> int:
        e = entries[i]
        opt_out, obj = work / f"n{i}.bc", work / f"n{i}.o"
        subprocess.run(["opt-19", f"-load-pass-plugin={plugin}", f"-mlopt-inline-model={policy}",
                        "-relocation-model=pic", "-passes=default<Oz>", str(e.bitcode_path), "-o", str(opt_out)],
                       check=True)
        subprocess.run(["llc-19", "-filetype=obj", "-relocation-model=pic", str(opt_out), "-o", str(obj)], check=True)
        return text_size(obj)

    sizes = [e.size for e in entries]
    order = sorted(range(len(entries)), key=lambda i: -sizes[i])
    out = [0] * len(entries)
    with ThreadPoolExecutor(workers) as ex:
        for i, s in zip(order, ex.map(one, order)):
            out[i] = s
    return out


def children_cpu() -> float:
    """User + system CPU seconds of this process's reaped children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def clang_cc1(entries, policy: Path, work: Path, workers: int) -> list[int]:
    from mlopt.evaluation import clang_text_sizes

    return clang_text_sizes(entries, str(policy), threads=workers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perturbations", type=int, default=3)
    ap.add_argument("--sigma", type=float, default=0.02)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--start", choices=("random", "prior"), default="random",
                    help="the policy perturbed: a random MLP, or BC with the heuristic as a prior (ES's start)")
    ap.add_argument("--skip-one-worker", action="store_true", help="leave out the 1-worker uncached run")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": lz4's smallest module, 1 perturbation")
    args = ap.parse_args()
    if args.quick:
        args.perturbations, args.skip_one_worker = 1, True

    corpus = quick_corpus() if args.quick else fetch_corpus().output
    work = Path(tempfile.mkdtemp(prefix="mlopt-bench-rollouts-"))
    # The naive pipeline compiles with opt's default<Oz> (no SLP): compare like with like.
    entries = corpus_entries(corpus)[: args.limit]
    if args.quick:
        entries = sorted(entries, key=lambda e: e.size)[:1]  # the smallest module
    print(f"corpus: {len(entries)} modules ({sum(e.size for e in entries) / 1e6:.1f} MB bitcode); "
          f"{args.perturbations + 1} policies ({args.start} start, sigma {args.sigma})", file=sys.stderr)
    pols = policies(corpus, work, args.perturbations, args.sigma, args.start)
    evals = len(entries) * len(pols)

    rows = []
    start, cpu = time.perf_counter(), children_cpu()
    naive_sizes = [naive(entries, p, work, args.workers) for p in pols]
    t_naive, cpu_naive = time.perf_counter() - start, children_cpu() - cpu
    rows.append(("naive opt+llc", args.workers, t_naive, cpu_naive, None, None))
    start, cpu = time.perf_counter(), children_cpu()
    cc1_sizes = [clang_cc1(entries, p, work, args.workers) for p in pols]
    t_cc1, cpu_cc1 = time.perf_counter() - start, children_cpu() - cpu
    rows.append(("clang -cc1 + plugin", args.workers, t_cc1, cpu_cc1, None, None))

    reference = None
    configs = [(1, False), (args.workers, False), (args.workers, "module"), (args.workers, "functions"),
               (args.workers, "prefix"), (args.workers, True)]
    for workers, cache in configs[1:] if args.skip_one_worker else configs:
        cpu = children_cpu()
        with LocalPool(workers) as pool:
            run_rollouts([RolloutTask(entries[0], str(pols[0]), cache=False)], pool=pool, quiet=True)  # warm up
            start = time.perf_counter()
            llvm = task = 0.0
            hits = 0
            sizes = []
            for p in pols:
                results = run_rollouts([RolloutTask(e, str(p), cache=cache) for e in entries], pool=pool, quiet=True)
                assert all(r.ok for r in results), [r.describe() for r in results if not r.ok]
                sizes.append([r.value.text_size for r in results])
                llvm += sum(r.value.llvm_seconds for r in results)
                task += sum(r.seconds for r in results)
                hits += sum(r.value.cache_hit for r in results)
            elapsed = time.perf_counter() - start
        cpu = children_cpu() - cpu  # the pool's workers, reaped when it closed
        if reference is None:
            reference = sizes
        wrong = [(k, entries[i].name, a, b) for k, (pa, pb) in enumerate(zip(sizes, reference))
                 for i, (a, b) in enumerate(zip(pa, pb)) if a != b]
        assert not wrong, f"cache {cache!r}: sizes differ from uncached ones (policy, module, cached, uncached): " \
                          f"{wrong}"
        name = {False: "in-process", "module": "+decision cache", "functions": "+per-function codegen",
                "prefix": "+inliner prefix", True: "+trajectory replay"}[cache]
        rows.append((name, workers, elapsed, cpu, llvm / task, hits / evals))

    assert cc1_sizes == reference, "stock clang -cc1 + plugin sizes differ from in-process sizes"
    # opt's default<Oz> and the corpus' clang pipeline differ (SLP): sizes differ by design; report it.
    same = sum(a == b for pa, pb in zip(naive_sizes, reference) for a, b in zip(pa, pb))
    print(f"\n{evals} module evaluations per configuration; naive sizes equal in-process on {same}/{evals} "
          "(in-process compiles as each module's .cmd says, the naive pipeline as opt's default<Oz>)")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"{'configuration':<28}{'workers':>8}{'wall s':>8}{'CPU s':>8}{'evals/s':>9}{'vs naive (CPU)':>15}"
          f"{'vs clang (CPU)':>15}{'in engine':>10}{'cache hits':>11}")
    for name, w, t, c, share, hit in rows:
        print(f"{name:<28}{w:>8}{t:>8.1f}{c:>8.1f}{evals / t:>9.1f}{cpu_naive / c:>15.2f}{cpu_cc1 / c:>15.2f}"
              f"{'' if share is None else f'{100 * share:.1f}%':>10}{'' if hit is None else f'{100 * hit:.0f}%':>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

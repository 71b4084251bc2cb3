"""What resuming a candidate's compile at its first changed decision could save in ES: a measurement.

    python3 benchmarks/bench_first_difference.py splits149/train train-trace.npz plain60-s0/es \
        --iterations 40,80 --pairs 16

An ES candidate differs from the iterate it perturbs (the center) in a few
of a module's inlining decisions. Its compile is the center's, step for
step, up to the first decision it answers differently: LLVM is
deterministic, so the module, the features and every earlier answer are
the same. A worker that kept the center's compile alive at that point
(fork(), say) could continue from there with the candidate's policy
instead of parsing the module at the inliner's start and walking the call
graph again. How much of a candidate's compile lies before its first
changed decision?

For each of ``--iterations`` (even: a run keeps a snapshot of every
validated iterate), the 48 modules the run's sampler drew next, in one
process with a rollout worker's cache (trajectory replay, inliner prefix,
per-function code reuse):

1. the snapshot compiles them (as the earlier iterations left a worker's
   cache: the center's trajectories known);
2. the snapshot compiles them again, deciding through a Python callable
   that stamps the time of every call site it is asked about (its own time
   is taken out): the center's LLVM seconds before decision k, for every k
   (codegen is skipped: the decisions are cached);
3. ``--pairs`` antithetic perturbations (sigma as the run calibrated it,
   relative to each layer's mean |W|) compile them as ES does. For every
   compile that runs LLVM (not replayed): its wall seconds T, its first
   decision that differs from the center's, d, and the center's seconds
   before d, L.

Prints, over the compiles that ran LLVM: the share sum(L) / sum(T) (the
gross bound), and the net bound per module: sum(L) less the center's walk
to the last such d (the one compile a worker would run to fork from),
counted only where it is positive (a worker would fork only there), over
sum(T). The split of T into the optimizer and code generation (and how
many functions' machine code was reused) comes from the cache's
simplification probe, enabled for step 3 only; its key time is taken out
of T. fork()'s own cost is measured apart (a process holding this cache
forks and reaps a child that exits at once); the copy-on-write faults of a
child that goes on compiling are not measured. One JSON object last.
LLVM major: ``MLOPT_LLVM`` (default 19)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_simplification_share import _write, run_arguments, run_corpus, run_draws
from mlopt.compiler import TextSizeCache
from mlopt.compiler.compile import compile as compile_module
from mlopt.training.es import flatten, layer_scale, trained_mask, unflatten


class _StampedPolicy:
    """The center's weights deciding through the compiler's callable path, stamping each call's start."""

    def __init__(self, policy):
        self.policy = policy
        self.stamps: list[float] = []  # LLVM seconds before each decision (callback time removed)
        self.start = 0.0
        self.inside = 0.0
        decide = policy.decide

        def stamped(row):
            t0 = time.perf_counter()
            self.stamps.append(t0 - self.start - self.inside)
            answer = decide(row)
            self.inside += time.perf_counter() - t0
            return answer

        policy.decide = stamped  # the instance's own: compile() calls policy.decide per call site

    def compile(self, module, cache) -> tuple[np.ndarray, np.ndarray, float]:
        self.stamps, self.inside = [], 0.0
        self.start = time.perf_counter()
        r = compile_module(module, self.policy, log=True, cache=cache)
        total = time.perf_counter() - self.start - self.inside
        if len(self.stamps) != len(r.decisions):
            raise SystemExit(f"{module.name}: {len(self.stamps)} calls for {len(r.decisions)} decisions")
        return np.asarray(r.decisions), np.array(self.stamps), total


def _fork_seconds(repeat: int = 20) -> float:
    """Median seconds of fork() + the child's _exit + waitpid, in this process as it is now."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _measure(chosen: list, base, sigma: float, pairs: int, rng, d: Path, label: str) -> dict:
    theta, scale = flatten(base), layer_scale(base)
    mask = trained_mask(base)
    cache = TextSizeCache(llvm=chosen[0].llvm)  # as the rollout workers keep theirs: replay, prefix, functions
    loaded_center = _write(base, d, f"{label}-center")
    for module in chosen:
        compile_module(module, loaded_center, log=True, cache=cache)
    stamped = _StampedPolicy(_separate_copy(base))
    center = {}
    for module in chosen:
        decisions, stamps, total = stamped.compile(module, cache)
        center[module.name] = (decisions, stamps, total)
    candidates = []
    for p in range(pairs):
        eps = np.zeros(theta.size, np.float32)
        eps[mask] = rng.standard_normal(int(mask.sum())).astype(np.float32)
        for sign in (1, -1):
            candidates.append(_write(unflatten(base, theta + sign * sigma * scale * eps), d, f"{label}-p{p}{sign}"))
    cells = []  # (module, T, d, L, decisions)
    replayed = 0
    cache.enable_simplification_probe()  # its optimizer / code generation seconds; its key time is taken out
    split = dict.fromkeys(("optimizer_seconds", "codegen_seconds", "key_seconds", "functions_reused",
                           "functions_compiled", "redone"), 0.0)
    for policy in candidates:
        for module in chosen:
            before = cache.replays
            probe = dict(cache.simplification_probe)
            reused, compiled = cache.functions_reused, cache.functions_compiled
            redone = cache._cache.compiles_redone  # compiles run twice: a stub lost its size
            t0 = time.perf_counter()
            r = compile_module(module, policy, log=True, cache=cache)
            seconds = time.perf_counter() - t0
            if cache.replays > before:
                replayed += 1
                continue
            after = cache.simplification_probe
            for k in ("optimizer_seconds", "codegen_seconds", "key_seconds"):
                split[k] += after[k] - probe[k]
            split["functions_reused"] += cache.functions_reused - reused
            split["functions_compiled"] += cache.functions_compiled - compiled
            split["redone"] += cache._cache.compiles_redone - redone
            seconds -= after["key_seconds"] - probe["key_seconds"]
            decisions, stamps, _ = center[module.name]
            got = np.asarray(r.decisions)
            n = min(len(got), len(decisions))
            differ = np.flatnonzero(got[:n] != decisions[:n])
            first = int(differ[0]) if len(differ) else n  # none differs: a longer or shorter tail
            before_first = float(stamps[first]) if first < len(stamps) else center[module.name][2]
            cells.append((module.name, seconds, first, before_first, len(decisions)))
    fork = _fork_seconds()
    total_t = sum(c[1] for c in cells)
    gross = sum(c[3] for c in cells)
    net = 0.0
    for name in {c[0] for c in cells}:
        mine = [c for c in cells if c[0] == name]
        saved = sum(c[3] for c in mine) - max(c[3] for c in mine) - fork * len(mine)
        net += max(0.0, saved)
    firsts = np.array([c[2] / max(c[4], 1) for c in cells]) if cells else np.zeros(1)
    row = {"set": label, "rollouts": len(candidates) * len(chosen), "replayed": replayed, "ran_llvm": len(cells),
           "seconds": round(total_t, 2), "before_first_seconds": round(gross, 2),
           "gross_share": gross / total_t if total_t else 0.0, "net_share": net / total_t if total_t else 0.0,
           "fork_ms": round(1000 * fork, 3),
           "first_position_median": float(np.median(firsts)),
           "center_seconds": round(sum(v[2] for v in center.values()), 2),
           "center_seconds_of_compiled": round(sum(center[c[0]][2] for c in cells), 2),
           "optimizer_seconds": round(split["optimizer_seconds"] - split["key_seconds"], 2),
           "codegen_seconds": round(split["codegen_seconds"], 2),
           "functions_reused": int(split["functions_reused"]), "functions_compiled": int(split["functions_compiled"]),
           "compiles_redone": int(split["redone"])}
    print(f"{label}: {row['ran_llvm']} of {row['rollouts']} rollouts ran LLVM, {total_t:.1f} s; "
          f"{row['gross_share']:.1%} of it before their first changed decision "
          f"(median position {row['first_position_median']:.0%} of the center's decisions); net of the "
          f"center's walk and fork ({row['fork_ms']} ms each): {row['net_share']:.1%}; optimizer "
          f"{row['optimizer_seconds']} s, code generation {row['codegen_seconds']} s ({row['functions_compiled']} "
          f"functions generated, {row['functions_reused']} reused; {row['compiles_redone']} compiles redone "
          "without stubs)", flush=True)
    return row


def _separate_copy(policy):
    """A separate instance of the same weights (its decide is replaced; the base stays as it is)."""
    return unflatten(policy, flatten(policy))


def main() -> None:
    ap = run_arguments(__doc__, "40,80")
    ap.add_argument("--pairs", type=int, default=16, help="antithetic pairs (ES's default 16)")
    ap.add_argument("--modules", type=int, default=0, help="only the first N of each draw (a quick look)")
    ap.add_argument("--sigma", type=float, default=None, help="relative sigma (default: the run's)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    llvm = int(os.environ.get("MLOPT_LLVM", "19"))
    cfg, _, _ = run_corpus(args)
    sigma = args.sigma if args.sigma is not None else cfg["sigma"]
    rng = np.random.default_rng(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for label, base, chosen in run_draws(args):
            chosen = chosen[: args.modules] if args.modules else chosen
            rows.append(_measure([e.load(llvm) for e in chosen], base, sigma, args.pairs, rng, Path(d), label))
    total = sum(r["seconds"] for r in rows)
    gross = sum(r["gross_share"] * r["seconds"] for r in rows) / total if total else 0.0
    net = sum(r["net_share"] * r["seconds"] for r in rows) / total if total else 0.0
    print(f"all: {gross:.1%} of the LLVM time of compiles that ran lies before their first changed decision; "
          f"net of the center's walk and fork: {net:.1%}")
    print(json.dumps({"llvm": llvm, "run": str(args.run), "sigma": sigma, "sets": rows,
                      "gross_share": gross, "net_share": net}, indent=1))


if __name__ == "__main__":
    main()

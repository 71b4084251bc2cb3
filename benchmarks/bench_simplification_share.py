"""What memoizing function simplification could save in ES: a measurement.

    python3 benchmarks/bench_simplification_share.py splits149/train trace149-train.npz esmr149p-s0/es \
        --iterations 40,60,80 --rounds 2

docs/notes/simplification-memo.md asks, before anything is built: what
share of an ES compile is the function simplification pipeline that the
inliner's walk runs per function, and what share of that time runs on a
function whose memo key an earlier compile of the same module already saw
(SimplificationProbe.h; measuring only, nothing LLVM does changes)?

Here, as an ES run compiles them: for each of ``--iterations`` (even: the
run keeps a snapshot of every validated iterate), the 48 modules the run's
sampler drew for the next iteration, compiled by the snapshot (as the
earlier iterations left the cache: the center's trajectories known), then
by ``--rounds`` rounds of ``--pairs`` antithetic perturbations of it (sigma
relative to each layer's mean |W|, as ``mlopt train es`` draws them), in
one process with the rollout workers' cache (trajectory replay, inliner
prefix, per-function code reuse). A compile that replay answers runs no
LLVM and costs nothing here either. A fresh cache per iteration: a real
run's cache also holds older iterates' compiles, so hits here are a lower
bound of a run's.

Prints per round: rollouts that ran LLVM, their wall seconds, the
simplification runs' share of that time, the hits' share of the runs'
time, and their product -- the most a memo could save, before its own
costs (the probe's key computation is timed apart and subtracted). The
note's threshold for building the restore: about 20%. One JSON object
last. LLVM major: ``MLOPT_LLVM`` (default 19). ``--largest N`` compiles the
N largest training modules instead of a run's draws."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from mlopt.compiler import TextSizeCache
from mlopt.compiler.compile import compile as compile_module
from mlopt.compiler.compile import load_policy
from mlopt.corpus import corpus_entries
from mlopt.problems import load_weights
from mlopt.rollouts.sampler import SizeStratifiedSampler
from mlopt.training.es import flatten, layer_scale, unflatten


def _delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def _shares(row: dict) -> dict:
    """Adds the simplification runs' share of ``seconds``, the hits' share of the runs, and their product."""
    row["simplification_share"] = row["run_seconds"] / row["seconds"] if row["seconds"] > 0 else 0.0
    row["hit_share"] = row["hit_seconds"] / row["run_seconds"] if row["run_seconds"] else 0.0
    row["bound"] = row["simplification_share"] * row["hit_share"]
    return row


def _write(policy, d: Path, name: str):
    """The policy as a rollout worker runs it: its .tflite, with its numpy twin for trajectory replay."""
    tfl = d / f"{name}.tflite"
    tfl.write_bytes(policy.to_tflite())
    loaded = load_policy(tfl)
    loaded.twin = policy
    return loaded


def _measure(chosen: list, base, args, llvm: int, rng, d: Path, label: str) -> list[dict]:
    """The base policy, then rounds of antithetic perturbations, on ``chosen``: one row per round."""
    theta, scale = flatten(base), layer_scale(base)
    cache = TextSizeCache(llvm=llvm)  # as the rollout workers keep theirs (tasks.py): replay, prefix, functions
    cache.enable_simplification_probe()
    batches = [[_write(base, d, f"{label}-base")]]
    for r in range(args.rounds):
        batch = []
        for p in range(args.pairs):
            eps = rng.standard_normal(theta.size).astype(np.float32)
            for sign in (1, -1):
                candidate = unflatten(base, theta + sign * args.sigma * scale * eps)
                batch.append(_write(candidate, d, f"{label}-r{r}p{p}{sign}"))
        batches.append(batch)
    rows = []
    for r, batch in enumerate(batches):
        before = dict(cache.simplification_probe)
        wall = 0.0
        for policy in batch:
            for module in chosen:
                compiles = cache.simplification_probe["compiles"]
                start = time.perf_counter()
                compile_module(module, policy, log=True, cache=cache)
                if cache.simplification_probe["compiles"] > compiles:  # LLVM ran (not replayed)
                    wall += time.perf_counter() - start
        got = _delta(dict(cache.simplification_probe), before)
        work = wall - got["key_seconds"]
        row = _shares({"set": label, "round": "base" if r == 0 else r, "rollouts": len(batch) * len(chosen),
                       "ran_llvm": int(got["compiles"]), **{k: round(v, 3) for k, v in got.items()},
                       "seconds": round(work, 2)})
        rows.append(row)
        print(f"{label} round {row['round']}: {row['ran_llvm']} of {row['rollouts']} rollouts ran LLVM, {work:.1f} s; "
              f"simplification {row['simplification_share']:.1%} of it, hits {row['hit_share']:.1%} of that "
              f"({int(got['hits'])} of {int(got['runs'])} runs): a memo saves at most {row['bound']:.1%}",
              flush=True)
    return rows


def run_arguments(doc: str, iterations: str) -> argparse.ArgumentParser:
    """The arguments of a bench that replays an ES run's draws: corpus, trace, run, --iterations."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, help="the training split (a corpus directory)")
    ap.add_argument("trace", type=Path, help="its heuristic trace (mlopt trace): -Oz .text per module")
    ap.add_argument("run", type=Path, help="an ES run directory (checkpoint.npz, validated/NNNN.npz)")
    ap.add_argument("--iterations", default=iterations, help="even iterations whose snapshot and next draw to use")
    return ap


def run_corpus(args) -> tuple[dict, list, dict]:
    """(the run's ES config, the training entries the trace sizes, their -Oz .text by name)."""
    z = np.load(args.trace, allow_pickle=True)
    size = {str(m): float(v) for m, v in zip(z["modules"], z["text_size"])}
    entries = [e for e in corpus_entries(args.corpus) if e.name in size]
    cfg = json.loads(bytes(np.load(args.run / "checkpoint.npz")["config"]).decode())
    return cfg, entries, size


def run_draws(args) -> list[tuple]:
    """(label, snapshot, entries) per ``--iterations`` k: the run's validated iterate k and the modules its
    sampler drew for iteration k + 1."""
    cfg, entries, size = run_corpus(args)
    sampler = SizeStratifiedSampler(np.array([size[e.name] for e in entries]), cfg.get("buckets", 4), cfg["seed"])
    sets = []
    for it in (int(x) for x in args.iterations.split(",")):
        drawn = sampler.sample(it, cfg["modules_per_perturbation"])  # iteration it + 1's draw
        sets.append((f"it{it}", load_weights(args.run / "validated" / f"{it:04d}.npz"), [entries[i] for i in drawn]))
    return sets


def main() -> None:
    ap = run_arguments(__doc__, "40,60,80")
    ap.add_argument("--largest", type=int, default=0, help="instead: the N largest modules, the run's last snapshot")
    ap.add_argument("--pairs", type=int, default=16, help="antithetic pairs per round (ES's default 16)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sigma", type=float, default=0.05, help="relative to each layer's mean |W| (ES's default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    llvm = int(os.environ.get("MLOPT_LLVM", "19"))

    rng = np.random.default_rng(args.seed)
    if args.largest:
        _, entries, size = run_corpus(args)
        snapshots = sorted((args.run / "validated").glob("*.npz"))
        chosen = sorted(entries, key=lambda e: -size[e.name])[: args.largest]
        sets = [(f"largest{args.largest}", load_weights(snapshots[-1]), chosen)]
    else:
        sets = run_draws(args)
    sets = [(label, base, [e.load(llvm) for e in chosen]) for label, base, chosen in sets]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for label, base, chosen in sets:
            rows += _measure(chosen, base, args, llvm, rng, Path(d), label)
    later = [r for r in rows if r["round"] != "base"]
    total = _shares({k: sum(r[k] for r in later)
                     for k in ("seconds", "run_seconds", "hit_seconds", "rollouts", "ran_llvm")})
    print(f"perturbation rounds: simplification {total['simplification_share']:.1%} of LLVM's time, hits "
          f"{total['hit_share']:.1%} of that: a memo saves at most {total['bound']:.1%}")
    print(json.dumps({"llvm": llvm, "run": str(args.run), "rounds": rows, "perturbation_rounds": total}, indent=1))


if __name__ == "__main__":
    main()

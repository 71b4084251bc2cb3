"""Train a regalloc eviction policy against LLVM's RegAllocScore and measure
it on held-out modules, against LLVM's default eviction advisor measured in
the same run:

    python3 benchmarks/bench_regalloc_es.py --out /tmp/bra [--iterations 20]
    python3 benchmarks/bench_regalloc_es.py --out /tmp/bra --quick   # the demo's reduced split, 1 iteration

Steps: the default corpus split (train / validation / held-out), the default
advisor's eviction logs on the training modules (behavioral-cloning data),
a vocab, BC of an EvictionPolicy to the default advisor's choices, ES with
reward 1 - (score + delta) / (default score + delta) per module, and the
held-out RegAllocScore and .text change of the BC and ES policies. Prints
one JSON summary; the run directory keeps metrics.jsonl and the policies.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import mlopt
from mlopt.policy import Vocab
from mlopt.problems import regalloc
from mlopt.training import ESConfig, ESTrainer
from mlopt.training.bc import clone_logs
from mlopt.training.demo import demo_splits
from mlopt.training.validation import costs_of
from mlopt.workers import make_pool


def totals(pool, policy_path, entries):
    """(RegAllocScore sum, .text sum, failures) over entries."""
    from mlopt.rollouts import RolloutTask, run_rollouts

    rs = run_rollouts([RolloutTask(e, policy_path, problem="regalloc") for e in entries], pool=pool, quiet=True)
    ok = [r.value for r in rs if r.ok]
    return sum(r.cost for r in ok), sum(r.text_size for r in ok), len(rs) - len(ok), {r.module: r.cost for r in ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--perturbations", type=int, default=8)
    ap.add_argument("--modules", type=int, default=12, help="modules per perturbation")
    ap.add_argument("--sigma", type=float, default=0.02)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--bc-epochs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--snapshot-every", type=int, default=5, metavar="N",
                    help="save the policy every N iterations to out/snapshots/ (variants for the speed study)")
    ap.add_argument("--quick", action="store_true", help="the demo's reduced split (train marisa-trie, validate "
                    "ujson, hold out lz4), 1 BC epoch, 1 ES iteration of 2 pairs on 2 modules")
    args = ap.parse_args()
    if args.quick:
        args.iterations, args.perturbations, args.modules, args.bc_epochs = 1, 2, 2, 1
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train, validation, heldout = demo_splits(out / "splits", small=args.quick)
    with make_pool(args.workers) as pool:
        # Behavioral-cloning data: the default advisor's decisions, logged.
        from mlopt.rollouts import RolloutTask, run_rollouts

        rs = run_rollouts([RolloutTask(e, None, log=True, problem="regalloc") for e in train], pool=pool, quiet=True)
        logs = [mlopt.read_log(r.value.log_bytes) for r in rs if r.ok and r.value.log_bytes]
        logs = [log for log in logs if len(log)]
        vocab = Vocab.from_logs(logs, num_buckets=100, features=regalloc.FEATURES)
        init = regalloc.EvictionPolicy.random(vocab, hidden=(32, 32), seed=args.seed)
        bc = clone_logs(init, logs, epochs=args.bc_epochs, seed=args.seed)
        bc.policy.save(out / "bc.npz", overwrite=True)
        entries = train + validation + heldout
        base = costs_of([(None, e) for e in entries], "regalloc", pool=pool)
        baseline = {e.name: c for e, c in zip(entries, base) if c is not None}
        run = out / "es"
        run.mkdir(exist_ok=True)
        cfg = ESConfig(iterations=args.iterations, perturbations=args.perturbations, sigma=args.sigma, lr=args.lr,
                       modules_per_perturbation=args.modules, seed=args.seed)
        trainer = ESTrainer(bc.policy, [e for e in train if e.name in baseline], baseline, run, cfg,
                            validation=[e for e in validation if e.name in baseline], pool=pool)
        trainer.resume()
        snapshots = out / "snapshots"
        snapshots.mkdir(exist_ok=True)
        bc.policy.save(snapshots / "iter_000.npz", overwrite=True)
        es_start = time.perf_counter()

        def done(m: dict) -> None:
            print(json.dumps(m), flush=True)
            if args.snapshot_every and m["iteration"] % args.snapshot_every == 0:
                trainer.current_policy().save(snapshots / f"iter_{m['iteration']:03d}.npz", overwrite=True)

        trainer.run(on_iteration=done)
        es_seconds = time.perf_counter() - es_start
        best = run / "best" / "policy.npz"
        es_policy = regalloc.EvictionPolicy.load(best) if best.exists() else trainer.current_policy()
        results = {}
        for name, policy in (("default", None), ("bc", bc.policy), ("es", es_policy)):
            path = None
            if policy is not None:
                path = str(out / f"{name}.tflite")
                Path(path).write_bytes(policy.to_tflite())
            score, text, failed, per = totals(pool, path, heldout)
            results[name] = {"score": score, "text": text, "failed": failed, "per_module": per}
    d = results["default"]
    summary = {"heldout_modules": len(heldout), "train_modules": len(train),
               "bc_agreement_heldout": bc.heldout_agreement, "seconds": round(time.perf_counter() - t0, 1),
               "es_seconds": round(es_seconds, 1), "es_iterations": trainer.iteration,
               "validation_start_percent": trainer.start_validation, "validation_best_percent": trainer.best}
    for name in ("bc", "es"):
        r = results[name]
        summary[f"{name}_score_change_percent"] = 100.0 * (r["score"] - d["score"]) / d["score"]
        summary[f"{name}_text_change_percent"] = 100.0 * (r["text"] - d["text"]) / d["text"]
        per = [(r["per_module"][m] - d["per_module"][m]) for m in d["per_module"] if m in r["per_module"]]
        summary[f"{name}_modules_better_worse"] = [int(np.sum(np.array(per) < 0)), int(np.sum(np.array(per) > 0))]
    (out / "summary.json").write_text(json.dumps({**summary, "results": results}, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The trainers side by side on the default corpus: evolution strategies and
trajectory search + imitation, both started from the same BC policy, each
given a wall-clock budget, each evaluated on the test split against
stock -Oz (the baseline, compiled in the same run), C and C++ apart.

For each trainer: wall time, compiles, compiles/s, the training-module
reward it optimized as a .text delta (ES: minus the mean reward of its last
iteration; search: total .text delta of the training modules' best
trajectories), the validation
delta of the policy it chose, and the test .text ratio policy / -Oz.
The BC policy itself is the first row.

    python3 benchmarks/bench_trainers.py [--es-iterations 40] [--search-evaluations 192] [--out DIR]
    python3 benchmarks/bench_trainers.py --quick

Each trainer writes its run directory under ``--out`` (default a temporary
directory), with metrics.jsonl; the table is also written as trainers.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from mlopt.evaluation import evaluate
from mlopt.problems import inlining
from mlopt.rollouts import trace_corpus
from mlopt.training import ESConfig, ESTrainer, train_bc
from mlopt.training.demo import demo_splits, language_totals
from mlopt.training.local_search import SearchConfig, search_and_imitate
from mlopt.training.run_dir import open_run
from mlopt.training.validation import total_delta_percent
from mlopt.workers import make_pool


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--es-iterations", type=int, default=40)
    ap.add_argument("--perturbations", type=int, default=8)
    ap.add_argument("--search-evaluations", type=int, default=192, help="compiles per training module")
    ap.add_argument("--small", action="store_true", help="the demo's reduced corpus")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--quick", action="store_true", help="--small, a 2-epoch BC, 1 ES iteration of 2 pairs on 4 "
                    "modules, 2 search compiles per module and one imitation")
    args = ap.parse_args()
    if args.quick:
        args.small, args.es_iterations, args.perturbations, args.search_evaluations = True, 1, 2, 2
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-trainers-"))
    out.mkdir(parents=True, exist_ok=True)
    train, validation, heldout = demo_splits(out / "splits", args.small)
    rows = []
    with make_pool(args.workers) as pool:
        ds = trace_corpus(out / "splits" / "train", pool=pool, quiet=True)
        baseline = {m: int(s) for m, s in zip(ds.modules, ds.text_size)}
        val_ds = trace_corpus(out / "splits" / "validation", pool=pool, quiet=True)  # its sizes only
        baseline.update({m: int(s) for m, s in zip(val_ds.modules, val_ds.text_size)})
        train = [e for e in train if e.name in baseline]
        validation = [e for e in validation if e.name in baseline]
        val = lambda p: total_delta_percent(p, validation, baseline, out / "work", pool=pool)  # noqa: E731

        def held_out(name: str, policy, seconds: float, evaluations: int, reward: float | None) -> None:
            run = open_run(out / name, force=True)
            files = run.save_policy(policy)
            ev = evaluate(files["policy_so"], out / "splits" / "test", pool=pool, quiet=True)
            totals = language_totals(ev.rows)
            rows.append({"trainer": name, "seconds": seconds, "evaluations": evaluations,
                         "evaluations_per_s": evaluations / seconds if seconds else None,
                         "train_reward_percent": reward, "validation_delta_percent": val(policy),
                         "heldout": totals})
            print(f"{name}: test {totals['all']['delta_percent']:+.3f}% in {seconds:.0f} s", flush=True)

        t = time.perf_counter()
        bc = train_bc(ds, inlining.PROBLEM, epochs=2 if args.quick else 10)
        held_out("bc", bc.policy, time.perf_counter() - t, 0, None)

        t = time.perf_counter()
        es_dir = out / "es-run"
        open_run(es_dir, force=True)
        cfg = ESConfig(iterations=args.es_iterations, perturbations=args.perturbations, sigma=0.02, lr=0.01,
                       modules_per_perturbation=4 if args.quick else 16)
        trainer = ESTrainer(bc.policy, train, baseline, es_dir, cfg, validation=validation, pool=pool)
        metrics = []

        def on_iteration(m: dict) -> None:
            metrics.append(m)
            print(f"  es {m['iteration']}: training {-100 * m['reward']:+.3f}%, validation "
                  f"{m['validation_delta_percent']:+.3f}%, {m['evaluations_per_s']:.1f} evaluations/s", flush=True)

        trainer.run(on_iteration)
        from mlopt.policy import MLPPolicy

        best = es_dir / "best" / "policy.npz"
        chosen = MLPPolicy.load(best, problem=inlining.PROBLEM) if best.exists() else trainer.current_policy()
        evaluations = sum(m["evaluations"] for m in metrics) + (len(metrics) + 1) * len(validation)
        held_out("es", chosen, time.perf_counter() - t, evaluations, -100 * metrics[-1]["reward"] if metrics else None)

        t = time.perf_counter()
        search_dir = out / "search-run"
        quick = {"flip_weights": (1.0,), "epochs": 1} if args.quick else {}
        open_run(search_dir, force=True)
        policy, report = search_and_imitate(bc.policy, ds, train, search_dir,
                                            SearchConfig(evaluations_per_module=args.search_evaluations, **quick),
                                            validate=val, pool=pool, say=lambda s: print(" ", s.strip(), flush=True))
        evaluations = report["evaluations"] + len(train) + len(report["validation"]) * len(validation)
        held_out("search+imitation", policy, time.perf_counter() - t, evaluations, report["train_delta_percent"])
    (out / "trainers.json").write_text(json.dumps(rows, indent=2) + "\n")

    print(f"\n{'trainer':<18}{'time':>8}{'compiles':>10}{'/s':>7}{'train':>10}{'valid.':>10}"
          f"{'C':>9}{'C++':>9}{'all':>9}{'ratio':>9}")
    for r in rows:
        h = r["heldout"]
        ratio = h["all"]["policy_text"] / h["all"]["heuristic_text"]
        train_r = "-" if r["train_reward_percent"] is None else f"{r['train_reward_percent']:+.3f}%"
        rate = "-" if not r["evaluations_per_s"] else f"{r['evaluations_per_s']:.1f}"
        print(f"{r['trainer']:<18}{r['seconds']:>7.0f}s{r['evaluations']:>10}{rate:>7}{train_r:>10}"
              f"{r['validation_delta_percent']:>+9.3f}%" + "".join(
                  f"{h[g]['delta_percent']:>+8.3f}%" if g in h else f"{'-':>9}" for g in ("C", "C++", "all"))
              + f"{ratio:>9.4f}")
    print("(train: what the trainer optimized, as a .text delta vs -Oz: ES, minus its last iteration's mean "
          "reward; search, the training modules' best trajectories; test columns: .text delta vs -Oz; "
          "ratio: policy / -Oz .text)")
    print(f"run directories: {out}")


if __name__ == "__main__":
    main()

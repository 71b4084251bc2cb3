"""ES and PPO from the same BC policy on a package-disjoint split, each
given a wall-clock budget, each judged on the test packages against -Oz
(the heuristic, compiled in the same run by the same LLVM), C and C++ apart
and per package.

    python3 benchmarks/bench_es_ppo.py SPLITS BC_RUN --budget 600 --out DIR [--seed 0]
    python3 benchmarks/bench_es_ppo.py SPLITS BC_RUN --budget 1800 --out DIR ... --extend   # same options
    python3 benchmarks/bench_es_ppo.py SPLITS BC_RUN --budget 1e9 --iterations 75 --workers 1 --out DIR ...
    python3 benchmarks/bench_es_ppo.py --quick --out DIR    # the demo's reduced split, BC, 1 iteration each

``--extend`` continues the runs in DIR from their checkpoints until --budget
seconds of training in all (the earlier seconds are DIR/es_ppo.json's); a
resumed run is the uninterrupted run (tests/test_training.py), so a 1,200 s
run extended to 1,800 s is the 1,800 s run up to where the clock stops it.
Each trainer's ``iteration_ended_s`` records when each iteration ended (its
validation included); the clock starts before the trainer's set-up (ES: the
sigma calibration of ``--es-flip-share``, its ``setup_s``), so the budget
counts it.

SPLITS holds train/, validation/ and test/ (``mlopt corpus split``); BC_RUN
is a ``mlopt train bc`` run on the training split's trace (or its
policy.npz, or a prior such as ``mlopt policy default-prior``'s). Every
figure is a total ``.text`` delta vs -Oz in percent (negative = smaller),
the one objective the trainers optimize, select by and report (with
``--problem inlining-linked``: the linked share): training (the iteration's
sampled modules; ES: mean over its candidates, PPO: the sampling policy),
validation (the policy selected at its best iteration) and test. The LLVM
is ``$MLOPT_LLVM``'s. Writes DIR/<trainer>/ run directories and
DIR/es_ppo.json."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from mlopt.corpus import PACKAGES, corpus_entries, package_of
from mlopt.corpus.manifest import read_manifest
from mlopt.evaluation import plot_training_curve
from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.training.environment import CompilerEnvironment, total_delta_percent
from mlopt.training.es import OBJECTIVES, ESConfig, ESTrainer
from mlopt.training.ppo import PPOConfig, PPOTrainer
from mlopt.training.run_dir import open_run
from mlopt.training.sigma_calibration import calibrate_sigma, flip_probe
from mlopt.workers import make_pool


def module_languages(corpus: Path) -> dict[str, str]:
    """Module -> "c"/"c++": the corpus manifest's (a Debian corpus), else the
    default corpus' package table."""
    manifest = read_manifest(corpus) or {}
    if manifest.get("module_languages"):
        return dict(manifest["module_languages"])
    by_package = {p.name: p.language for p in PACKAGES}
    return {e.name: by_package.get(package_of(e.name), "?") for e in corpus_entries(corpus)}


def test_report(env, policy, test, baseline, work: Path, languages: dict[str, str]) -> dict:
    costs = env.costs([policy], [(0, e) for e in test], work)
    groups: dict[str, list[int]] = {"all": list(range(len(test)))}
    for i, e in enumerate(test):
        groups.setdefault({"c": "C", "c++": "C++"}.get(languages.get(e.name), "?"), []).append(i)
        groups.setdefault(f"package {package_of(e.name)}", []).append(i)
    return {name: {"delta_percent": total_delta_percent([costs[i] for i in idx],
                                                        [baseline[test[i].name] for i in idx]),
                   "modules": len(idx), "failed": sum(costs[i] is None for i in idx)}
            for name, idx in groups.items()}


def test_curve(env, init, run_dir: Path, test, baseline, work: Path, points: int) -> dict[int, float]:
    """Iteration -> test delta of ``points`` of the run's validated policies
    (evenly spaced, the last included; iteration 0 is the starting policy)."""
    snapshots = sorted((run_dir / "validated").glob("*.npz"))
    if not snapshots:
        return {}
    pick = sorted({round(i) for i in np.linspace(0, len(snapshots) - 1, min(points, len(snapshots)))})
    out = {0: total_delta_percent(env.costs([init], [(0, e) for e in test], work), [baseline[e.name] for e in test])}
    for i in pick:
        policy = type(init).load(snapshots[i], problem=init.problem)
        costs = env.costs([policy], [(0, e) for e in test], work)
        out[int(snapshots[i].stem)] = total_delta_percent(costs, [baseline[e.name] for e in test])
    return out


def _linked_baseline(args, side, pool, results) -> dict[str, float]:
    """The linked_share objective: the packages' table over all three splits (the heuristic's grouped code;
    built once, kept in --out as linked-shares.npz with the -Oz charges; the workers read it as
    $MLOPT_LINKED_SHARES, set before they start); returns each module's -Oz charge (the baseline every
    delta is taken against)."""
    from mlopt.problems.inlining_linked import LinkedShares
    from mlopt.rollouts import build_linked_shares

    table, charges = args.out / "linked-shares.npz", args.out / "linked-shares-oz.json"
    start = time.perf_counter()
    if table.exists() and charges.exists():
        shares, costs = LinkedShares.load(table), json.loads(charges.read_text())
    else:
        shares, costs = build_linked_shares([e for s in side.values() for e in s], pool=pool, quiet=False)
        shares.save(table)
        charges.write_text(json.dumps(costs, sort_keys=True))
    results["linked_shares"] = {"packages": len(shares.packages), "modules": len(costs),
                                "seconds": round(time.perf_counter() - start, 1)}
    print("linked shares", json.dumps(results["linked_shares"]), flush=True)
    return {m: float(c) for m, c in costs.items()}


def _percent(metrics: dict) -> str:
    v = metrics["validation_delta_percent"]
    return "-" if v is None else f"{v:+.3f}%"


def _calibrated_sigma(args, init, trace) -> tuple[float, dict]:
    """ES's sigma for ``init`` from --es-flip-share (16 perturbation draws per sigma, on the trace's modules)."""
    start = time.perf_counter()
    probe = flip_probe(init, trace.columns, trace.module_rows)
    cal = calibrate_sigma(init, probe, args.es_flip_share, start=args.es_sigma, samples=16)
    return cal.sigma, {"sigma": cal.sigma, "share": cal.share, "below": cal.below, "target": cal.target,
                       "modules": cal.modules, "rows": cal.rows, "samples": cal.samples,
                       "evaluations": cal.evaluations, "seconds": time.perf_counter() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, nargs="?")
    ap.add_argument("bc", type=Path, nargs="?")
    ap.add_argument("--budget", type=float, default=600.0,
                    help="seconds of training per trainer (its set-up included)")
    ap.add_argument("--iterations", type=int, default=0, metavar="N",
                    help="stop a trainer after N iterations even within the budget (0: the budget alone)")
    ap.add_argument("--trainers", default="es,ppo")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--es-modules", type=int, default=8)
    ap.add_argument("--es-lr", type=float, default=ESConfig.lr)
    ap.add_argument("--es-sigma", type=float, default=ESConfig.sigma)
    ap.add_argument("--es-flip-share", type=float, default=None, metavar="S",
                    help="set sigma by its effect: the share of training modules a perturbation changes")
    ap.add_argument("--es-lr-follows-sigma", action="store_true",
                    help="with --es-flip-share: --es-lr times calibrated sigma / --es-sigma (the same step in radii)")
    ap.add_argument("--es-pairs", type=int, default=None, help="antithetic pairs (default: from the parameter count)")
    ap.add_argument("--es-objective", choices=OBJECTIVES, default="total",
                    help="what ES ranks candidates by (validation and reports stay on total bytes)")
    ap.add_argument("--es-modules-per-pair", type=int, default=None, metavar="K",
                    help="each antithetic pair draws its own K modules (ml-compiler-opt's sampling)")
    ap.add_argument("--ppo-modules", type=int, default=32)
    ap.add_argument("--ppo-lr", type=float, default=3e-4)
    ap.add_argument("--ppo-temperature", type=float, default=PPOConfig.temperature)
    ap.add_argument("--ppo-entropy", type=float, default=PPOConfig.entropy,
                    help="PPO's entropy bonus (0: none)")
    ap.add_argument("--ppo-samples", type=int, default=1, metavar="K",
                    help="rollouts per drawn module; K > 1: the group (leave-one-out) baseline")
    ap.add_argument("--ppo-target-kl", type=float, default=None,
                    help="stop an iteration's passes once the mean KL exceeds 1.5x this")
    ap.add_argument("--validate-every", type=int, default=1, help="validate every K-th iteration")
    ap.add_argument("--test-curve", type=int, default=0, metavar="N",
                    help="after training, the test delta of N of the run's validated policies (test_curve.json)")
    ap.add_argument("--package-call-sites", type=Path, metavar="FILE",
                    help="the one-site-linkonce rule in every policy compile (the packages' call-site table; "
                         "built over the three splits when FILE does not exist)")
    ap.add_argument("--problem", default=None, metavar="NAME",
                    help="train BC_RUN's weights as this problem (e.g. inlining-linked)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--extend", action="store_true",
                    help="continue DIR's runs from their checkpoints up to --budget seconds in all")
    ap.add_argument("--quick", action="store_true",
                    help="the demo's reduced split (train marisa-trie, validate ujson, test lz4), a 2-epoch BC, "
                         "1 iteration of each trainer on 4 modules")
    args = ap.parse_args()
    if args.quick:
        args.out.mkdir(parents=True, exist_ok=True)
        from _common import quick_inputs

        args.splits, _, args.bc = quick_inputs(args.out / "inputs")
        args.iterations, args.budget, args.es_modules, args.es_pairs, args.ppo_modules = 1, 1e9, 4, 2, 4
    elif args.splits is None or args.bc is None:
        ap.error("give SPLITS and BC_RUN, or --quick")
    if args.package_call_sites and "ppo" in args.trainers.split(","):
        ap.error("--package-call-sites: PPO learns from the logged decisions, and the rule's forced ones would "
                 "count as the policy's own")
    args.out.mkdir(parents=True, exist_ok=True)
    earlier = json.loads((args.out / "es_ppo.json").read_text()) if args.extend else {}
    init = load_weights(args.bc / "policy.npz" if args.bc.is_dir() else args.bc, args.problem)
    results = {"llvm": os.environ.get("MLOPT_LLVM", "default"), "budget_s": args.budget, "seed": args.seed}
    if init.problem.objective == "linked_share":  # read lazily by the workers, which start next
        os.environ["MLOPT_LINKED_SHARES"] = str((args.out / "linked-shares.npz").resolve())
    if args.package_call_sites:  # read lazily by the workers, which start next
        os.environ["MLOPT_PACKAGE_CALL_SITES"] = str(args.package_call_sites.resolve())
        results["package_call_sites"] = str(args.package_call_sites)
    with make_pool(args.workers) as pool:
        side = {s: corpus_entries(args.splits / s) for s in ("train", "validation", "test")}
        if args.package_call_sites and not args.package_call_sites.exists():
            from mlopt.rollouts import build_package_call_sites

            build_package_call_sites([e for v in side.values() for e in v], pool=pool, quiet=False,
                                     skip_failed=True).save(args.package_call_sites)
        baseline = {}
        for s in side:
            # a policy that takes the callee's linkage is checked against (and calibrated on) logs that have it
            ds = trace_corpus(args.splits / s, pool=pool, quiet=True,
                              callee_linkage="callee_linkage" in init.problem.feature_names)
            results["llvm_version"] = ds.meta["llvm"]
            baseline.update({m: float(v) for m, v in zip(ds.modules, ds.text_size)})
            if s == "train":
                train_trace = ds
        side = {s: [e for e in v if e.name in baseline] for s, v in side.items()}
        if init.problem.objective == "linked_share":
            baseline = _linked_baseline(args, side, pool, results)
        env = CompilerEnvironment(init.problem, pool, heuristic_costs=baseline)
        languages = module_languages(args.splits / "test")
        results["bc"] = {"test": test_report(env, init, side["test"], baseline, args.out / "work", languages)}
        print("bc", json.dumps(results["bc"]["test"]["all"]), flush=True)
        for name in args.trainers.split(","):
            run_dir = args.out / name
            setup_start = time.perf_counter()  # the budget counts the trainer's set-up (ES: sigma calibration) too
            if args.extend:
                open_run(run_dir, resume=True)
            else:
                run = open_run(run_dir, force=True)  # a fresh run: nothing of an older one is resumed
                run.write_config({"kind": name, "benchmark": "bench_es_ppo", "seed": args.seed})
            if name == "es":
                sigma, lr = args.es_sigma, args.es_lr
                if args.es_flip_share is not None:
                    sigma, results["es_sigma_calibration"] = _calibrated_sigma(args, init, train_trace)
                    if args.es_lr_follows_sigma:
                        lr = results["es_sigma_calibration"]["lr"] = args.es_lr * sigma / args.es_sigma
                    print("sigma", json.dumps(results["es_sigma_calibration"]), flush=True)
                per_pair = {"modules_per_pair": args.es_modules_per_pair} if args.es_modules_per_pair else {}
                cfg = ESConfig(iterations=0, modules_per_perturbation=args.es_modules, seed=args.seed, lr=lr,
                               sigma=sigma, perturbations=args.es_pairs, objective=args.es_objective,
                               validate_every=args.validate_every, keep_validated=True, **per_pair)
                trainer = ESTrainer(init, side["train"], baseline, run_dir, cfg, validation=side["validation"],
                                    pool=pool)
            else:
                cfg = PPOConfig(iterations=0, modules=args.ppo_modules, lr=args.ppo_lr, seed=args.seed,
                                temperature=args.ppo_temperature, target_kl=args.ppo_target_kl,
                                samples=args.ppo_samples, entropy=args.ppo_entropy,
                                validate_every=args.validate_every, keep_validated=True)
                trainer = PPOTrainer(init, side["train"], baseline, run_dir, cfg, validation=side["validation"],
                                     pool=pool)
            spent = 0.0
            if args.extend:
                if not trainer.resume():
                    raise SystemExit(f"{run_dir}: no checkpoint.npz to extend")
                trainer.config.iterations = trainer.iteration
                trainer.start_validation = earlier[name]["validation_start"]
                spent = earlier[name]["seconds"]
            setup = 0.0 if args.extend else time.perf_counter() - setup_start
            start = time.perf_counter() - spent - setup
            capped = args.iterations or float("inf")
            # iteration -> seconds of training when it ended (its validation included)
            ended = dict(earlier[name].get("iteration_ended_s", {})) if args.extend else {}

            def report(m, n=name, ended=ended, start=start):
                ended[str(m["iteration"])] = round(time.perf_counter() - start, 3)
                print(n, m["iteration"], f"train {m['train_delta_percent']:+.3f}%", "val " + _percent(m),
                      f"step {m['update_norm']:.3g}", flush=True)

            while time.perf_counter() - start < args.budget and trainer.iteration < capped:
                trainer.config.iterations += 1
                trainer.run(on_iteration=report)
            seconds = time.perf_counter() - start
            best = run_dir / "best" / "policy.npz"
            chosen = type(init).load(best, problem=init.problem) if best.exists() else trainer.current_policy()
            metrics = [json.loads(s) for s in (run_dir / "metrics.jsonl").read_text().splitlines()]
            results[name] = {"seconds": seconds, "iterations": trainer.iteration,
                             **({"extended_from": {k: earlier[name][k] for k in ("seconds", "iterations")}}
                                if args.extend else {}),
                             "validation_start": trainer.start_validation, "validation_best": trainer.best,
                             "setup_s": round(setup, 3) if not args.extend else earlier[name].get("setup_s"),
                             "train_last": metrics[-1].get("train_delta_percent"), "iteration_ended_s": ended,
                             "test": test_report(env, chosen, side["test"], baseline, args.out / "work", languages),
                             "config": cfg.__dict__}
            if args.test_curve:
                results[name]["test_curve"] = test_curve(env, init, run_dir, side["test"], baseline, args.out / "work",
                                                         args.test_curve)
                curve = {int(k): v for k, v in results[name]["test_curve"].items()}
                plot_training_curve(run_dir, args.out / name, llvm=results.get("llvm_version"), test=curve)
            print(name, json.dumps(results[name]), flush=True)
    (args.out / "es_ppo.json").write_text(json.dumps(results, indent=2) + "\n")
    trained = [n for n in ("bc", *args.trainers.split(",")) if n in results]
    print("test delta vs -Oz: " + ", ".join(f"{n} {results[n]['test']['all']['delta_percent']:+.3f}%" for n in trained)
          + f" ({results.get('llvm_version')})")


if __name__ == "__main__":
    main()

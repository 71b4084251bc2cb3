"""ES and PPO from the same BC policy on a package-disjoint split, each
given a wall-clock budget, each judged on the test packages against -Oz
(the heuristic, compiled in the same run by the same LLVM), C and C++ apart
and per package.

    python3 benchmarks/bench_es_ppo.py SPLITS BC_RUN --budget 600 --out DIR [--llvm 19] [--seed 0]
    python3 benchmarks/bench_es_ppo.py SPLITS BC_RUN --budget 1800 --out DIR ... --extend   # same options
    python3 benchmarks/bench_es_ppo.py SPLITS BC_RUN --budget 1e9 --iterations 75 --workers 1 --out DIR ...

``--extend`` continues the runs in DIR from their checkpoints until --budget
seconds of training in all (the earlier seconds are DIR/es_ppo.json's); a
resumed run is the uninterrupted run (tests/test_training.py), so a 1,200 s
run extended to 1,800 s is the 1,800 s run up to where the clock stops it.
Each trainer's ``iteration_ended_s`` records when each iteration ended
(its validation included), so ``budget_cut.py`` can say what a shorter
budget would have returned. The clock starts before the trainer's set-up
(ES: the sigma calibration of ``--es-flip-share``, its ``setup_s``), so
the budget counts it (since stop 60; earlier runs started the clock after
it: ``budget_cut.py --count-setup`` counts it for them).

SPLITS holds train/, validation/ and test/ (``mlopt corpus split``); BC_RUN
is a ``mlopt train bc`` run on the training split's trace. Every figure is a
total ``.text`` delta vs -Oz in percent (negative = smaller), the one
objective the trainers optimize, select by and report: training (the
iteration's sampled modules; ES: mean over its candidates, PPO: the sampling
policy), validation (the policy selected at its best iteration) and test.
Writes DIR/<trainer>/ run directories and DIR/es_ppo.json."""

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
from mlopt.problems.inlining_default.prior import carried_vote_mask
from mlopt.rollouts import trace_corpus
from mlopt.training.distill import distill
from mlopt.training.environment import CompilerEnvironment, total_delta_percent
from mlopt.training.es import OBJECTIVES, ESConfig, ESTrainer
from mlopt.training.flip_gradient import FlipGradientConfig, FlipGradientTrainer
from mlopt.training.ppo import PPOConfig, PPOTrainer
from mlopt.training.run_dir import open_run
from mlopt.training.sigma_calibration import calibrate_sigma, flip_probe, module_flip_share
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


def _calibrated_sigma(args, init, trace, among=None) -> tuple[float, dict]:
    """ES's sigma for ``init`` from --es-flip-share, or from --es-flip-reference's share at --es-sigma
    (the same modules and perturbation draws, 16 per sigma), on the trace's modules ``among`` (default all)."""
    if args.es_flip_share is not None and args.es_flip_reference is not None:
        raise SystemExit("--es-flip-share and --es-flip-reference: one or the other")
    start = time.perf_counter()
    report = {}
    target = args.es_flip_share
    if args.es_flip_reference is not None:
        reference = load_weights(args.es_flip_reference)
        ref_probe = flip_probe(reference, trace.columns, trace.module_rows, among=among)
        target = module_flip_share(reference, ref_probe, args.es_sigma, samples=16, train_layers=args.es_train_layers)
        report["reference"] = {"policy": str(args.es_flip_reference), "sigma": args.es_sigma, "share": target}
    probe = flip_probe(init, trace.columns, trace.module_rows, among=among)
    cal = calibrate_sigma(init, probe, target, start=args.es_sigma, samples=16, train_layers=args.es_train_layers)
    report.update(sigma=cal.sigma, share=cal.share, below=cal.below, target=cal.target, modules=cal.modules,
                  rows=cal.rows, samples=cal.samples, evaluations=cal.evaluations,
                  seconds=time.perf_counter() - start)
    return cal.sigma, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path)
    ap.add_argument("bc", type=Path)
    ap.add_argument("--budget", type=float, default=600.0,
                    help="seconds of training per trainer, its set-up (sigma calibration) included")
    ap.add_argument("--iterations", type=int, default=0, metavar="N",
                    help="also stop after N iterations (a run is the same up to any iteration whatever the machine "
                         "does: runs capped alike can share the cores)")
    ap.add_argument("--trainers", default="es,ppo")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--es-modules", type=int, default=8)
    ap.add_argument("--es-lr", type=float, default=ESConfig.lr)
    ap.add_argument("--es-lr-end", type=float, default=ESConfig.lr_end, metavar="LR",
                    help="ES's step goes geometrically from --es-lr to LR in --es-lr-horizon iterations (0: constant)")
    ap.add_argument("--es-lr-horizon", type=int, default=ESConfig.lr_horizon, metavar="N")
    ap.add_argument("--es-sigma", type=float, default=ESConfig.sigma)
    ap.add_argument("--es-flip-share", type=float, default=None, metavar="S",
                    help="instead of --es-sigma: the sigma whose perturbations change the share S of the training "
                         "modules (on their trace; mlopt.training.sigma_calibration)")
    ap.add_argument("--es-flip-reference", type=Path, default=None, metavar="NPZ",
                    help="instead of --es-sigma: the sigma whose perturbations change as many training modules as "
                         "this policy's do at --es-sigma")
    ap.add_argument("--es-hold-flip-share", action="store_true",
                    help="with --es-flip-share: hold that share for the whole run (ESConfig.hold_flip_share: sigma "
                         "moves before each iteration, the step keeps its length)")
    ap.add_argument("--es-lr-follows-sigma", action="store_true",
                    help="with a calibrated sigma: scale --es-lr (and --es-lr-end) by sigma / --es-sigma, so that a "
                         "step of the same gradient estimate moves the weights as far as at --es-sigma")
    ap.add_argument("--es-pairs", type=int, default=None, help="antithetic pairs (default: from the parameter count)")
    ap.add_argument("--es-average", type=float, default=ESConfig.average, metavar="D",
                    help="ES produces the moving average of its iterates (decay D per iteration; 0: the iterate)")
    ap.add_argument("--es-momentum", type=float, default=ESConfig.momentum, metavar="M",
                    help="ES's SGD momentum (the step is lr times the velocity v = M v + g)")
    ap.add_argument("--es-skip-largest", type=float, default=ESConfig.skip_largest, metavar="Q",
                    help="ES never draws the largest share Q of the training modules (0: all are drawn)")
    ap.add_argument("--es-package-power", type=float, default=ESConfig.package_power, metavar="A",
                    help="ES weighs its draw by package: a package's share grows as its module count to the power A "
                         "(1: modules drawn alike)")
    ap.add_argument("--es-top-pairs", type=int, default=ESConfig.top_pairs, metavar="B",
                    help="ES estimates from the B pairs whose better candidate ranks highest (ARS; 0: every pair)")
    ap.add_argument("--es-large-pairs", type=int, default=ESConfig.large_pairs, metavar="K",
                    help="ES compiles each drawn large module (the largest --es-large-share of the training modules) "
                         "by K of its pairs only (module-rank; 0: by every pair)")
    ap.add_argument("--es-large-share", type=float, default=ESConfig.large_share, metavar="Q")
    ap.add_argument("--es-large-extra", type=int, default=ESConfig.large_extra, metavar="E",
                    help="with --es-large-pairs, E more large modules join every draw")
    ap.add_argument("--es-train-layers", type=int, default=ESConfig.train_layers, metavar="K",
                    help="ES perturbs and steps only the last K layers (0: all)")
    ap.add_argument("--es-guide", type=int, default=ESConfig.guide, metavar="K",
                    help="guided perturbations: the last K gradient estimates span a subspace holding "
                         "1 - --es-guide-alpha of each perturbation's variance (0: isotropic)")
    ap.add_argument("--es-guide-alpha", type=float, default=ESConfig.guide_alpha, metavar="A")
    ap.add_argument("--es-project", action="store_true",
                    help="project each drawn module's term of the estimate onto the decision-margin gradients at "
                         "its flipped call sites (ESConfig.project; needs --es-objective module-rank)")
    ap.add_argument("--es-line-search", type=lambda t: tuple(float(v) for v in t.split(",")), default=(),
                    metavar="T,T", help="after each estimate, compile a fresh draw with the iterate moved by each "
                    "of these multiples of the step (0: refuse it) and take the best (ESConfig.line_search)")
    ap.add_argument("--es-line-search-modules", type=int, default=0, metavar="K",
                    help="modules of each line-search draw (0: --es-modules)")
    ap.add_argument("--es-objective", choices=OBJECTIVES, default="total",
                    help="what ES's gradient ascends (selection stays on total bytes)")
    ap.add_argument("--es-modules-per-pair", type=int, default=None, metavar="K",
                    help="each pair draws its own K modules (instead of --es-modules shared by all)")
    ap.add_argument("--languages", default=None, metavar="LANGS",
                    help="train and validate on these languages' modules only (e.g. c; the manifests' "
                         "module_languages); test still compiles every module and reports C and C++ apart")
    ap.add_argument("--train-languages", default=None, metavar="LANGS",
                    help="draw training modules of these languages only (e.g. c++); validation and test keep "
                         "every language, so the policy is chosen by the objective that is reported")
    ap.add_argument("--ppo-modules", type=int, default=32)
    ap.add_argument("--ppo-lr", type=float, default=3e-4)
    ap.add_argument("--ppo-temperature", type=float, default=PPOConfig.temperature)
    ap.add_argument("--ppo-entropy", type=float, default=PPOConfig.entropy,
                    help="PPO entropy bonus (0 keeps Adam from stepping along it alone where advantages are 0)")
    ap.add_argument("--ppo-samples", type=int, default=1, metavar="K",
                    help="PPO rollouts per drawn module; K > 1: the leave-one-out group baseline")
    ap.add_argument("--ppo-target-kl", type=float, default=None,
                    help="stop an iteration's epochs past 1.5x this mean KL from the sampling policy")
    ap.add_argument("--fg-modules", type=int, default=FlipGradientConfig.modules, metavar="K",
                    help="flip gradient (--trainers fg): modules drawn per iteration")
    ap.add_argument("--fg-flips", type=int, default=FlipGradientConfig.flips, metavar="N",
                    help="flip gradient: call sites flipped (compiled) per iteration")
    ap.add_argument("--fg-per-module", type=int, default=FlipGradientConfig.per_module, metavar="N")
    ap.add_argument("--fg-credit", type=float, default=FlipGradientConfig.credit, metavar="BYTES",
                    help="flip gradient: a flip's credit is tanh(bytes it saves / BYTES)")
    ap.add_argument("--fg-margin-step", type=float, default=FlipGradientConfig.margin_step, metavar="LOGITS",
                    help="flip gradient: a step moves the flipped sites' margins by this much (rms)")
    ap.add_argument("--fg-hinge", type=float, default=FlipGradientConfig.hinge, metavar="LOGITS",
                    help="flip gradient: sites on the better side by at least this margin do not push (0: all do)")
    ap.add_argument("--fg-balanced", action="store_true",
                    help="flip gradient: half the flips among sites decided 1, half among those decided 0")
    ap.add_argument("--fg-freeze-vote", action="store_true",
                    help="flip gradient: keep the prior's carried heuristic vote fixed (carried_vote_mask)")
    ap.add_argument("--fg-max-step", type=float, default=FlipGradientConfig.max_step, metavar="T")
    ap.add_argument("--fg-average", type=float, default=FlipGradientConfig.average, metavar="D",
                    help="flip gradient: produce the moving average of its iterates (decay D per iteration)")
    ap.add_argument("--fg-rollback", type=float, default=FlipGradientConfig.rollback, metavar="P",
                    help="flip gradient: undo a step that leaves the next draw more than P%% larger than -Oz")
    ap.add_argument("--validate-every", type=int, default=1, help="validate every K-th iteration")
    ap.add_argument("--test-curve", type=int, default=0, metavar="N",
                    help="after training, also evaluate N of the validated policies on the test split "
                         "(evenly spaced; reported and plotted, never used to choose)")
    ap.add_argument("--hidden", type=lambda t: tuple(int(v) for v in t.split(",") if v), default=None,
                    metavar="N,N", help="start from a network of these hidden widths ('' for none: linear), "
                    "distilled from BC on the training split's trace")
    ap.add_argument("--package-call-sites", type=Path, metavar="FILE",
                    help="every policy compile also follows the one-site-linkonce rule of this table of the "
                         "packages' -Oz call sites (problems/inlining_linked/call_sites.py); built over the "
                         "three splits when FILE does not exist")
    ap.add_argument("--problem", default=None, metavar="NAME",
                    help="train the starting weights for this problem (one they may start from), e.g. "
                         "inlining-linked: every cost, the test's included, is then the module's share of its "
                         "package's linked .text (problems/inlining_linked)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--extend", action="store_true",
                    help="continue DIR's runs from their checkpoints up to --budget seconds in all")
    args = ap.parse_args()
    if args.package_call_sites and "ppo" in args.trainers.split(","):
        ap.error("--package-call-sites: PPO learns from the logged decisions, and the rule's forced ones would "
                 "count as the policy's own")
    if args.es_hold_flip_share and args.es_flip_share is None:
        ap.error("--es-hold-flip-share holds --es-flip-share's share: give it")
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
            if s == "train" and args.hidden is not None:
                init, agreement = distill(init, ds.columns, args.hidden, seed=args.seed)
                results["distilled"] = {"hidden": list(args.hidden), "agreement_with_bc": agreement}
                print("distilled", json.dumps(results["distilled"]), flush=True)
        side = {s: [e for e in v if e.name in baseline] for s, v in side.items()}
        if args.languages:
            keep = set(args.languages.split(","))
            for s in ("train", "validation"):
                lang = module_languages(args.splits / s)
                side[s] = [e for e in side[s] if lang.get(e.name) in keep]
            results["languages"] = {"only": sorted(keep), **{s: len(side[s]) for s in ("train", "validation")}}
            print("languages", json.dumps(results["languages"]), flush=True)
        if args.train_languages:
            keep = set(args.train_languages.split(","))
            lang = module_languages(args.splits / "train")
            side["train"] = [e for e in side["train"] if lang.get(e.name) in keep]
            results["train_languages"] = {"only": sorted(keep), "train": len(side["train"])}
            print("train languages", json.dumps(results["train_languages"]), flush=True)
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
                if args.es_flip_share is not None or args.es_flip_reference is not None:
                    trained = {e.name for e in side["train"]}
                    among = ([i for i, m in enumerate(train_trace.modules) if m in trained]
                             if args.languages or args.train_languages else None)
                    sigma, results["es_sigma_calibration"] = _calibrated_sigma(args, init, train_trace, among)
                    if args.es_lr_follows_sigma:
                        lr = results["es_sigma_calibration"]["lr"] = args.es_lr * sigma / args.es_sigma
                    print("sigma", json.dumps(results["es_sigma_calibration"]), flush=True)
                per_pair = {"modules_per_pair": args.es_modules_per_pair} if args.es_modules_per_pair else {}
                cfg = ESConfig(iterations=0, modules_per_perturbation=args.es_modules, seed=args.seed, lr=lr,
                               sigma=sigma, perturbations=args.es_pairs, objective=args.es_objective,
                               average=args.es_average, skip_largest=args.es_skip_largest,
                               package_power=args.es_package_power, top_pairs=args.es_top_pairs,
                               large_pairs=args.es_large_pairs, large_share=args.es_large_share,
                               large_extra=args.es_large_extra,
                               momentum=args.es_momentum,
                               train_layers=args.es_train_layers, lr_end=args.es_lr_end * lr / args.es_lr,
                               lr_horizon=args.es_lr_horizon, validate_every=args.validate_every,
                               guide=args.es_guide, guide_alpha=args.es_guide_alpha, project=args.es_project,
                               line_search=args.es_line_search, line_search_modules=args.es_line_search_modules,
                               hold_flip_share=args.es_flip_share if args.es_hold_flip_share else 0.0,
                               keep_validated=True, **per_pair)
                sites = train_trace.batches() if args.es_project or args.es_hold_flip_share else None
                trainer = ESTrainer(init, side["train"], baseline, run_dir, cfg, validation=side["validation"],
                                    pool=pool, sites=sites)
            elif name == "fg":
                cfg = FlipGradientConfig(iterations=0, modules=args.fg_modules, flips=args.fg_flips,
                                         per_module=args.fg_per_module, credit=args.fg_credit,
                                         balanced=args.fg_balanced,
                                         margin_step=args.fg_margin_step, hinge=args.fg_hinge,
                                         max_step=args.fg_max_step, average=args.fg_average,
                                         rollback=args.fg_rollback, seed=args.seed,
                                         validate_every=args.validate_every, keep_validated=True)
                frozen = carried_vote_mask(init) if args.fg_freeze_vote else None
                trainer = FlipGradientTrainer(init, side["train"], baseline, run_dir, cfg, sites=train_trace.batches(),
                                              validation=side["validation"], pool=pool, frozen=frozen)
                results["fg_frozen_parameters"] = int(frozen.sum()) if frozen is not None else 0
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
            # iteration -> seconds of training when it ended (its validation included): budget_cut.py's clock
            ended = dict(earlier[name].get("iteration_ended_s", {})) if args.extend else {}

            def report(m, n=name, ended=ended, start=start):
                ended[str(m["iteration"])] = round(time.perf_counter() - start, 3)
                print(n, m["iteration"], f"train {m['train_delta_percent']:+.3f}%", "val " + _percent(m),
                      f"step {m['update_norm']:.3g}",
                      *([f"projected {m['projected_dimensions']} dims ({m['projected_sites']} sites)"]
                        if "projected_dimensions" in m else []),
                      *([f"x{m['line_search_multiple']:g}"] if "line_search_multiple" in m else []), flush=True)

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


if __name__ == "__main__":
    main()

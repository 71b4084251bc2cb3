"""``mlopt train bc|es|ppo|search``: train a policy and write a run directory.

The defaults are the recommended recipe (docs/guide/training.md); options
measured no better than it are in each command's "experimental" group."""

from __future__ import annotations

import json
import sys

from ._common import (
    add_command,
    add_exclude_option,
    add_ir2vec_option,
    add_linked_shares_option,
    add_package_call_sites_option,
    add_reward_trace_option,
    float_list,
    fraction,
    int_list,
    positive_float,
    positive_int,
    problem_name,
)


def _printable(name: str) -> str:
    """A module or package name as a terminal shows it (undecodable bytes replaced)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def open_run_dir(args, *, resumable: bool = True):
    """The trainer's run directory (training.run_dir.open_run) from -o,
    --force and --resume; a conflict is a usage error (exit 2)."""
    from ..errors import RunDirError
    from ..training.run_dir import open_run
    from ._common import UsageError

    try:
        return open_run(args.output, force=args.force, resume=getattr(args, "resume", False), resumable=resumable)
    except RunDirError as e:
        raise UsageError(str(e)) from None


def cmd_train_bc(args) -> int:
    from ..problems import get
    from ..rollouts import TraceDataset
    from ..training import train_bc
    from ..workers import Progress

    ds = TraceDataset.load(args.trace)
    problem = get(args.problem or ds.meta.get("problem") or "inlining")
    run = open_run_dir(args, resumable=False)
    config = {"kind": "bc", "trace": args.trace, "problem": problem.name, "hidden": list(args.hidden),
              "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "buckets": args.buckets,
              "seed": args.seed, "heldout": args.heldout}
    run.write_config(config)
    with Progress(args.epochs, "behavioral cloning", quiet=args.quiet, unit="epoch") as bar:
        def epoch_done(epoch: int, loss: float) -> None:
            run.log_metrics({"stage": "bc", "epoch": epoch, "loss": loss})
            bar.update(loss=f"{loss:.4f}")

        result = train_bc(ds, problem, hidden=args.hidden, epochs=args.epochs, batch_size=args.batch_size,
                          lr=args.lr, num_buckets=args.buckets, heldout_fraction=args.heldout, seed=args.seed,
                          on_epoch=epoch_done)
    files = run.save_policy(result.policy, compile_so=not args.no_compile)
    report = result.report() | {"llvm": ds.meta.get("llvm"), "run": str(run.path), "files": files}
    (run.path / "bc.json").write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        held = ("no held-out rows" if result.heldout_agreement is None else
                f"{100 * result.heldout_agreement:.2f}% on {result.heldout_rows} rows of "
                f"{len(result.heldout_modules)} held-out modules ({', '.join(map(_printable, result.heldout_units))})")
        print(f"{run.path}: agreement with LLVM {report['llvm'] or '?'}'s heuristic "
              f"{100 * result.train_agreement:.2f}% on "
              f"{result.train_rows} training rows, {held}")
        for k, v in files.items():
            print(f"  {k}: {v}", file=sys.stdout)
    return 0


# --- es / ppo: the rollout trainers (owned by the es-ppo work; one flow for both) ---------------------------


def _rollout_trainer(args, kind: str, cfg, make_trainer, describe, prepare=None) -> int:
    from pathlib import Path

    from .._native import default_llvm
    from ..corpus import corpus_entries
    from ..workers import Progress, make_pool
    from ._common import UsageError

    if kind == "ppo" and getattr(args, "package_call_sites", None):
        raise UsageError("--package-call-sites: PPO learns from the logged decisions, and the rule's forced ones "
                         "would count as the policy's own; use it with es or search")
    init, policy = _load_init(args)
    problem = policy.problem
    _check_objective_inputs(problem, args)
    out = Path(args.output)
    run = open_run_dir(args)
    if run.resumed and not (out / "checkpoint.npz").exists():
        raise UsageError(f"{out}: nothing to resume (no checkpoint.npz)")
    with make_pool(args.workers, ray=args.ray, timeout=args.timeout) as pool:
        train = corpus_entries(args.corpus, args.exclude)
        validation = corpus_entries(args.validation, args.exclude) if args.validation else []
        corpora = [args.corpus] + ([args.validation] if args.validation else [])
        _package_call_sites(args, train + validation, pool)
        if problem.objective == "linked_share":
            baseline = _linked_shares(args.linked_shares, train + validation, pool, args.quiet)
        else:
            baseline = _objective_baseline(problem, corpora, train + validation, pool, args.quiet)
        distilled = None
        if args.hidden is not None and [w.shape[0] for w, _ in policy.layers[:-1]] != list(args.hidden):
            from ..training.distill import distill

            policy, agreement = distill(policy, _trace(args.corpus, policy, pool).columns,
                                        args.hidden, seed=args.seed)
            distilled = {"hidden": list(args.hidden), "agreement_with_init": agreement}
        train = [e for e in train if e.name in baseline]
        prepared = prepare(policy, train, pool) if prepare else {}
        if not run.resumed:
            run.write_config({"kind": kind, "corpus": args.corpus, "validation": args.validation, "init": str(init),
                              "problem": problem.name, "distilled": distilled, "excluded": list(args.exclude),
                              **prepared, **cfg.__dict__})
        trainer = make_trainer(policy, train, baseline, out, cfg,
                               validation=[e for e in validation if e.name in baseline], pool=pool)
        if run.resumed:
            trainer.resume()
        with Progress(cfg.iterations, describe, quiet=args.quiet, unit="iteration") as bar:
            bar.update(trainer.iteration)

            def done(m: dict) -> None:
                val = m["validation_delta_percent"]
                train_delta = m["train_delta_percent"]
                extra = {"cached": f"{100 * m['cache_hit_share']:.0f}%"} if "cache_hit_share" in m else {}
                bar.update(train="-" if train_delta is None else f"{train_delta:+.3f}%",
                           val="-" if val is None else f"{val:+.3f}%", step=f"{m['update_norm']:.3g}", **extra)

            final = trainer.run(on_iteration=done)
    best = out / "best" / "policy.npz"
    chosen = type(policy).load(best, problem=problem) if best.exists() else final
    files = run.save_policy(chosen, compile_so=not args.no_compile)
    summary = {"run": str(out), "llvm": default_llvm(), "iterations": trainer.iteration,
               "start_validation_delta_percent": trainer.start_validation,
               "best_validation_delta_percent": trainer.best, "files": files}
    best_text = "n/a" if trainer.best is None else f"{trainer.best:+.3f}%"
    print(json.dumps(summary, indent=2) if args.json else
          f"{out}: {trainer.iteration} iterations; best validation delta {best_text} vs -Oz (total objective, "
          f"- = smaller; LLVM {summary['llvm']}); policy: {files.get('policy_so', files['model'])}")
    return 0


def cmd_train_es(args) -> int:
    from ..training import ESConfig
    from ..training.es_recipe import FLIP_SHARE, REFERENCE_SIGMA, calibrates, defaults
    from ._common import UsageError

    if args.objective == "module-rank" and args.modules_per_pair:
        raise UsageError("--objective module-rank ranks every candidate on the same modules; "
                         "it cannot be combined with --modules-per-pair")
    if args.sigma is not None and args.flip_share is not None:
        raise UsageError("--sigma fixes sigma and --flip-share sets it by its effect: give one of them")
    cfg = ESConfig(iterations=args.iterations, perturbations=args.perturbations,
                   sigma=args.sigma if args.sigma is not None else REFERENCE_SIGMA,
                   modules_per_pair=args.modules_per_pair or 0, seed=args.seed, optimizer=args.optimizer,
                   momentum=args.momentum, max_step=args.max_step, shaping=args.shaping, buckets=args.buckets,
                   validate_every=args.validate_every)

    def prepare(policy, train, pool) -> dict:
        recipe = defaults(policy.problem)
        cfg.lr = args.lr or recipe["lr"]
        cfg.modules_per_perturbation = args.modules or recipe["modules"]
        cfg.objective = args.objective or ("total" if args.modules_per_pair else recipe["objective"])
        share = args.flip_share
        if share is None and args.sigma is None and calibrates(policy.problem):
            share = FLIP_SHARE
        if share is None:
            return {}
        if not calibrates(policy.problem):
            raise UsageError(f"--flip-share calibrates on the inliner's trace; {policy.problem.name} policies take "
                             "a fixed --sigma")
        cfg.sigma, cfg.lr, calibration = _flip_share_sigma(policy, args, train, pool, share, cfg.lr)
        return {"sigma_calibration": calibration}

    return _rollout_trainer(args, "es", cfg, _es_trainer, "evolution strategies", prepare)


def _es_trainer(policy, train, baseline, out, cfg, *, validation, pool):
    from ..training import ESTrainer

    return ESTrainer(policy, train, baseline, out, cfg, validation=validation, pool=pool)


def _flip_share_sigma(policy, args, train: list, pool, share: float, lr: float) -> tuple[float, float, dict]:
    """ES's sigma for a flip share, on the training modules' trace, and ``lr`` scaled to it."""
    from ..training.es_recipe import recipe_sigma

    r = recipe_sigma(policy, _trace(args.corpus, policy, pool), {e.name for e in train}, lr, share)
    if not args.quiet:
        print(f"sigma {r.sigma:.4g}: its perturbations change {100 * r.calibration['share']:.2f}% of "
              f"{r.calibration['modules']} training modules (target {100 * share:.2f}%)", file=sys.stderr)
    return r.sigma, r.lr, r.calibration


def cmd_train_ppo(args) -> int:
    from ..training.ppo import PPOConfig, PPOTrainer

    cfg = PPOConfig(iterations=args.iterations, modules=args.modules, clip=args.clip, entropy=args.entropy,
                    lr=args.lr, epochs=args.epochs, batch_size=args.batch_size, decay=args.decay,
                    temperature=args.temperature, buckets=args.buckets, seed=args.seed,
                    validate_every=args.validate_every, target_kl=args.target_kl, samples=args.samples)
    return _rollout_trainer(args, "ppo", cfg, PPOTrainer, "PPO")


EXPERIMENTAL = "experimental (measured no better than the defaults)"


def _experimental(p, measured: str):
    """The argument group of options kept but not recommended; ``measured``: what was measured."""
    import textwrap

    return p.add_argument_group(EXPERIMENTAL, textwrap.fill(measured, 78, initial_indent="  ",
                                                              subsequent_indent="  "))


def _es_ppo_options(p) -> None:
    p.add_argument("corpus", help="training corpus")
    p.add_argument("--init", required=True, metavar="RUN|NPZ",
                   help="starting policy (a run directory or policy.npz; normally the BC run)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="run directory")
    p.add_argument("--validation", metavar="CORPUS",
                   help="corpus (other packages than training's) the best policy is chosen on")
    p.add_argument("--problem", type=problem_name, help="checked against the starting policy's (default: it)")
    p.add_argument("--iterations", type=positive_int, default=10)
    p.add_argument("--validate-every", type=positive_int, default=1, metavar="K",
                   help="validate every K-th iteration (1); the best policy is chosen among those")
    p.add_argument("--buckets", type=positive_int, default=4, help="size strata of the module sampler (4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")


def _objective_baseline(problem, corpora: list[str], entries: list, pool, quiet: bool) -> dict[str, float]:
    """The heuristic's cost (the problem's objective) of every module: .text
    sizes from the corpus traces (cached), or measured here."""
    if problem.objective == "text_size":
        from ..problems.inlining_linkage import takes_linkage

        return _baselines(corpora, pool, quiet, takes_linkage(problem))[0]
    from ..training.validation import costs_of

    costs = costs_of([(None, e) for e in entries], problem.name, pool=pool, quiet=quiet,
                     desc=f"{problem.objective} of the default")
    return {e.name: c for e, c in zip(entries, costs) if c is not None}


def _trace(corpus, policy, pool, quiet: bool = True):
    """The corpus' trace (cached) with every column the policy takes: with callee_linkage for an
    inlining-linkage policy."""
    from ..problems.inlining_linkage import takes_linkage
    from ..rollouts import trace_corpus

    return trace_corpus(corpus, pool=pool, quiet=quiet, callee_linkage=takes_linkage(policy))


def _baselines(corpora: list[str], pool, quiet: bool, callee_linkage: bool = False) -> tuple[dict[str, int], list]:
    """Heuristic .text sizes of every module of the corpora, and their traces (with the callee's linkage
    for a policy that takes it: the traces the trainer's in-process answers read)."""
    from ..rollouts import trace_corpus

    baseline, traces = {}, []
    for corpus in corpora:
        ds = trace_corpus(corpus, pool=pool, quiet=quiet, callee_linkage=callee_linkage)
        baseline.update({m: int(s) for m, s in zip(ds.modules, ds.text_size)})
        traces.append(ds)
    return baseline, traces


def _linked_shares(path: str, entries: list, pool, quiet: bool, charged: list | None = None) -> dict[str, float]:
    """The linked_share objective's table: read from ``path``, or built over ``entries`` (the training and
    validation modules) and written there (the workers read it as $MLOPT_LINKED_SHARES, set by cli._common.run
    before they start). Returns each module's -Oz charge (the baseline): of ``charged`` (default: ``entries``)
    when the table is read, of every entry when it is built."""
    from pathlib import Path

    from ..corpus.split import package_of
    from ..problems.inlining_linked import LinkedShares
    from ..rollouts import build_linked_shares
    from ..training.validation import costs_of
    from ._common import UsageError

    table = Path(path)
    if table.exists():
        shares = LinkedShares.load(table)
        missing = sorted({package_of(e.name) for e in entries} - set(shares.packages))
        if missing:
            raise UsageError(f"{table}: no package {missing[0]!r} ({len(missing)} of the corpora's packages "
                             f"missing): give a new FILE to build the table over these corpora")
        charged = entries if charged is None else charged
        costs = costs_of([(None, e) for e in charged], "inlining-linked", pool=pool, quiet=quiet,
                         desc="linked share of the default")
        return {e.name: c for e, c in zip(charged, costs) if c is not None}
    shares, costs = build_linked_shares(entries, pool=pool, quiet=quiet, skip_failed=True)
    shares.save(table)
    return costs


def _package_call_sites(args, entries: list, pool) -> None:
    """``--package-call-sites FILE``: checked when it exists (every package of ``entries`` in it), else built
    over ``entries`` and written there, before any policy compiles (the workers read it lazily)."""
    from pathlib import Path

    from ..corpus.split import package_of
    from ..problems.inlining_linked.call_sites import PackageCallSites
    from ..rollouts import build_package_call_sites
    from ._common import UsageError

    path = getattr(args, "package_call_sites", None)
    if not path:
        return
    table = Path(path)
    if table.exists():
        missing = sorted({package_of(e.name) for e in entries} - set(PackageCallSites.load(table).packages))
        if missing:
            raise UsageError(f"{table}: no package {missing[0]!r} ({len(missing)} of the corpora's packages "
                             f"missing): give a new FILE to build the table over these corpora")
        return
    build_package_call_sites(entries, pool=pool, quiet=args.quiet, skip_failed=True).save(table)


def _check_objective_inputs(problem, args) -> None:
    """What the problem's objective needs, named before any work starts."""
    from ._common import UsageError

    if problem.objective == "linked_share" and not getattr(args, "linked_shares", None):
        raise UsageError(f"problem {problem.name} is costed by the packages' -Oz COMDAT code: pass "
                         "--linked-shares FILE (built there when it does not exist)")

    if problem.objective.startswith("trace_") and not getattr(args, "reward_trace", None):
        raise UsageError(f"problem {problem.name} is costed by a recorded run: pass --reward-trace TRACE "
                         "(mlopt reward trace -o TRACE -- PROGRAM ARGS...)")


def _load_init(args):
    """(path, policy) of --init, with the problem it was trained for (which
    --problem, when given, must be)."""
    from pathlib import Path

    from ..problems import load_weights

    init = Path(args.init)
    if init.is_dir():
        init = init / "policy.npz"
    return init, load_weights(init, args.problem)


def cmd_train_search(args) -> int:
    from pathlib import Path

    from .._native import default_llvm
    from ..corpus import corpus_entries
    from ..problems.inlining_linkage import takes_linkage
    from ..training.callee_search import CalleeSearch
    from ..training.local_search import SearchConfig, TrajectorySearch, search_and_imitate
    from ..training.validation import total_delta_percent
    from ..workers import make_pool

    init, policy = _load_init(args)
    problem = policy.problem
    _check_objective_inputs(problem, args)
    out = Path(args.output)
    run = open_run_dir(args, resumable=False)
    cfg = SearchConfig(evaluations_per_module=args.evaluations, batch=args.batch, max_flips=args.max_flips,
                       max_decisions=args.max_decisions, flip_weights=tuple(args.flip_weights),
                       partitions=args.partitions, epochs=args.epochs, lr=args.lr, seed=args.seed)
    run.write_config({"kind": "search", "moves": args.moves, "corpus": args.corpus, "validation": args.validation,
                      "init": str(init), "modules": args.modules,
                      "problem": problem.name, **cfg.__dict__})
    say = (lambda s: None) if args.quiet else (lambda s: print(s.strip(), file=sys.stderr, flush=True))
    with make_pool(args.workers, ray=args.ray, timeout=args.timeout) as pool:
        train = corpus_entries(args.corpus, args.exclude)
        validation = corpus_entries(args.validation, args.exclude) if args.validation else []
        baseline, traces = _baselines([args.corpus] + ([args.validation] if args.validation else []), pool,
                                      args.quiet, takes_linkage(policy))
        validation = [e for e in validation if e.name in baseline]
        train = [e for e in train if e.name in baseline]
        everything = train + validation
        _package_call_sites(args, everything, pool)
        if args.modules and args.modules < len(train):  # a size-stratified draw (by -Oz .text), seeded by --seed
            from ..rollouts.sampler import SizeStratifiedSampler

            sampler = SizeStratifiedSampler([baseline[e.name] for e in train], buckets=4, seed=args.seed)
            train = [train[i] for i in sampler.sample(0, args.modules)]
        if problem.objective == "linked_share":  # charged as the packages link: the heuristic's charges
            baseline = _linked_shares(args.linked_shares, everything, pool, args.quiet, charged=train + validation)
            validation = [e for e in validation if e.name in baseline]
            train = [e for e in train if e.name in baseline]
        chosen, report = search_and_imitate(
            policy, traces[0], train, out, cfg, pool=pool, say=say,
            validate=lambda p: total_delta_percent(p, validation, baseline, out / "work", pool=pool),
            search_class=CalleeSearch if args.moves == "callee" else TrajectorySearch,
            baseline=None if problem.objective == "text_size" else baseline)
    files = run.save_policy(chosen, compile_so=not args.no_compile)
    report["files"] = files
    report["llvm"] = default_llvm()
    (out / "search_report.json").write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        val = report["validation"].get(report["chosen"])
        print(f"{out}: LLVM {report['llvm']}: search reached {report['train_delta_percent']:+.3f}% vs -Oz on the "
              f"training modules (the starting policy: {report['start_delta_percent']:+.3f}%) in "
              f"{report['evaluations']} evaluations; chose {report['chosen']} (validation "
              f"{'n/a' if val is None else f'{val:+.3f}%'} vs -Oz); policy: {files.get('policy_so', files['model'])}")
    return 0


def _rollout_trainer_options(parser) -> None:
    """What the trainers that compile on a pool share: workers, output, verbosity."""
    parser.add_argument("--workers", type=positive_int, metavar="N")
    parser.add_argument("--ray", metavar="ADDRESS")
    parser.add_argument("--timeout", type=positive_float, default=600.0, metavar="S")
    parser.add_argument("--no-compile", action="store_true", help="skip compiling policy.so")
    parser.add_argument("--force", action="store_true",
                        help="start over: delete an existing run directory's files first")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--json", action="store_true")
    add_exclude_option(parser)
    add_ir2vec_option(parser)
    add_reward_trace_option(parser)
    add_linked_shares_option(parser)
    add_package_call_sites_option(parser)


def register(sub) -> None:
    from ..training.es_recipe import FLIP_SHARE as RECIPE_FLIP_SHARE
    from ..training.es_recipe import OTHER, RECIPE, REFERENCE_SIGMA

    train = sub.add_parser("train", help="train policies: bc (imitate the heuristic), es (evolution strategies), ppo, "
                           "search (imitate searched trajectories)",
                           description="Train policies; each run writes a run directory. The defaults are the "
                                       "recommended recipe (docs/guide/training.md).")
    tsub = train.add_subparsers(dest="train_command", metavar="COMMAND", required=True)
    bc = add_command(tsub, "bc", "behavioral cloning: a policy that imitates the heuristic from a trace",
                     ["mlopt trace corpus/ -o trace.npz && mlopt train bc trace.npz -o runs/bc"])
    bc.add_argument("trace", help="a dataset written by mlopt trace")
    bc.add_argument("-o", "--output", required=True, metavar="DIR", help="run directory")
    bc.add_argument("--problem", type=problem_name,
                    help="whose features (default: the trace's: inlining, or inlining-ir2vec:<dim> for a "
                         "trace made with --ir2vec-vocab)")
    bc.add_argument("--hidden", type=int_list, default=(64, 64), metavar="64,64")
    bc.add_argument("--epochs", type=positive_int, default=10)
    bc.add_argument("--batch-size", type=positive_int, default=512)
    bc.add_argument("--lr", type=positive_float, default=3e-3)
    bc.add_argument("--buckets", type=positive_int, default=1000, help="vocab quantiles per feature")
    bc.add_argument("--heldout", type=fraction, default=0.2, metavar="F",
                    help="share of the rows held out, whole packages, to measure agreement (0.2)")
    bc.add_argument("--seed", type=int, default=0)
    bc.add_argument("--no-compile", action="store_true", help="skip compiling policy.so")
    bc.add_argument("--force", action="store_true",
                    help="start over: delete an existing run directory's files first")
    bc.add_argument("--quiet", action="store_true")
    bc.add_argument("--json", action="store_true")
    bc.set_defaults(func=cmd_train_bc)

    es = add_command(tsub, "es", "evolution strategies from a starting policy (e.g. the BC run or a default prior)",
                     ["mlopt corpus split corpus/ splits/  # train, validation, test: no package on two sides",
                      "mlopt train es splits/train --init runs/bc --validation splits/validation -o runs/es",
                      "mlopt train es splits/train --init prior.npz --package-call-sites sites.npz "
                      "--validation splits/validation -o runs/es-rule   # with the one-site-linkonce rule",
                      "mlopt train es splits/train --init runs/bc -o runs/es --resume --iterations 20"],
                     description="Evolution strategies from a starting policy. For inlining the defaults are the\n"
                                 "best setting measured (docs/guide/training.md): sigma set so that a\n"
                                 "perturbation changes 6% of the training modules, lr 0.02 scaled alike, 48\n"
                                 "modules an iteration ranked module by module.")
    _es_ppo_options(es)
    es.add_argument("--perturbations", type=positive_int, metavar="PAIRS",
                    help="antithetic pairs per iteration (default: from the parameter count, 4 + 3 ln n halved)")
    es.add_argument("--flip-share", type=fraction, metavar="S",
                    help="set sigma by its effect: the sigma at which a perturbation changes at least one decision "
                         f"in the share S of the training modules (default {RECIPE_FLIP_SHARE} for inlining "
                         "problems, the best measured: after 90 iterations every seed smaller than at a fixed "
                         "0.05, in 30 minutes the same mean with half the spread; 0.10 worse). Measured on their "
                         "trace, the same on any machine; about a minute")
    es.add_argument("--sigma", type=positive_float, metavar="SIGMA",
                    help=f"a fixed sigma instead, relative to each layer's mean |W| (default for problems "
                         f"--flip-share does not apply to: {REFERENCE_SIGMA})")
    es.add_argument("--lr", type=positive_float,
                    help=f"step size at sigma {REFERENCE_SIGMA}; with --flip-share it scales with the calibrated "
                         f"sigma (default {RECIPE['lr']} for inlining problems, measured better than 0.04; "
                         f"{OTHER['lr']} for others)")
    es.add_argument("--max-step", type=positive_float, default=1.0, metavar="R",
                    help="cap on the update norm, in perturbation radii sigma*sqrt(n) (1.0)")
    es.add_argument("--objective", choices=("total", "module-rank"),
                    help="what the gradient ascends: each candidate's mean rank among the candidates module by "
                         "module (module-rank, the default for inlining problems: -0.46%% against total's -0.31%% "
                         "on held-out packages), or total bytes over the modules (total; the default for others "
                         "and with --modules-per-pair); selection is on total bytes either way")
    es.add_argument("--modules", type=positive_int,
                    help=f"modules per iteration, for every candidate ({RECIPE['modules']} for inlining problems, "
                         f"{OTHER['modules']} for others)")
    _rollout_trainer_options(es)
    x = _experimental(es, "on held-out Debian packages: a distilled 16x16 network tested -0.10% against 64x64's "
                          "-0.36%; momentum 0.5 at the same step the same mean (-0.43% against -0.46%); "
                          "per-pair draws validation -0.08% against -0.18% to -0.35% (one seed each); Adam "
                          "and z-scores are ml-compiler-opt's choices, not measured better")
    x.add_argument("--hidden", type=int_list, metavar="16,16",
                   help="train a network of these hidden widths, first distilled from --init on the training "
                        "trace (default: --init's own)")
    x.add_argument("--modules-per-pair", type=positive_int, metavar="K",
                   help="instead of --modules: each antithetic pair draws its own K modules (ml-compiler-opt: "
                        "1 module, 100 pairs)")
    x.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="(sgd)")
    x.add_argument("--momentum", type=float, default=0.0, help="sgd momentum (0)")
    x.add_argument("--shaping", choices=("rank", "zscore"), default="rank",
                   help="normalization of the candidates' values (rank)")
    es.set_defaults(func=cmd_train_es)

    ppo = add_command(tsub, "ppo", "PPO from a BC warm start, the policy sampling its decisions in rollouts",
                      ["mlopt train ppo splits/train --init runs/bc --validation splits/validation -o runs/ppo",
                       "mlopt train ppo splits/train --init prior.npz --samples 4 --modules 16 --entropy 0 "
                       "-o runs/ppo-group",
                       "mlopt train ppo splits/train --init runs/bc -o runs/ppo --resume --iterations 40"])
    _es_ppo_options(ppo)
    ppo.add_argument("--modules", type=positive_int, default=32, help="modules rolled out per iteration (32)")
    ppo.add_argument("--lr", type=positive_float, default=3e-4, help="Adam step size (3e-4)")
    ppo.add_argument("--epochs", type=positive_int, default=4, help="passes over each iteration's rows (4)")
    ppo.add_argument("--batch-size", type=positive_int, default=1024)
    ppo.add_argument("--clip", type=fraction, default=0.2, help="PPO clip range (0.2)")
    ppo.add_argument("--entropy", type=float, default=0.01, help="entropy bonus coefficient (0.01)")
    ppo.add_argument("--target-kl", type=float, default=None, metavar="KL",
                     help="stop an iteration's epochs once the mean KL from the sampling policy exceeds 1.5 KL "
                          "(default: run every epoch)")
    ppo.add_argument("--decay", type=fraction, default=0.8, help="of the per-module moving-average baseline (0.8)")
    ppo.add_argument("--samples", type=positive_int, default=1, metavar="K",
                     help="rollouts per drawn module; K > 1 takes each against the mean of its module's other "
                          "K - 1 (a group baseline, unbiased from any start) instead of the moving average (1)")
    ppo.add_argument("--temperature", type=positive_float, default=1.0, help="sampling temperature (1.0)")
    ppo.add_argument("--hidden", type=int_list, metavar="16,16",
                     help="train a network of these hidden widths, first distilled from --init on the training "
                          "trace (default: --init's own)")
    _rollout_trainer_options(ppo)
    ppo.set_defaults(func=cmd_train_ppo)

    se = add_command(tsub, "search", "search each module's decisions for smaller code, then imitate the best",
                     ["mlopt train search splits/train --init runs/bc --validation splits/validation -o runs/search",
                      "mlopt train search splits/train --init runs/bc -o runs/search --evaluations 96",
                      "mlopt train search splits/train --init prior.npz --moves callee --validation splits/validation "
                      "-o runs/callee",
                      "mlopt train search splits/train --init start.npz --problem inlining-linked --linked-shares "
                      "shares.npz --moves callee --modules 3000 --evaluations 16 --validation splits/validation "
                      "-o runs/callee-linked"])
    se.add_argument("corpus", help="training corpus")
    se.add_argument("--init", required=True, metavar="RUN|NPZ",
                    help="starting policy (a run directory or policy.npz): its own compiles are the starting "
                         "trajectories, it decides after each flip and is trained further")
    se.add_argument("-o", "--output", required=True, metavar="DIR", help="run directory")
    se.add_argument("--validation", metavar="CORPUS",
                    help="corpus to choose the imitation on (a validation split; never the test split)")
    se.add_argument("--problem", type=problem_name, help="checked against the starting policy's (default: it)")
    se.add_argument("--moves", choices=("flip", "callee"), default="flip",
                    help="flip: one decision, the policy decides the rest (BC-Max); callee: every site of one "
                         "callee at once, 'never inline f' or 'inline f wherever asked' (flip)")
    se.add_argument("--modules", type=positive_int, metavar="N",
                    help="search a size-stratified draw of N training modules (seeded by --seed; default: all)")
    se.add_argument("--evaluations", type=positive_int, default=48, metavar="N", help="compiles per module (48)")
    se.add_argument("--batch", type=positive_int, default=8, help="moves per module per round (8)")
    se.add_argument("--max-flips", type=positive_int, default=10, metavar="N",
                    help="accepted flips per module, each after the last (10, as BC-Max)")
    se.add_argument("--partitions", type=positive_int, default=4, metavar="N",
                    help="imitation: module-size partitions that weigh the same (4)")
    se.add_argument("--max-decisions", type=positive_int, default=3000, metavar="N",
                    help="modules with more decisions are not searched (3000)")
    se.add_argument("--flip-weights", type=float_list, default=(1.0, 4.0, 16.0), metavar="1,4,16",
                    help="imitation weights of changed decisions tried (the best on validation is kept)")
    se.add_argument("--epochs", type=positive_int, default=4)
    se.add_argument("--lr", type=positive_float, default=1e-3)
    se.add_argument("--seed", type=int, default=0)
    _rollout_trainer_options(se)
    se.set_defaults(func=cmd_train_search)

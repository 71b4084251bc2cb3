"""``mlopt train bc|es|ppo|search``: train a policy and write a run directory."""

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
    non_negative_float,
    positive_float,
    positive_int,
    problem_name,
    step_multiples,
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
                         "would count as the policy's own; use it with es, search or flip-gradient")
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
                if "hold_share_measured" in m:  # --hold-flip-share: the sigma it holds
                    extra["sigma"] = f"{m['sigma']:.3g}"
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
    from ..training import ESConfig, ESTrainer
    from ._common import UsageError

    if (args.lr_end is None) != (args.lr_horizon is None):
        raise UsageError("--lr-end and --lr-horizon go together (the step goes from --lr to --lr-end over "
                         "--lr-horizon iterations)")
    if args.objective == "module-rank" and args.modules_per_pair:
        raise UsageError("--objective module-rank ranks every candidate on the same modules; "
                         "it cannot be combined with --modules-per-pair")
    cfg = ESConfig(iterations=args.iterations, perturbations=args.perturbations, sigma=args.sigma, lr=args.lr,
                   modules_per_perturbation=args.modules, modules_per_pair=args.modules_per_pair or 0,
                   seed=args.seed, optimizer=args.optimizer,
                   momentum=args.momentum, max_step=args.max_step, shaping=args.shaping, objective=args.objective,
                   buckets=args.buckets, average=args.average, skip_largest=args.skip_largest,
                   package_power=args.package_power, top_pairs=args.top_pairs,
                   large_pairs=args.large_pairs, large_share=args.large_share, large_extra=args.large_extra,
                   train_layers=args.train_layers, lr_end=args.lr_end or 0.0, lr_horizon=args.lr_horizon or 0,
                   guide=args.guide, guide_alpha=args.guide_alpha, validate_every=args.validate_every,
                   project=args.project, line_search=args.line_search or (),
                   line_search_modules=args.line_search_modules or 0,
                   hold_flip_share=args.flip_share if args.hold_flip_share else 0.0)
    if args.hold_flip_share and args.flip_share is None:
        raise UsageError("--hold-flip-share holds the share of --flip-share; give it (e.g. --flip-share 0.06)")
    if args.line_search_modules and not args.line_search:
        raise UsageError("--line-search-modules sets the draw of --line-search; give the step multiples too")
    if args.project and args.objective != "module-rank":
        raise UsageError("--project projects each module's term of the estimate: it needs --objective module-rank")

    def make_trainer(policy, train, baseline, out, cfg, *, validation, pool):
        sites = None
        if cfg.project or cfg.hold_flip_share:  # the training modules' call-site features: their trace (cached)
            sites = _trace(args.corpus, policy, pool).batches()
        return ESTrainer(policy, train, baseline, out, cfg, validation=validation, pool=pool, sites=sites)

    prepare = None
    if args.flip_share is not None:
        def prepare(policy, train, pool) -> dict:
            cfg.sigma, calibration = _flip_share_sigma(policy, args, train, pool, cfg)
            return {"sigma_calibration": calibration}
    return _rollout_trainer(args, "es", cfg, make_trainer, "evolution strategies", prepare)


def _flip_share_sigma(policy, args, train: list, pool, cfg) -> tuple[float, dict]:
    """ES's sigma for --flip-share, on the training modules' trace (the same bits on any machine)."""
    from ..training.sigma_calibration import calibrate_sigma, flip_probe

    ds = _trace(args.corpus, policy, pool)
    keep = {e.name for e in train}  # not the --exclude'd packages
    probe = flip_probe(policy, ds.columns, ds.module_rows, among=[i for i, m in enumerate(ds.modules) if m in keep])
    cal = calibrate_sigma(policy, probe, args.flip_share, start=args.sigma, samples=16,
                          train_layers=cfg.train_layers)
    if not args.quiet:
        print(f"sigma {cal.sigma:.4g}: its perturbations change {100 * cal.share:.2f}% of {cal.modules} training "
              f"modules (target {100 * args.flip_share:.2f}%)", file=sys.stderr)
    return cal.sigma, {"sigma": cal.sigma, "share": cal.share, "target": cal.target, "modules": cal.modules,
                       "rows": cal.rows, "samples": cal.samples}


def cmd_train_ppo(args) -> int:
    from ..training.ppo import PPOConfig, PPOTrainer

    cfg = PPOConfig(iterations=args.iterations, modules=args.modules, clip=args.clip, entropy=args.entropy,
                    lr=args.lr, epochs=args.epochs, batch_size=args.batch_size, decay=args.decay,
                    temperature=args.temperature, buckets=args.buckets, seed=args.seed,
                    validate_every=args.validate_every, target_kl=args.target_kl, samples=args.samples)
    return _rollout_trainer(args, "ppo", cfg, PPOTrainer, "PPO")


def cmd_train_flip_gradient(args) -> int:
    from ..training.flip_gradient import FlipGradientConfig, FlipGradientTrainer

    cfg = FlipGradientConfig(iterations=args.iterations, modules=args.modules, flips=args.flips,
                             per_module=args.per_module, credit=args.credit, margin_step=args.margin_step,
                             balanced=args.balanced,
                             hinge=args.hinge, average=args.average, rollback=args.rollback,
                             max_step=args.max_step, buckets=args.buckets, seed=args.seed,
                             validate_every=args.validate_every)

    def make_trainer(policy, train, baseline, out, cfg, *, validation, pool):
        from ..problems.inlining_default import PROBLEM as DEFAULT_INFORMED
        from ..problems.inlining_default.prior import carried_vote_mask
        from ._common import UsageError

        frozen = None
        if args.freeze_vote:
            if policy.problem.name != DEFAULT_INFORMED.name or len(policy.layers) < 2:
                raise UsageError(f"--freeze-vote keeps the heuristic's carried vote of a prior (mlopt policy "
                                 f"default-prior); {args.init} is a {policy.problem.name!r} policy"
                                 + ("" if len(policy.layers) >= 2 else " without a hidden layer"))
            frozen = carried_vote_mask(policy)
        sites = _trace(args.corpus, policy, pool).batches()  # the step's probe (cached trace)
        return FlipGradientTrainer(policy, train, baseline, out, cfg, sites=sites, validation=validation, pool=pool,
                                   frozen=frozen)

    return _rollout_trainer(args, "flip-gradient", cfg, make_trainer, "flip gradient")


def _es_ppo_options(p) -> None:
    p.add_argument("corpus", help="training corpus")
    p.add_argument("--init", required=True, metavar="RUN|NPZ",
                   help="starting policy (a run directory or policy.npz; normally the BC run)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="run directory")
    p.add_argument("--validation", metavar="CORPUS",
                   help="corpus (other packages than training's) the best policy is chosen on")
    p.add_argument("--problem", type=problem_name, help="checked against the starting policy's (default: it)")
    p.add_argument("--hidden", type=int_list, metavar="16,16",
                   help="train a network of these hidden widths, first distilled from --init on the training "
                        "trace (default: --init's own)")
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
    from ._common import UsageError

    if args.min_packages > 1 and args.moves != "callee":
        raise UsageError("--min-packages filters callee moves: use it with --moves callee")
    init, policy = _load_init(args)
    problem = policy.problem
    _check_objective_inputs(problem, args)
    out = Path(args.output)
    run = open_run_dir(args, resumable=False)
    cfg = SearchConfig(evaluations_per_module=args.evaluations, batch=args.batch, max_flips=args.max_flips,
                       max_decisions=args.max_decisions, flip_weights=tuple(args.flip_weights),
                       partitions=args.partitions, epochs=args.epochs, lr=args.lr, seed=args.seed,
                       min_packages=args.min_packages)
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
    train = sub.add_parser("train", help="train policies: bc (imitate the heuristic), es (evolution strategies), ppo, "
                           "flip-gradient (step along measured flips), search (imitate searched trajectories)",
                           description="Train policies; each run writes a run directory.")
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

    es = add_command(tsub, "es", "evolution strategies from a starting policy (e.g. the BC run)",
                     ["mlopt corpus split corpus/ splits/  # train, validation, test: no package on two sides",
                      "mlopt train es splits/train --init runs/bc --validation splits/validation -o runs/es",
                      "mlopt train es splits/train --init runs/bc -o runs/es --resume --iterations 20",
                      "mlopt train es splits/train --init runs/bc --hidden 16,16 -o runs/es-small --force"])
    _es_ppo_options(es)
    es.add_argument("--perturbations", type=positive_int, metavar="PAIRS",
                    help="antithetic pairs per iteration (default: from the parameter count, 4 + 3 ln n halved)")
    es.add_argument("--sigma", type=positive_float, default=0.05, help="relative to each layer's mean |W| (0.05)")
    es.add_argument("--flip-share", type=fraction, metavar="S",
                    help="instead of a fixed --sigma: the sigma at which the perturbations change at least one "
                         "decision in the share S of the training modules (e.g. 0.06; on their trace, the same on "
                         "any machine; --sigma is where the search starts)")
    es.add_argument("--hold-flip-share", action="store_true",
                    help="with --flip-share: hold that share for the whole run; before each iteration sigma moves "
                         "toward it around the current iterate, and the step keeps its length (lr scales with "
                         "sigma). Without it the share grows as call sites gather at the decision boundary")
    es.add_argument("--lr", type=positive_float, default=0.05, help="step size (0.05)")
    es.add_argument("--lr-end", type=positive_float, metavar="LR",
                    help="step-size schedule: from --lr geometrically to LR over --lr-horizon iterations, then LR "
                         "(default: constant --lr)")
    es.add_argument("--lr-horizon", type=positive_int, metavar="N", help="iterations of the --lr-end schedule")
    es.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    es.add_argument("--momentum", type=float, default=0.0, help="sgd momentum (0)")
    es.add_argument("--max-step", type=positive_float, default=1.0, metavar="R",
                    help="cap on the update norm, in perturbation radii sigma*sqrt(n) (1.0)")
    es.add_argument("--shaping", choices=("rank", "zscore"), default="rank",
                    help="normalization of the candidates' values (rank)")
    es.add_argument("--objective", choices=("total", "module-rank"), default="total",
                    help="what the gradient ascends: total bytes over the modules (total), or each candidate's "
                         "mean rank among the candidates module by module (module-rank); selection stays on total")
    es.add_argument("--average", type=fraction, default=0.0, metavar="D",
                    help="the run produces the moving average of its iterates, decay D per iteration (e.g. 0.9; "
                         "validated, kept as best, shipped); training steps are unchanged (default: the last iterate)")
    es.add_argument("--skip-largest", type=fraction, default=0.0, metavar="Q",
                    help="never draw the largest share Q of the training modules: their compiles are most of an "
                         "iteration's time, but on the Debian corpus they also carry what transfers (docs/guide/"
                         "training.md); validation still compiles every module (default: draw all)")
    es.add_argument("--package-power", type=fraction, default=1.0, metavar="A",
                    help="weigh the draw by package: a package's share of the drawn modules grows as its module "
                         "count to the power A (0.5: the square root, 0: every package alike; default 1: modules "
                         "drawn alike, so packages of hundreds of modules make most of every draw)")
    es.add_argument("--top-pairs", type=int, default=0, metavar="B",
                    help="estimate the step from the B pairs whose better candidate ranks highest (ARS's top "
                         "directions; default 0: every pair)")
    es.add_argument("--large-pairs", type=int, default=0, metavar="K",
                    help="compile each drawn large module (the largest --large-share of the training modules, by "
                         "the heuristic's size) by K of the pairs only, ranked among their candidates: the large "
                         "modules are most of an iteration's compile time (needs --objective module-rank; "
                         "default 0: every pair compiles every module)")
    es.add_argument("--large-share", type=float, default=0.05, metavar="Q",
                    help="the share of the training modules --large-pairs counts as large (default 0.05)")
    es.add_argument("--large-extra", type=int, default=0, metavar="E",
                    help="with --large-pairs, E more large modules join every draw (default 0)")
    es.add_argument("--train-layers", type=int, default=0, metavar="K",
                    help="perturb and step only the policy's last K layers, the others keep the starting "
                         "policy's weights (1: the output layer's ~130 weights instead of ~9,500; default 0: all)")
    es.add_argument("--guide", type=positive_int, default=0, metavar="K",
                    help="guided perturbations: the last K gradient estimates span a subspace that holds "
                         "1 - --guide-alpha of each perturbation's variance, so directions the estimates keep "
                         "pointing along are measured by every pair (guided ES; default 0: isotropic)")
    es.add_argument("--guide-alpha", type=fraction, default=0.5, metavar="A",
                    help="the isotropic share of a guided perturbation's variance (0.5)")
    es.add_argument("--project", action="store_true",
                    help="projected estimate (with --objective module-rank): each drawn module's term of the "
                         "estimate keeps only the directions that move the decision margins of its call sites "
                         "some candidate flipped (on the training trace's features); the rest is noise")
    es.add_argument("--line-search", type=step_multiples, metavar="T,T",
                    help="after each estimate, compile a fresh draw of training modules with the iterate moved by "
                         "each multiple T of the step (0 refuses it) and take the best by --objective "
                         "(e.g. 0,0.5,1,2; default: the step as estimated)")
    es.add_argument("--line-search-modules", type=positive_int, metavar="K",
                    help="modules of each --line-search draw (default: --modules)")
    es.add_argument("--modules", type=positive_int, default=16, help="modules per iteration, for every candidate (16)")
    es.add_argument("--modules-per-pair", type=positive_int, metavar="K",
                    help="instead: each antithetic pair draws its own K modules (ml-compiler-opt: 1 module, 100 pairs)")
    _rollout_trainer_options(es)
    es.set_defaults(func=cmd_train_es)

    ppo = add_command(tsub, "ppo", "PPO from a BC warm start, the policy sampling its decisions in rollouts",
                      ["mlopt train ppo splits/train --init runs/bc --validation splits/validation -o runs/ppo",
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
    _rollout_trainer_options(ppo)
    ppo.set_defaults(func=cmd_train_ppo)

    fg = add_command(tsub, "flip-gradient",
                     "step along measured single flips: the call sites nearest the boundary compiled flipped",
                     ["mlopt train flip-gradient splits/train --init prior.npz --validation splits/validation "
                      "-o runs/fg --iterations 60 --validate-every 2",
                      "mlopt train flip-gradient splits/train --init prior.npz -o runs/fg --resume --iterations 90"])
    _es_ppo_options(fg)
    fg.add_argument("--modules", type=positive_int, default=48, help="modules drawn per iteration (48)")
    fg.add_argument("--flips", type=positive_int, default=96,
                    help="call sites compiled flipped per iteration, the draw's nearest the decision boundary (96)")
    fg.add_argument("--per-module", type=positive_int, default=8, metavar="N", help="at most N flips in a module (8)")
    fg.add_argument("--credit", type=positive_float, default=32.0, metavar="UNITS",
                    help="a flip's weight is tanh(objective it saves / UNITS); bytes for the inliner (32)")
    fg.add_argument("--margin-step", type=positive_float, default=1.0, metavar="LOGITS",
                    help="a step moves the flipped sites' margins (logit of inlining minus logit of not) by LOGITS, "
                         "root mean square, to first order (1)")
    fg.add_argument("--hinge", type=float, default=0.0, metavar="LOGITS",
                    help="a site decided the better way by at least LOGITS does not push (a hinge loss; 0: every "
                         "measured flip pushes, and the many that say 'stay' grow every margin)")
    fg.add_argument("--balanced", action="store_true",
                    help="half the flips among the nearest sites the policy inlines, half among those it does not "
                         "(from the heuristic's prior nearly all the nearest are inlined ones)")
    fg.add_argument("--freeze-vote", action="store_true",
                    help="keep the heuristic's vote of a prior (mlopt policy default-prior) fixed: its path's gain "
                         "(80 at margin 20) otherwise makes every step mostly a change of the vote's strength")
    fg.add_argument("--max-step", type=positive_float, default=4.0, metavar="T",
                    help="cap on a step's norm, in the space normalized by each layer's weight scale (4)")
    fg.add_argument("--average", type=fraction, default=0.0, metavar="D",
                    help="the run produces the moving average of its iterates, decay D per iteration (e.g. 0.9; "
                         "0: the last iterate); the steps are the same")
    fg.add_argument("--rollback", type=non_negative_float, default=0.0, metavar="P",
                    help="undo a step that leaves the next draw of modules more than P%% larger than the heuristic "
                         "(e.g. 5; that iteration takes no step; 0: off)")
    _rollout_trainer_options(fg)
    fg.set_defaults(func=cmd_train_flip_gradient)

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
    se.add_argument("--min-packages", type=positive_int, default=1, metavar="N",
                    help="--moves callee: imitate only the moves accepted in at least N packages (1: all)")
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

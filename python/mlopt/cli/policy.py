"""``mlopt policy``: export, compile and check inlining policies."""

from __future__ import annotations

import json
from pathlib import Path

from ._common import UsageError, add_command, int_list, positive_int, problem_name


def cmd_policy_export(args) -> int:
    from ..policy import Vocab
    from ..problems.inlining import InlinePolicy

    if args.problem == "regalloc":
        return _export_regalloc(args)
    if args.problem != "inlining":
        raise UsageError(f"policy export knows --problem inlining and regalloc, not {args.problem}")
    if args.constant is not None:
        policy = InlinePolicy.constant(args.constant, Vocab.load(args.vocab) if args.vocab else None)
    elif args.weights:
        from ..problems import load_weights

        policy = load_weights(args.weights)  # inlining, or inlining with the heuristic's vote (ES's start)
        if not policy.problem.name.startswith("inlining"):
            raise UsageError(f"{args.weights} holds a {policy.problem.name} policy, not an inlining one "
                             "(--problem regalloc exports eviction policies)")
    else:
        if not args.vocab:
            raise UsageError("--random needs --vocab DIR")
        policy = InlinePolicy.random(Vocab.load(args.vocab), hidden=args.hidden, seed=args.seed)
    out = policy.export(args.output, logits_output=args.logits, overwrite=args.force)
    print(f"wrote {out / 'model.tflite'} and {out / 'output_spec.json'}")
    return 0


def _export_regalloc(args) -> int:
    """A random eviction policy (vocab: --vocab, else the generic one) or saved weights."""
    from ..policy import Vocab
    from ..problems import regalloc

    if args.constant is not None:
        raise UsageError("--constant is not defined for --problem regalloc (use --random or --weights)")
    if args.weights:
        from ..problems import load_weights

        policy = load_weights(args.weights)
        if not isinstance(policy, regalloc.EvictionPolicy):
            raise UsageError(f"{args.weights} holds a {policy.problem.name} policy, not a regalloc one")
    else:
        vocab = Vocab.load(args.vocab, features=regalloc.FEATURES) if args.vocab else regalloc.generic_vocab()
        policy = regalloc.EvictionPolicy.random(vocab, hidden=args.hidden, seed=args.seed)
    out = policy.export(args.output, logits_output=args.logits, overwrite=args.force)
    print(f"wrote {out / 'model.tflite'} and {out / 'output_spec.json'}")
    return 0


def cmd_policy_compile(args) -> int:
    from ..policy import compile_policy

    out = compile_policy(args.model, args.output, overwrite=args.force, keep_source=args.keep_source)
    print(f"wrote {out}")
    return 0


def cmd_policy_check(args) -> int:
    if args.problem is None:  # the inlining problem the model's inputs say (as mlopt.load_policy finds it)
        from ..compiler import load_policy as load_inlining_policy

        policy = load_inlining_policy(args.model)
    else:
        from ..problems import load_policy

        policy = load_policy(args.model, args.problem)
    extras = ", ".join(f"{s.name} {s.type} {list(s.shape)}" for s in policy.extra_outputs) or "none"
    problem = policy.problem
    print(f"{Path(args.model)}: {policy.kind} policy for {problem.name}; {len(problem.features)} features "
          f"bound; decision {problem.decision.name}; extra outputs: {extras}")
    if not args.log:
        return 0
    from ..policy.report import decision_report, format_decision_report

    rows = _rows(args.log, problem)
    missing = [n for n in problem.feature_names if n not in rows]
    if missing:
        hint = " (training logs do not record the callee's linkage yet)" if "callee_linkage" in missing else ""
        raise UsageError(f"{', '.join(args.log)}: no {', '.join(missing)} column for this {problem.name} "
                         f"policy{hint}")
    report = decision_report(policy, rows, buckets=args.buckets)
    print(json.dumps(report, indent=2) if args.json else format_decision_report(report, top=args.top))
    return 0


def _rows(paths: list[str], problem) -> dict:
    """Feature and default-decision columns of training logs or trace datasets."""
    import numpy as np

    from ..log import read_log

    # the heuristic's decision once, also where it is an input (inlining-default and -linkage)
    names = list(dict.fromkeys([*problem.feature_names] + ([problem.default_decision.name]
                                                           if problem.default_decision else [])))
    parts: dict[str, list] = {n: [] for n in names}
    for p in paths:
        if p.endswith(".npz"):
            from ..rollouts import TraceDataset

            cols = TraceDataset.load(p).columns
        else:
            cols = read_log(p)
        for n in names:
            if n in cols:
                parts[n].append(np.asarray(cols[n]))
    return {n: np.concatenate(v) for n, v in parts.items() if v}


def _saved_policy(arg: str):
    """(path, network) of a policy's saved weights: a policy.npz, or a run directory holding one."""
    from ..problems import load_weights

    source = Path(arg)
    weights = source / "policy.npz" if source.is_dir() else source
    if not weights.is_file():
        raise UsageError(f"{arg}: no policy weights (a policy.npz or a run directory holding one)")
    return weights, load_weights(weights)


def cmd_policy_default_prior(args) -> int:
    from ..problems.inlining_default.prior import with_default_prior

    weights, policy = _saved_policy(args.policy)
    try:
        prior = with_default_prior(policy, args.margin)
    except ValueError as e:
        raise UsageError(f"{weights}: {e}") from None
    if args.with_linkage:
        from ..problems.inlining_linkage.rule import with_linkage_input

        prior = with_linkage_input(prior)
    out = Path(args.output)
    prior.save(out, overwrite=args.force)
    print(f"wrote {out}: {policy.problem.name} -> {prior.problem.name}, the heuristic's vote {args.margin:g}")
    return 0


def register(sub) -> None:
    from ..problems import DEFAULT

    policy = add_command(sub, "policy", "export, compile and check inlining policies",
                         ["mlopt policy export --vocab vocab/ --random -o model/",
                          "mlopt policy compile model/ -o policy.so", "mlopt policy check policy.so"])
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND", required=True)

    export = add_command(policy_sub, "export", "write a policy as a model directory (model.tflite + output_spec.json)",
                         ["mlopt policy export --vocab vocab/ --random --seed 1 -o model/",
                          "mlopt policy export --constant 0 -o never/",
                          "mlopt policy export --weights policy.npz -o model/",
                          "mlopt policy export --weights run/best/policy.npz -o model/   # ES's best, vote included",
                          "mlopt policy export --problem regalloc --random --seed 3 -o evict3/   # no data needed"])
    export.add_argument("--problem", choices=("inlining", "regalloc"), default="inlining",
                        help="inlining (default) or regalloc (eviction policy; --random without --vocab uses "
                             "generic boundaries)")
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--weights", metavar="NPZ",
                       help="weights saved by a policy's save (inlining, inlining with the heuristic's vote as ES "
                            "trains it, or regalloc with --problem regalloc)")
    which.add_argument("--random", action="store_true",
                       help="random weights (inlining needs --vocab; regalloc takes it optionally)")
    which.add_argument("--constant", type=int, choices=(0, 1), help="always answer 0 or 1")
    export.add_argument("--vocab", metavar="DIR", help="vocab directory (.buckets files)")
    export.add_argument("--hidden", type=int_list, default=(64, 64), metavar="N,N",
                        help="hidden layer sizes for --random (default 64,64)")
    export.add_argument("--seed", type=int, default=0)
    export.add_argument("--logits", action="store_true", help="also output the logits (logged as an extra column)")
    export.add_argument("-o", "--output", required=True, metavar="DIR")
    export.add_argument("--force", action="store_true", help="replace an existing model")
    export.set_defaults(func=cmd_policy_export)

    comp = add_command(policy_sub, "compile", "compile a .tflite policy into a shared object (no LiteRT at run time)",
                       ["mlopt policy compile model/ -o policy.so",
                        "opt-19 -load-pass-plugin=$(mlopt plugin-path --llvm 19) -mlopt-inline-model=policy.so ..."])
    comp.add_argument("model", help=".tflite file or model directory")
    comp.add_argument("-o", "--output", required=True, metavar="SO",
                      help="the .so to write (missing directories are created)")
    comp.add_argument("--force", action="store_true", help="replace an existing output")
    comp.add_argument("--keep-source", action="store_true", help="also write the generated C++ next to it")
    comp.set_defaults(func=cmd_policy_compile)

    prior = add_command(policy_sub, "default-prior",
                        "an inlining policy plus a fixed vote for the heuristic's decision (problem "
                        "inlining-default): a start that decides as -Oz, which ES and PPO can move from",
                        ["mlopt train bc trace.npz -o runs/bc && mlopt policy default-prior runs/bc --margin 20 "
                         "-o prior.npz",
                         "mlopt train es splits/train --init prior.npz --validation splits/validation -o runs/es",
                         "mlopt policy default-prior runs/bc --with-linkage -o start.npz   # for --problem "
                         "inlining-linked"])
    prior.add_argument("policy", help="an inlining policy's weights (.npz) or its run directory")
    prior.add_argument("--margin", type=float, default=20.0,
                       help="the heuristic's vote in logits: the policy differs from the heuristic where the "
                            "original's own margin exceeds half of it (20)")
    prior.add_argument("--with-linkage", action="store_true",
                       help="also take the callee's linkage as an input, at zero weights (problem "
                            "inlining-linkage; it decides the same): the start for --problem inlining-linked")
    prior.add_argument("-o", "--output", required=True, metavar="NPZ")
    prior.add_argument("--force", action="store_true", help="replace an existing output")
    prior.set_defaults(func=cmd_policy_default_prior)

    check = add_command(policy_sub, "check", "load a policy as the plugin would and report what it decides",
                        ["mlopt policy check model/",
                         "mlopt policy check runs/es/policy.so --log trace.npz   # or training logs"])
    check.add_argument("model", help=".tflite file, model directory or compiled .so")
    check.add_argument("--problem", type=problem_name,
                       help=f"whose features (default: the inlining problem the model's inputs say, {DEFAULT} "
                            "or one with the heuristic's decision or the callee's linkage)")
    check.add_argument("--log", action="append", metavar="FILE",
                       help="training log or trace dataset (.npz) to run the policy on (repeatable)")
    check.add_argument("--buckets", type=positive_int, default=4, help="quantile buckets per feature (4)")
    check.add_argument("--top", type=positive_int, default=8, help="features shown, least agreement first (8)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_policy_check)

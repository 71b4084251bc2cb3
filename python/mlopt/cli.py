"""The ``mlopt`` command line.

Exit codes: 0 success, 1 the input or an operation failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from . import __version__
from ._errors import CompileError, LogFormatError, ModuleError, PolicyError
from .log import LogStream, read_log
from .policy_compiler import PolicyCompileError
from .vocab import VocabError

EPILOG = """\
examples:
  mlopt log show inline.log | head
  mlopt log stats inline.log
  mlopt log to-npz inline.log inline.npz
  opt-19 -load-pass-plugin=$(mlopt plugin-path) -mlopt-inline-training-log=x.log \\
      -passes='default<Oz>' in.bc -o out.bc
  CFLAGS="-Oz $(mlopt clang-flags --training-log x.log)"
  mlopt compile corpus/ --model policy.so --threads 2
"""


def _format_value(arr: np.ndarray) -> str:
    # As LLVM's log_reader.py prints: Python str() of each element, joined by ','.
    return ",".join(str(v) for v in arr.reshape(-1).tolist())


def cmd_show(args) -> int:
    with LogStream(args.file) as stream:
        context = None
        shown = 0
        header = stream.header
        if header is None:
            return 0
        for obs in stream:
            if args.context is not None and obs.context != args.context:
                continue
            if obs.context != context:
                context = obs.context
                print(f"context: {context}")
            print(f"observation: {obs.id}")
            for spec in header.features:
                print(f"{spec.name}: {_format_value(obs[spec.name])}")
            if header.score is not None:
                print(f"{header.score.name}: {_format_value(obs.score)}")
            shown += 1
            if args.limit is not None and shown >= args.limit:
                break
    return 0


def _column_stats(name: str, arr: np.ndarray) -> dict:
    flat = arr.reshape(-1)
    if flat.size == 0:
        return {"name": name, "count": 0, "min": None, "mean": None, "max": None}
    values = flat.astype(np.float64)
    return {
        "name": name,
        "count": int(flat.size),
        "min": flat.min().item(),
        "mean": float(values.mean()),
        "max": flat.max().item(),
    }


def cmd_stats(args) -> int:
    log = read_log(args.file, allow_truncated=args.allow_truncated)
    per_context = {name: int(np.count_nonzero(log.context_index == i)) for i, name in enumerate(log.contexts)}
    columns = [_column_stats(s.name, log[i]) for i, s in enumerate(log.features)]
    score = _column_stats(log.score_spec.name, log.score) if log.score_spec is not None else None
    if args.json:
        print(json.dumps({
            "file": str(args.file),
            "bytes": log.input_bytes,
            "observations": len(log),
            "contexts": per_context,
            "features": columns,
            "score": score,
            "advice": json.loads(log.advice_spec.to_json()) if log.advice_spec else None,
            "truncated_bytes": log.truncated_bytes,
        }, indent=2))
        return 0
    print(f"file:          {args.file}")
    print(f"bytes:         {log.input_bytes}")
    print(f"observations:  {len(log)}")
    empty = sum(1 for v in per_context.values() if v == 0)
    print(f"contexts:      {len(log.contexts)}" + (f" ({empty} without observations)" if empty else ""))
    print(f"features:      {len(log.features)}")
    if log.score_spec is not None:
        print(f"score:         {log.score_spec.name} ({log.score_spec.type})")
    if log.advice_spec is not None:
        print(f"advice:        {log.advice_spec.name} ({log.advice_spec.type})")
    if log.truncated_bytes:
        print(f"dropped:       {log.truncated_bytes} bytes of an incomplete last record")
    rows = columns + ([score] if score else [])
    if not rows:
        return 0
    width = max(len(r["name"]) for r in rows)
    print()
    print(f"{'feature':<{width}}  {'type':>8}  {'min':>14}  {'mean':>14}  {'max':>14}")
    types = [s.type for s in log.features] + ([log.score_spec.type] if score else [])
    for r, t in zip(rows, types):
        if r["count"] == 0:
            print(f"{r['name']:<{width}}  {t:>8}  {'-':>14}  {'-':>14}  {'-':>14}")
        else:
            print(f"{r['name']:<{width}}  {t:>8}  {r['min']:>14.6g}  {r['mean']:>14.6g}  {r['max']:>14.6g}")
    return 0


def cmd_to_npz(args) -> int:
    if os.path.exists(args.out) and not args.force:
        raise FileExistsError(f"{args.out} exists (use --force to replace it)")
    log = read_log(args.file, allow_truncated=args.allow_truncated)
    log.to_npz(args.out, overwrite=args.force)
    print(f"wrote {args.out}: {len(log)} observations, {len(log.features)} features")
    return 0


def cmd_plugin_path(args) -> int:
    from .plugin import plugin_path

    print(plugin_path())
    return 0


def cmd_clang_flags(args) -> int:
    from .plugin import clang_flags_string

    if args.model is not None:
        from .policy import load_policy

        load_policy(args.model)  # fail here, not in the middle of a build
    print(clang_flags_string(training_log=args.training_log, model=args.model))
    return 0


def cmd_vocab(args) -> int:
    from .vocab import Vocab

    vocab = Vocab.from_logs(args.logs, num_buckets=args.buckets)
    vocab.save(args.output, overwrite=args.force)
    print(f"wrote {len(vocab.features)} .buckets files ({args.buckets} boundaries each) to {args.output}")
    return 0


def cmd_policy_export(args) -> int:
    from .policy import InlinePolicy
    from .vocab import Vocab

    if args.constant is not None:
        policy = InlinePolicy.constant(args.constant, Vocab.load(args.vocab) if args.vocab else None)
    elif args.weights:
        policy = InlinePolicy.load(args.weights)
    else:
        if not args.vocab:
            print("mlopt: error: --random needs --vocab DIR", file=sys.stderr)
            return 2
        hidden = tuple(int(h) for h in args.hidden.split(",") if h)
        policy = InlinePolicy.random(Vocab.load(args.vocab), hidden=hidden, seed=args.seed)
    policy.export(args.output, logits_output=args.logits, overwrite=args.force)
    print(f"wrote {args.output}/model.tflite and {args.output}/output_spec.json")
    return 0


def cmd_policy_compile(args) -> int:
    from .policy_compiler import compile_policy

    out = compile_policy(args.model, args.output, overwrite=args.force, keep_source=args.keep_source)
    print(f"wrote {out}")
    return 0


def cmd_policy_check(args) -> int:
    from .policy import load_policy

    policy = load_policy(args.model)
    extras = ", ".join(f"{s.name} {s.type} {list(s.shape)}" for s in policy.extra_outputs) or "none"
    print(f"{args.model}: {policy.kind} policy; 38 inliner features bound; extra outputs: {extras}")
    return 0


def _compile_inputs(paths: list[str]):
    from .engine import Module, load_corpus

    modules = []
    for p in paths:
        if os.path.isdir(p):
            modules += load_corpus(p)
        elif os.path.exists(os.path.splitext(p)[0] + ".cmd") and p.endswith(".bc"):
            modules.append(Module.from_corpus(p))
        else:
            modules.append(Module(p))
    return modules


def cmd_compile(args) -> int:
    from .engine import compile_many
    from .policy import load_policy

    if args.threads < 1:
        print("mlopt: error: --threads must be at least 1", file=sys.stderr)
        return 2
    modules = _compile_inputs(args.inputs)
    policy = load_policy(args.model) if args.model else None
    log_paths = []
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        stems = [os.path.splitext(os.path.basename(m.name))[0] for m in modules]
        if len(set(stems)) != len(stems):
            raise FileExistsError("two modules have the same name; their logs would collide in --log-dir")
        log_paths = [os.path.join(args.log_dir, f"{s}.log") for s in stems]
        existing = [p for p in log_paths if os.path.exists(p)]
        if existing and not args.force:
            raise FileExistsError(f"{existing[0]} exists (use --force to replace logs)")
    done = 0
    progress = sys.stderr.isatty() and not args.json

    def finished(i, r):
        nonlocal done
        if log_paths:
            with open(log_paths[i], "wb") as f:
                f.write(r.log_bytes)
        for w in r.warnings:
            print(f"mlopt: warning: {r.module}: {w}", file=sys.stderr)
        done += 1
        if progress:
            print(f"\rcompiled {done}/{len(modules)}", end="", file=sys.stderr, flush=True)

    results = compile_many(modules, policy, args.pipeline, log=bool(args.log_dir), threads=args.threads,
                           on_result=finished)
    if progress:
        print(file=sys.stderr)
    rows = [{"module": r.module, "text_size": r.text_size, "decisions": int(len(r.decisions)),
             "inlined": int(r.decisions.sum()), "default_inlined": int(r.default_decisions.sum())}
            for r in results]
    total = {"modules": len(rows), "text_size": sum(r["text_size"] for r in rows),
             "decisions": sum(r["decisions"] for r in rows), "inlined": sum(r["inlined"] for r in rows)}
    if args.json:
        print(json.dumps({"modules": rows, "total": total}, indent=2))
        return 0
    width = max([len(r["module"]) for r in rows] + [6])
    print(f"{'module':<{width}}  {'.text':>10}  {'decisions':>9}  {'inlined':>7}")
    for r in rows:
        print(f"{r['module']:<{width}}  {r['text_size']:>10}  {r['decisions']:>9}  {r['inlined']:>7}")
    print(f"{'total':<{width}}  {total['text_size']:>10}  {total['decisions']:>9}  {total['inlined']:>7}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlopt",
        description="Machine-learned compiler optimization policies (MLGO) for stock LLVM 19.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mlopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    log = sub.add_parser("log", help="read MLGO training logs and interactive streams",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    log_sub = log.add_subparsers(dest="log_command", metavar="SUBCOMMAND")
    log_sub.required = True

    show = log_sub.add_parser("show", help="print every observation, as LLVM's log_reader.py does",
                              epilog="example:\n  mlopt log show inline.log --limit 3",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("file", help="training log or captured interactive stream")
    show.add_argument("--limit", type=int, help="stop after N observations")
    show.add_argument("--context", help="only observations of this context")
    show.set_defaults(func=cmd_show)

    stats = log_sub.add_parser("stats", help="counts and per-feature min/mean/max",
                               epilog="example:\n  mlopt log stats inline.log --json",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    stats.add_argument("file")
    stats.add_argument("--json", action="store_true", help="machine-readable output")
    stats.add_argument("--allow-truncated", action="store_true",
                       help="drop an incomplete last record instead of failing")
    stats.set_defaults(func=cmd_stats)

    npz = log_sub.add_parser("to-npz", help="save the columns as a numpy .npz archive",
                             epilog="example:\n  mlopt log to-npz inline.log inline.npz",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    npz.add_argument("file")
    npz.add_argument("out", help="output .npz (not replaced unless --force)")
    npz.add_argument("--force", action="store_true", help="replace OUT if it exists")
    npz.add_argument("--allow-truncated", action="store_true",
                     help="drop an incomplete last record instead of failing")
    npz.set_defaults(func=cmd_to_npz)

    path = sub.add_parser("plugin-path", help="print the absolute path of the pass plugin",
                          epilog="example:\n  opt-19 -load-pass-plugin=$(mlopt plugin-path) "
                                 "-mlopt-inline-training-log=x.log -passes='default<Oz>' in.bc -o out.bc",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    path.set_defaults(func=cmd_plugin_path)

    flags = sub.add_parser("clang-flags", help="print clang-19 flags that load the plugin",
                           epilog="examples:\n  clang-19 -Oz $(mlopt clang-flags --training-log x.log) -c a.c\n"
                                  "  clang-19 -Oz $(mlopt clang-flags --model policy_dir) -c a.c",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    flags.add_argument("--training-log", metavar="PATH", help="write a training log of the inliner's decisions")
    flags.add_argument("--model", metavar="PATH",
                       help="inlining policy: .tflite file, model directory or compiled .so (checked now)")
    flags.set_defaults(func=cmd_clang_flags)

    vocab = sub.add_parser("vocab", help="compute feature quantiles (.buckets files) from training logs",
                           epilog="example:\n  mlopt vocab traces/*.log -o vocab/",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    vocab.add_argument("logs", nargs="+", metavar="LOG", help="training logs with the 38 inliner features")
    vocab.add_argument("-o", "--output", required=True, metavar="DIR", help="vocab directory to write")
    vocab.add_argument("--buckets", type=int, default=1000, help="boundaries per feature (default 1000)")
    vocab.add_argument("--force", action="store_true", help="replace existing .buckets files")
    vocab.set_defaults(func=cmd_vocab)

    policy = sub.add_parser("policy", help="export and check inlining policies")
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    policy_sub.required = True
    export = policy_sub.add_parser(
        "export", help="write a policy as a model directory (model.tflite + output_spec.json)",
        epilog="examples:\n  mlopt policy export --vocab vocab/ --random --seed 1 -o model/\n"
               "  mlopt policy export --constant 0 -o never/\n"
               "  mlopt policy export --weights policy.npz -o model/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--weights", metavar="NPZ", help="weights saved by InlinePolicy.save")
    which.add_argument("--random", action="store_true", help="random weights (needs --vocab)")
    which.add_argument("--constant", type=int, choices=(0, 1), help="always answer 0 or 1")
    export.add_argument("--vocab", metavar="DIR", help="vocab directory (.buckets files)")
    export.add_argument("--hidden", default="64,64", help="hidden layer sizes for --random (default 64,64)")
    export.add_argument("--seed", type=int, default=0)
    export.add_argument("--logits", action="store_true", help="also output the logits (logged as an extra column)")
    export.add_argument("-o", "--output", required=True, metavar="DIR")
    export.add_argument("--force", action="store_true", help="replace an existing model")
    export.set_defaults(func=cmd_policy_export)
    comp = policy_sub.add_parser(
        "compile", help="compile a .tflite policy into a shared object (no LiteRT at run time)",
        epilog="example:\n  mlopt policy compile model/ -o policy.so\n"
               "  opt-19 -load-pass-plugin=$(mlopt plugin-path) -mlopt-inline-model=policy.so ...",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    comp.add_argument("model", help=".tflite file or model directory")
    comp.add_argument("-o", "--output", required=True, metavar="SO")
    comp.add_argument("--force", action="store_true", help="replace an existing output")
    comp.add_argument("--keep-source", action="store_true", help="also write the generated C++ next to it")
    comp.set_defaults(func=cmd_policy_compile)
    check = policy_sub.add_parser("check", help="load a policy as the plugin would and report",
                                  epilog="example:\n  mlopt policy check model/",
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("model", help=".tflite file, model directory or compiled .so")
    check.set_defaults(func=cmd_policy_check)

    comp = sub.add_parser(
        "compile", help="compile modules in-process (opt + llc in memory) and report .text sizes",
        description="Optimize and generate code for each module inside this process, as "
                    "opt-19 -passes=PIPELINE + llc-19 -filetype=obj would, with MODEL deciding "
                    "inlining (default: LLVM's heuristic). A directory is read as an "
                    "ml-compiler-opt corpus (corpus_description.json); a .bc with a .cmd next "
                    "to it is compiled as that command line says (-O level, target, relocation model).",
        epilog="examples:\n  mlopt compile lz4.bc brotli.bc\n"
               "  mlopt compile corpus/ --model policy.so --threads 2 --log-dir logs/\n"
               "  mlopt compile x.ll --pipeline 'default<O3>' --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    comp.add_argument("inputs", nargs="+", metavar="MODULE", help=".bc/.ll file or corpus directory")
    comp.add_argument("--model", metavar="PATH", help=".tflite file, model directory or compiled .so")
    comp.add_argument("--pipeline", metavar="P", default=None,
                      help="opt's -passes pipeline (default: default<Oz>, or the corpus element's level)")
    comp.add_argument("--threads", type=int, default=1, metavar="N", help="modules compiled at once")
    comp.add_argument("--log-dir", metavar="DIR", help="write each module's training log to DIR/<module>.log")
    comp.add_argument("--force", action="store_true", help="replace existing logs in --log-dir")
    comp.add_argument("--json", action="store_true", help="machine-readable output")
    comp.set_defaults(func=cmd_compile)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # `mlopt log show big.log | head`: the reader went away; not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (LogFormatError, PolicyError, PolicyCompileError, VocabError, FileExistsError, KeyError,
            ModuleError, CompileError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"mlopt: error: {message}", file=sys.stderr)
        return 1
    except OSError as e:
        # "FILE: No such file or directory" for OS errors; our own message otherwise.
        message = f"{e.filename}: {e.strerror}" if e.strerror and e.filename else str(e)
        print(f"mlopt: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""``mlopt corpus extract|make|fetch|split``: corpora in the layout of LLVM's
mlgo-utils, from a build, from raw bitcode, or the default corpus."""

from __future__ import annotations

import json
import os
import sys

from ._common import UsageError, add_command, fraction, positive_int


def _progress(quiet: bool):
    from ..workers import Progress

    bars: dict[str, Progress] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = Progress(total, stage, quiet=quiet, unit="file")
        bars[stage].update()
        if done == total:
            bars[stage].close()

    return update


def _report(report, args, what: str) -> int:
    summary = report.to_json()
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{what} {summary['extracted']} modules of {summary['objects']} objects into {report.output}")
    if report.skipped:
        print(f"skipped {len(report.skipped)} (reasons in {report.output / 'extract_report.json'}):", file=sys.stderr)
        for s in report.skipped[:10]:
            print(f"  {s['object']}: {s['reason']}", file=sys.stderr)
        if len(report.skipped) > 10:
            print(f"  ... and {len(report.skipped) - 10} more", file=sys.stderr)
    return 0


def cmd_extract(args) -> int:
    from ..corpus import extract_corpus, objects_from_compile_commands, objects_from_list, objects_in_directory

    src = args.input
    if args.input_type == "json" or (args.input_type is None and src.endswith(".json")):
        objects = objects_from_compile_commands(src)
    elif args.input_type == "directory" or (args.input_type is None and os.path.isdir(src)):
        objects = objects_in_directory(src)
    elif args.input_type == "list" or args.input_type is None:
        with open(src, "rb") as f:
            lines = [os.fsdecode(line.strip()) for line in f.read().splitlines() if line.strip()]
        objects = objects_from_list(lines, args.obj_base_dir)
    else:
        raise UsageError(f"unknown input type {args.input_type!r}")
    if not objects:
        raise UsageError(f"{src}: no objects found")
    progress = _progress(args.quiet)
    report = extract_corpus(objects, args.output, cmd_filter=args.cmd_filter, threads=args.threads,
                            force=args.force, on_progress=lambda done, total: progress("extract", done, total))
    return _report(report, args, "extracted")


def cmd_make(args) -> int:
    import shlex

    from ..corpus import make_corpus

    command = shlex.split(args.command) if args.command else []
    names = make_corpus(args.input, args.output, command, force=args.force)
    if args.json:
        print(json.dumps({"output": args.output, "modules": len(names)}))
    else:
        print(f"made a corpus of {len(names)} modules in {args.output}")
    return 0


def cmd_fetch(args) -> int:
    from ..corpus import fetch_corpus

    packages = [p.strip() for p in args.packages.split(",")] if args.packages else None
    report = fetch_corpus(args.output, packages, threads=args.threads, force=args.force,
                          on_progress=_progress(args.quiet))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.output)
    return 0


def cmd_split(args) -> int:
    from ..corpus import split_corpus

    sides = split_corpus(args.corpus, args.output, args.heldout, args.seed, force=args.force)
    summary = {side: len(names) for side, names in sides.items()}
    if args.json:
        print(json.dumps({"output": args.output, **summary}))
    else:
        print(f"{args.output}/train: {summary['train']} modules, {args.output}/heldout: {summary['heldout']} modules")
    return 0


def register(sub) -> None:
    corpus = sub.add_parser("corpus", help="make corpora (mlgo-utils layout): extract, make, fetch, split",
                            description="Corpora in the layout of LLVM's mlgo-utils (extract_ir).")
    csub = corpus.add_subparsers(dest="corpus_command", metavar="COMMAND", required=True)

    ex = add_command(csub, "extract", "extract a corpus from a build made with -Xclang -fembed-bitcode=all",
                     ["mlopt corpus extract build/compile_commands.json corpus/",
                      "mlopt corpus extract build/ corpus/ --cmd-filter '^-Oz$'",
                      "mlopt corpus extract objects.txt corpus/ --obj-base-dir build/"])
    ex.add_argument("input", help="compile_commands.json, a directory of objects, or a file listing objects")
    ex.add_argument("output", help="corpus directory to write")
    ex.add_argument("--input-type", choices=["json", "directory", "list"], help="default: from the input")
    ex.add_argument("--obj-base-dir", metavar="DIR", help="base of relative paths in a list (default: cwd)")
    ex.add_argument("--cmd-filter", metavar="REGEX", help="keep modules with an argument matching REGEX")

    mk = add_command(csub, "make", "make a corpus from a directory of .bc files",
                     ["mlopt corpus make bitcode/ corpus/ --command=-Oz"])
    mk.add_argument("input", help="directory of .bc files")
    mk.add_argument("output", help="corpus directory to write")
    mk.add_argument("--command", metavar="ARGS", default="",
                    help="command line shared by all modules (default: none, clang-19 -Oz -c defaults)")

    fe = add_command(csub, "fetch", "build the default corpus: pinned C and C++ PyPI sdists, clang-19 -Oz",
                     ["mlopt corpus fetch", "mlopt corpus fetch --packages lz4,jsonnet -o small/"])
    fe.add_argument("-o", "--output", metavar="DIR", help="corpus directory (default: in the user cache)")
    fe.add_argument("--packages", metavar="A,B", help="only these packages (see docs/guide/corpora.md)")

    sp = add_command(csub, "split", "split a corpus into train/ and heldout/ (deterministic, by module)",
                     ["mlopt corpus split $(mlopt corpus fetch) splits/ --heldout 0.25"])
    sp.add_argument("corpus")
    sp.add_argument("output", help="directory for train/ and heldout/")
    sp.add_argument("--heldout", type=fraction, default=0.2, metavar="F", help="held-out fraction (0.2)")
    sp.add_argument("--seed", type=int, default=0)

    for p, func in ((ex, cmd_extract), (mk, cmd_make), (fe, cmd_fetch), (sp, cmd_split)):
        if p is not mk and p is not sp:
            p.add_argument("--threads", type=positive_int, metavar="N", help="parallel jobs (default: CPUs)")
        p.add_argument("--force", action="store_true", help="replace an existing corpus description")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument("--json", action="store_true", help="machine-readable summary")
        p.set_defaults(func=func)

"""``mlopt compile``: modules compiled in-process (opt + llc in memory)."""

from __future__ import annotations

import json
import os
import sys

from ..errors import OutputExistsError
from ._common import UsageError, add_command, add_ir2vec_option, positive_int


def _compile_inputs(paths: list[str]):
    from ..corpus import Module, load_corpus

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
    from ..compiler import compile_many

    modules = _compile_inputs(args.inputs)
    for m in modules:
        for note in m.notes:
            print(f"mlopt: note: {note}", file=sys.stderr)
    from ..compiler import load_policy

    policy = load_policy(args.model, ir2vec_vocab=args.ir2vec_vocab) if args.model else None
    log_paths = []
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        stems = [os.path.splitext(os.path.basename(m.name))[0] for m in modules]
        if len(set(stems)) != len(stems):
            raise UsageError("two modules have the same name; their logs would collide in --log-dir")
        log_paths = [os.path.join(args.log_dir, f"{s}.log") for s in stems]
        existing = [p for p in log_paths if os.path.exists(p)]
        if existing and not args.force:
            raise OutputExistsError(existing[0])
    done = 0
    progress = sys.stderr.isatty() and not args.json

    def finished(i, r):
        nonlocal done
        if log_paths:
            try:
                with open(log_paths[i], "wb") as f:
                    f.write(r.log_bytes)
            except OSError as e:  # name the log, e.g. on a full disk; leave no partial log
                if os.path.isfile(log_paths[i]) and not os.path.islink(log_paths[i]):
                    os.unlink(log_paths[i])
                raise OSError(e.errno, e.strerror, log_paths[i]) from None
        for w in r.warnings:
            print(f"mlopt: warning: {r.module}: {w}", file=sys.stderr)
        done += 1
        if progress:
            print(f"\rcompiled {done}/{len(modules)}", end="", file=sys.stderr, flush=True)

    results = compile_many(modules, policy, args.pipeline, log=bool(args.log_dir), threads=args.threads,
                           on_result=finished, ir2vec_vocab=args.ir2vec_vocab)
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


def register(sub) -> None:
    comp = add_command(
        sub, "compile", "compile modules in-process (opt + llc in memory) and report .text sizes",
        ["mlopt compile lz4.bc brotli.bc",
         "mlopt compile corpus/ --model policy.so --threads 2 --log-dir logs/",
         "mlopt compile x.ll --pipeline 'default<O3>' --json"],
        description="Optimize and generate code for each module inside this process, as "
                    "opt-19 -passes=PIPELINE + llc-19 -filetype=obj would, with MODEL deciding "
                    "inlining (default: LLVM's heuristic). A directory is read as an "
                    "ml-compiler-opt corpus (corpus_description.json); a .bc with a .cmd next "
                    "to it is compiled as that command line says (-O level, target, relocation model).")
    comp.add_argument("inputs", nargs="+", metavar="MODULE", help=".bc/.ll file or corpus directory")
    comp.add_argument("--model", metavar="PATH", help=".tflite file, model directory or compiled .so")
    comp.add_argument("--pipeline", metavar="P", default=None,
                      help="opt's -passes pipeline (default: default<Oz>, or the corpus element's level)")
    comp.add_argument("--threads", type=positive_int, default=1, metavar="N", help="modules compiled at once")
    comp.add_argument("--log-dir", metavar="DIR", help="write each module's training log to DIR/<module>.log")
    comp.add_argument("--force", action="store_true", help="replace existing logs in --log-dir")
    comp.add_argument("--json", action="store_true", help="machine-readable output")
    add_ir2vec_option(comp)
    comp.set_defaults(func=cmd_compile)

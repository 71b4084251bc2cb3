"""``mlopt tune CORPUS -o DIR``: search your own full-LTO binaries for the
inlining decisions that shrink each one, written as callee-decision files
the next build applies; ``--check DIR`` says what they still do on a later
build (training/tune.py)."""

from __future__ import annotations

import json
import sys

from ._common import add_command, positive_int


def cmd_tune(args) -> int:
    from ..training.tune import LINK_FLAGS, check_tuned, format_checked, format_tuned, tune_corpus
    from ..workers import make_pool

    say = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    with make_pool(args.workers) as pool:
        if args.check:
            report = check_tuned(args.corpus, args.check, pool=pool)
            print(json.dumps(report, indent=2) if args.json else format_checked(report))
            larger = [m for m, b in report["binaries"].items() if b["with"] > b["without"]]
            if larger and not args.json:
                print(f"\nwarning: the decisions make {len(larger)} binar{'y' if len(larger) == 1 else 'ies'} larger "
                      f"on this build ({', '.join(larger)}): tune it again (mlopt tune {args.corpus} -o "
                      f"{args.check} --force)", file=sys.stderr)
            return 0
        report = tune_corpus(args.corpus, args.output, evaluations=args.evaluations, pool=pool,
                             workers=args.workers, force=args.force, say=say)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(format_tuned(report))
    print(f"\n{report['compiles']} compiles in {report['minutes']:.1f} min (LLVM {report['llvm']}). Build with:\n"
          f"  $(mlopt clang-flags --llvm {report['llvm']} --lto full --callee-decisions {args.output}/%m.txt) "
          f"{LINK_FLAGS}\non the compile and the link line (-ffunction-sections -fdata-sections for any non-LTO "
          "code).")
    return 0


def register(sub) -> None:
    p = add_command(sub, "tune", "search your full-LTO binaries for the inlining decisions that shrink each one "
                    "(linked with --gc-sections --icf=all) and write them for the next build",
                    ["CFLAGS=\"-Oz $(mlopt clang-flags --lto full --save-lto-modules $PWD/modules)\" make   "
                     "# LDFLAGS the same",
                     "mlopt corpus extract modules/ corpus/ --lto && mlopt tune corpus/ -o tuned/",
                     "CFLAGS=\"-Oz $(mlopt clang-flags --lto full --callee-decisions $PWD/tuned/%m.txt)\" make",
                     "mlopt tune corpus-v2/ --check tuned/     # a later release: what still applies"])
    p.add_argument("corpus", help="a full-LTO corpus (mlopt corpus extract MODULES OUT --lto)")
    p.add_argument("-o", "--output", default="mlopt-tuned", metavar="DIR",
                   help="where the decision files go, one per binary (mlopt-tuned)")
    p.add_argument("--evaluations", type=positive_int, default=48, metavar="N",
                   help="compiles (and links) per binary (48)")
    p.add_argument("--check", metavar="DIR", help="no search: the decisions in DIR on this corpus's binaries")
    p.add_argument("--workers", type=positive_int, metavar="N")
    p.add_argument("--force", action="store_true", help="replace an earlier tune in DIR")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tune)

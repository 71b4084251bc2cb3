"""``mlopt demo``: the recipe on the default corpus, end to end (corpus ->
the package rule -> trace -> BC -> ES -> the validation gate -> the test
packages through stock clang with the plugin)."""

from __future__ import annotations

import json
import sys

from ._common import add_command, positive_int


def cmd_demo(args) -> int:
    from dataclasses import replace

    from ..training.demo import BUDGET, REDUCED, format_result, run_demo

    config = replace(REDUCED if args.small else BUDGET, workers=args.workers, seed=args.seed)
    if args.iterations:
        config.iterations = args.iterations
    say = (lambda s: print(s, file=sys.stderr)) if args.json else print
    result = run_demo(args.output, config, small=args.small, force=args.force, say=say, quiet=args.quiet)
    print(json.dumps(result, indent=2) if args.json else format_result(result))
    return 1 if result["verify_with_clang"]["mismatches"] or result["failed"] else 0


def register(sub) -> None:
    demo = add_command(sub, "demo", "the recipe for inlining for size on the default corpus, end to end: "
                       "the package rule, ES, the validation gate",
                       ["python3 -m mlopt demo", "mlopt demo --small -o /tmp/demo   # the reduced mode CI runs"])
    demo.add_argument("-o", "--output", default="mlopt-demo", metavar="DIR", help="where to write (mlopt-demo)")
    demo.add_argument("--small", action="store_true", help="reduced mode: 3 packages, 1 ES iteration (about a minute)")
    demo.add_argument("--iterations", type=positive_int, metavar="N", help="ES iterations (default 8)")
    demo.add_argument("--seed", type=int, default=0, help="of BC and ES (0)")
    demo.add_argument("--workers", type=positive_int, metavar="N")
    demo.add_argument("--force", action="store_true", help="replace an earlier demo in DIR")
    demo.add_argument("--quiet", action="store_true")
    demo.add_argument("--json", action="store_true")
    demo.set_defaults(func=cmd_demo)

"""``mlopt recipe CORPUS``: the recommended recipe for inlining for size on
your own corpus (what ``mlopt demo`` runs on the default one): split by
package, the one-site-linkonce rule, optional training gated on
validation, the test packages scored and checked through stock clang."""

from __future__ import annotations

import json
import sys

from ._common import add_command, add_exclude_option, positive_int


def cmd_recipe(args) -> int:
    from dataclasses import replace
    from pathlib import Path

    from ..corpus import split_corpus
    from ..errors import OutputExistsError
    from ..training.recipe import RecipeConfig, format_recipe, run_recipe
    from .corpus import _assignments, _fractions

    out = Path(args.output)
    if (out / "recipe.json").exists() and not args.force:
        raise OutputExistsError(str(out / "recipe.json"))
    config = replace(RecipeConfig(), train=not args.no_train, workers=args.workers, seed=args.seed)
    if args.iterations:
        config.iterations = args.iterations
    say = (lambda s: print(s, file=sys.stderr)) if args.json else print
    sides = split_corpus(args.corpus, out / "splits", _fractions(args.fractions), by="package", seed=args.seed,
                         assign=_assignments(args.assign), exclude=args.exclude, force=True)
    say("         split by package: " + ", ".join(f"{s} {len(n)} modules" for s, n in sides.items()))
    result = run_recipe(out / "splits", out, config, force=args.force, say=say, quiet=args.quiet,
                        extra={"corpus": str(Path(args.corpus).resolve()), "excluded": list(args.exclude)})
    print(json.dumps(result, indent=2) if args.json else format_recipe(result))
    return 1 if result["verify_with_clang"]["mismatches"] or result["failed"] else 0


def register(sub) -> None:
    p = add_command(sub, "recipe", "the recommended recipe for inlining for size, on your corpus: the package "
                    "rule, training kept only if it beats the rule on validation, test packages checked in clang",
                    ["mlopt recipe corpus/ -o recipe/",
                     "mlopt recipe corpus/ -o recipe/ --no-train            # the rule alone",
                     "mlopt recipe corpus/ -o recipe/ --assign app=test,libfoo.so=validation --exclude vendor"])
    p.add_argument("corpus", help="a corpus whose module names start with their package (or linked binary)")
    p.add_argument("-o", "--output", default="mlopt-recipe", metavar="DIR", help="where to write (mlopt-recipe)")
    p.add_argument("--no-train", action="store_true", help="the rule alone: no trace, BC or ES")
    p.add_argument("--iterations", type=positive_int, metavar="N",
                   help="ES iterations (default 10; ES otherwise at mlopt train es's defaults)")
    p.add_argument("--fractions", default="0.7,0.15,0.15", metavar="T,V,X",
                   help="train,validation,test shares of the packages (0.7,0.15,0.15)")
    p.add_argument("--assign", metavar="PKG=SIDE,...", help="pin packages to sides (train, validation, test)")
    p.add_argument("--seed", type=int, default=0, help="of the split and the training (0)")
    p.add_argument("--workers", type=positive_int, metavar="N")
    p.add_argument("--force", action="store_true", help="replace an earlier recipe run in DIR")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true")
    add_exclude_option(p)
    p.set_defaults(func=cmd_recipe)

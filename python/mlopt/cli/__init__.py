"""The ``mlopt`` command line: one module per command group, each with a
``register(subparsers)``; this module assembles them and runs one.

Exit codes: 0 success, 1 the input or an operation failed (one line:
``mlopt: error: ...``), 2 usage error. Anything else is a bug in mlopt and
shows its traceback.
"""

from __future__ import annotations

import argparse
import sys

from . import cmake, corpus, demo, doctor, log, plugin, policy, recipe, reward, rollouts, train, tune, vocab
from . import compile as compile_cmd
from ._common import run

GROUPS = (log, plugin, vocab, policy, compile_cmd, corpus, cmake, rollouts, train, tune, reward, recipe, demo, doctor)

EPILOG = """\
examples:
  mlopt doctor                                  # what this installation has, per LLVM major
  mlopt demo --small                            # the recipe on the default corpus, end to end
  mlopt recipe corpus/ -o recipe/ --no-train    # the package rule on your corpus, checked in clang
  mlopt log stats inline.log
  opt-19 -load-pass-plugin=$(mlopt plugin-path --llvm 19) -mlopt-inline-training-log=x.log \\
      -passes='default<Oz>' in.bc -o out.bc
  CFLAGS="-Oz $(mlopt clang-flags --training-log x.log)"
  mlopt compile corpus/ --model policy.so --threads 2
  mlopt corpus fetch && mlopt trace $(mlopt corpus fetch --quiet) -o trace.npz
  mlopt eval policy.so corpus/ -o eval/ --verify-with-clang
  mlopt reward trace -o prog.trace -- ./prog && mlopt reward estimate prog.trace ./prog_variant

'mlopt COMMAND --help' shows a command's options and examples.
"""


def _version() -> str:
    from .._native import version

    return version()


class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"mlopt {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlopt",
        description="Machine-learned compiler optimization policies (MLGO) for stock LLVM 19 and 22.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print mlopt's version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error (2); argparse printed why
        return e.code if isinstance(e.code, int) else 2
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())

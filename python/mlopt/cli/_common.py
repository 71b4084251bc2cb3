"""What every ``mlopt`` command shares: building a subcommand with examples,
argument types that reject bad values as usage errors (exit 2), and turning
mlopt's errors into one line (exit 1)."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import MloptError, OutputExistsError


class UsageError(Exception):
    """A command line that cannot be run as given (exit code 2)."""


def add_command(sub, name: str, help: str, examples: list[str], description: str | None = None,
                aliases=()) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with its examples."""
    label = "example" if len(examples) == 1 else "examples"
    parser = sub.add_parser(name, help=help, description=description or help[:1].upper() + help[1:] + ".",
                            epilog=f"{label}:\n" + "\n".join(f"  {e}" for e in examples),
                            formatter_class=argparse.RawDescriptionHelpFormatter, aliases=list(aliases))
    parser.add_argument("--llvm", type=llvm_major, metavar="MAJOR",
                        help="the LLVM major to use (19 or 22; default: $MLOPT_LLVM, else the clang on PATH, "
                             "else the newest built)")
    return parser


def add_ir2vec_option(parser) -> None:
    """``--ir2vec-vocab FILE`` (LLVM 22): the inliner's inputs, logs and
    policies carry IR2Vec's callee/caller embeddings. Passed on as
    $MLOPT_IR2VEC_VOCAB so worker processes use it too."""
    parser.add_argument("--ir2vec-vocab", type=existing_file, metavar="FILE",
                        help="LLVM 22: an IR2Vec vocabulary (seed-embedding JSON); the inliner then also sees "
                             "callee_embedding and caller_embedding")


def add_linked_shares_option(parser) -> None:
    """``--linked-shares FILE``: the packages' table of -Oz COMDAT code the
    linked_share objective (problem inlining-linked) charges by; passed on
    as $MLOPT_LINKED_SHARES so worker processes use it too."""
    parser.add_argument("--linked-shares", metavar="FILE",
                        help="problem inlining-linked: the packages' table of -Oz COMDAT code (.npz); built over "
                             "the training and validation corpora and written to FILE when it does not exist")


def add_package_call_sites_option(parser) -> None:
    """``--package-call-sites FILE``: the packages' table of -Oz call sites
    the one-site-linkonce rule reads (problems/inlining_linked/call_sites.py):
    every policy compile also inlines each ``linkonce_odr`` callee whose only
    call in its package the heuristic declines. Passed on as
    $MLOPT_PACKAGE_CALL_SITES so worker processes use it too."""
    parser.add_argument("--package-call-sites", metavar="FILE",
                        help="also inline every linkonce_odr callee the heuristic declines at the only call in "
                             "its package, by this table of the packages' -Oz call sites (.npz); built over the "
                             "command's corpora and written to FILE when it does not exist")


def add_reward_trace_option(parser) -> None:
    """``--reward-trace TRACE``: the recorded run (``mlopt reward trace``)
    the trace objectives (problems regalloc-trace, regalloc-trace-cycles)
    cost modules by, and ``--reward-cpu``. Passed on as $MLOPT_REWARD_TRACE
    and $MLOPT_REWARD_CPU so worker processes use them too."""
    parser.add_argument("--reward-trace", type=existing_file, metavar="TRACE",
                        help="problems regalloc-trace(-cycles): the recorded run of the program built from the "
                             "corpus (mlopt reward trace) that costs each module's code")
    parser.add_argument("--reward-cpu", metavar="NAME",
                        help="problem regalloc-trace-cycles: llvm-mca's -mcpu for the cycles (default: this host)")


def add_exclude_option(parser) -> None:
    """``--exclude A,B``: packages (module names ``PKG/...``) kept out of
    what the command builds or trains on, so an evaluation can use them."""
    parser.add_argument("--exclude", type=package_list, default=(), metavar="PKG,...",
                        help="leave these packages' modules out (kept out of training for a later evaluation)")


def package_list(text: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [n for n in names if "/" in n or n.startswith(".")]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0]!r} is not a package name")
    return names


def problem_name(text: str) -> str:
    """A registered problem's name (``inlining``, ``inlining-ir2vec:75``)."""
    from ..problems import is_problem_name, names

    if not is_problem_name(text):
        raise argparse.ArgumentTypeError(f"no optimization problem {text!r} (known: {', '.join(names())})")
    return text


def existing_file(text: str) -> str:
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return os.path.abspath(text)


def existing_path(text: str) -> str:
    """A file or directory that exists (a policy: .so, .tflite or a model directory)."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text}: no such file or directory")
    return os.path.abspath(text)


def llvm_major(text: str) -> int:
    from .._native import check_llvm
    from ..errors import NativeModuleError

    try:
        return check_llvm(text)
    except NativeModuleError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _number(text: str, convert, noun: str):
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None


def positive_int(text: str) -> int:
    value = _number(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float, "a number")
    if not value > 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be positive, not {value}")
    return value


def fraction(text: str) -> float:
    """A number strictly between 0 and 1."""
    value = _number(text, float, "a number")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {value}")
    return value


def _positive_list(text: str, convert, what: str, example: str, allow_empty: bool) -> tuple:
    """Comma-separated positive values (``what``: "sizes", "numbers")."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = tuple(convert(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated {what} like {example}, got {text!r}") from None
    if (not values and not allow_empty) or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"{what} must be {'at least 1' if convert is int else 'positive'}, "
                                         f"got {text!r}")
    return values


def int_list(text: str) -> tuple[int, ...]:
    """``64,64`` -> (64, 64); every entry a positive integer."""
    return _positive_list(text, int, "sizes", "64,64", allow_empty=True)  # "": no hidden layer


def float_list(text: str) -> tuple[float, ...]:
    """``1,4,16`` -> (1.0, 4.0, 16.0); every entry a positive number."""
    return _positive_list(text, float, "numbers", "1,4,16", allow_empty=False)


def error_line(e: BaseException) -> str:
    """The one-line message for an error the user can act on."""
    if isinstance(e, OutputExistsError):
        return f"{e.path} exists (use --force to replace it)"
    # "FILE: No such file or directory" for OS errors; our own message otherwise.
    if isinstance(e, OSError) and not isinstance(e, MloptError) and e.strerror and e.filename:
        return f"{e.filename}: {e.strerror}"
    return str(e)


def run(func, args) -> int:
    """Runs a command: MloptError/OSError -> one line and exit 1, usage -> 2.
    ``--llvm`` is passed on as $MLOPT_LLVM, so worker processes use it too."""
    llvm = getattr(args, "llvm", None)
    if llvm is not None:
        os.environ["MLOPT_LLVM"] = str(llvm)
    vocab = getattr(args, "ir2vec_vocab", None)
    if vocab is not None:
        os.environ["MLOPT_IR2VEC_VOCAB"] = vocab
    trace = getattr(args, "reward_trace", None)
    if trace is not None:
        os.environ["MLOPT_REWARD_TRACE"] = os.path.abspath(trace)
    shares = getattr(args, "linked_shares", None)
    if shares is not None:  # the workers read it lazily: the table may be built after they start
        os.environ["MLOPT_LINKED_SHARES"] = os.path.abspath(shares)
    sites = getattr(args, "package_call_sites", None)
    if sites is not None:  # the workers read it lazily: the table may be built after they start
        os.environ["MLOPT_PACKAGE_CALL_SITES"] = os.path.abspath(sites)
    cpu = getattr(args, "reward_cpu", None)
    if cpu is not None:
        os.environ["MLOPT_REWARD_CPU"] = cpu
    try:
        return func(args)
    except BrokenPipeError:
        # `mlopt log show big.log | head`: the reader went away; not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except UsageError as e:
        print(f"mlopt: error: {e}", file=sys.stderr)
        return 2
    except (MloptError, OSError) as e:
        print(f"mlopt: error: {error_line(e)}", file=sys.stderr)
        return 1

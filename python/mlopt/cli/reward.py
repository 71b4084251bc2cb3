"""``mlopt reward``: the trace-based speed reward (build flags, recording a
program's basic-block trace, estimating a variant binary from it)."""

from __future__ import annotations

import argparse
import json
import sys

from ._common import UsageError, add_command


def _llvm(args) -> int:
    from ..reward.flags import SUPPORTED_LLVM

    llvm = args.llvm if args.llvm is not None else SUPPORTED_LLVM[0]
    if llvm not in SUPPORTED_LLVM:
        raise UsageError(f"the trace reward supports --llvm {', '.join(map(str, SUPPORTED_LLVM))}, not {llvm}")
    return llvm


def cmd_build_flags(args) -> int:
    import shlex

    from ..reward import build_flags

    print(shlex.join(build_flags(_llvm(args))))
    return 0


def cmd_trace(args) -> int:
    import os

    from ..errors import OutputExistsError
    from ..reward import record

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no program given (mlopt reward trace -o TRACE -- PROGRAM [ARGS...])")
    if os.path.exists(args.output) and not args.force:
        raise OutputExistsError(args.output, "pass --force to replace it")
    trace = record(command[0], command[1:], llvm=_llvm(args), order=False if args.no_order else None)
    trace.save(args.output, overwrite=args.force)
    blocks = int((trace.arrays["count"] > 0).sum())
    order = (f"{len(trace.arrays['path_count'])} distinct paths over {trace.order_entries} block entries"
             if trace.has_order else "no block order (cycles: per-block model)")
    print(f"wrote {args.output}: {trace.total_instructions} instructions ({trace.outside_instructions} outside "
          f"the {len(trace.functions)} mapped functions), {blocks} blocks executed, {order}, program exit "
          f"{trace.exit_code}, {trace.record_seconds:.2f} s under valgrind", file=sys.stderr)
    if trace.order_count_mismatch:
        print(f"warning: the ordered run entered {trace.order_count_mismatch} blocks a different number of times "
              "than the counted run (the program does not repeat its run exactly)", file=sys.stderr)
    return 0


def cmd_estimate(args) -> int:
    from ..reward import Trace, estimate

    trace = Trace.load(args.trace)
    e = estimate(trace, args.binary, cpu=args.cpu, cycles=not args.no_cycles, llvm=_llvm(args),
                 trace_name=args.trace)
    if args.json:
        print(json.dumps(e.to_json(), indent=2))
        return 0
    print(f"instructions  {e.instructions}")
    if e.cycles is not None:
        how = (f"{e.paths_costed} paths as run, the rest by block" if e.cycles_model == "path"
               else "block by block")
        print(f"cycles        {e.cycles:.0f}  (llvm-mca -mcpu={e.cpu}; {how}; {e.blocks_costed} blocks, "
              f"{e.mca_fallbacks} fallbacks)")
    print(f"functions     {e.executed_functions} of {e.functions} executed; CFG differs from the traced build "
          f"in {len(e.cfg_differs)} ({100 * e.cfg_differs_share:.1f}%, {100 * e.cfg_differs_instruction_share:.2f}% "
          f"of traced instructions){': ' + e.treatment if e.cfg_differs else ''}")
    if e.cfg_differs:
        print("              " + ", ".join(e.cfg_differs[:10]) + (" ..." if len(e.cfg_differs) > 10 else ""))
    print(f"time          {e.seconds:.2f} s")
    return 0


def register(sub) -> None:
    reward = add_command(sub, "reward", "trace-based speed reward: record a run once, estimate variants",
                         ["clang-19 -O2 $(mlopt reward build-flags) prog.c -o prog",
                          "mlopt reward trace -o prog.trace -- ./prog input.txt",
                          "mlopt reward estimate prog.trace ./prog_variant --json"])
    rsub = reward.add_subparsers(dest="reward_command", metavar="SUBCOMMAND", required=True)

    flags = add_command(rsub, "build-flags", "print the clang flags of a traceable build (BB address map, "
                        "CFG-preserving options), one line",
                        ["clang-19 -O2 $(mlopt reward build-flags) prog.c -o prog",
                         "clang-19 -O2 $(mlopt reward build-flags) $(mlopt clang-flags --llvm 19 "
                         "--regalloc-model evict.so) prog.c -o prog_evict"])
    flags.set_defaults(func=cmd_build_flags)

    trace = add_command(rsub, "trace", "run a program once under valgrind and record its basic-block trace",
                        ["mlopt reward trace -o prog.trace -- ./prog input.txt",
                         "mlopt reward trace -o lz4.trace --force -- ./codec_bench 1"])
    trace.add_argument("-o", "--output", required=True, metavar="TRACE", help="the trace file to write (.npz)")
    trace.add_argument("--force", action="store_true", help="replace an existing trace file")
    trace.add_argument("--no-order", action="store_true",
                       help="count blocks only (one run under callgrind); by default a second run under mlopt's "
                            "valgrind tool keeps the blocks' order for the path cycles model")
    trace.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]",
                       help="the program (built with 'mlopt reward build-flags') and its arguments")
    trace.set_defaults(func=cmd_trace)

    est = add_command(rsub, "estimate", "predict instructions and cycles of the traced run for a variant binary",
                      ["mlopt reward estimate prog.trace ./prog_variant",
                       "mlopt reward estimate prog.trace ./prog_variant --cpu skylake --json"])
    est.add_argument("trace", help="a trace written by 'mlopt reward trace'")
    est.add_argument("binary", help="a variant of the traced program (same flags, other eviction decisions)")
    est.add_argument("--cpu", metavar="NAME", help="llvm-mca's -mcpu (default: this host's CPU)")
    est.add_argument("--no-cycles", action="store_true", help="count instructions only (no llvm-mca)")
    est.add_argument("--json", action="store_true", help="print the estimate as JSON")
    est.set_defaults(func=cmd_estimate)

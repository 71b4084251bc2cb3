"""``mlopt plugin-path`` and ``mlopt clang-flags``: use the pass plugin from
stock opt and clang (``--llvm 22`` for opt-22 / clang-22)."""

from __future__ import annotations

import os
from pathlib import Path

from ._common import UsageError, add_command, add_ir2vec_option


def cmd_plugin_path(args) -> int:
    from ..compiler.plugin import plugin_path

    print(plugin_path())
    return 0


def cmd_clang_flags(args) -> int:
    from ..compiler import load_policy
    from ..compiler.plugin import clang_flags_string

    if args.model is not None:
        load_policy(args.model, ir2vec_vocab=args.ir2vec_vocab)  # fail here, not in the middle of a build
    if args.regalloc_model is not None:
        load_policy(args.regalloc_model, problem="regalloc")
    log = args.training_log
    if log is not None and os.path.isdir(log) and not log.endswith("/"):
        log += "/"  # an existing directory: one log per translation unit
    if args.lto is not None:
        import shutil

        from .._native import resolve_llvm

        major = resolve_llvm(args.llvm)
        if shutil.which(f"ld.lld-{major}") is None and not os.path.exists(f"/usr/lib/llvm-{major}/bin/ld.lld"):
            raise UsageError(f"--lto links with lld, and ld.lld-{major} is not installed (apt-get install lld-{major})")
    if args.lto is not None and log is not None and not log.endswith("/") and "%m" not in log:
        raise UsageError(f"--training-log {log}: with --lto the compile and the link each write a log; give a "
                         "directory (ending in '/') or a pattern with %m")
    if args.replay is not None and "%m" not in args.replay:
        decisions = open(args.replay, "rb").read() if os.path.isfile(args.replay) else None
        if decisions is None:
            raise UsageError(f"--replay {args.replay}: no such file")
        bad = next((i for i, c in enumerate(decisions) if c not in b"01 \t\r\n"), None)
        if bad is not None:
            raise UsageError(f"--replay {args.replay}: byte {bad} is not a decision ('0' or '1') nor whitespace")
    if args.callee_decisions is not None and "%m" in args.callee_decisions:  # one file per module (mlopt tune)
        pattern = Path(args.callee_decisions)
        if "%m" in str(pattern.parent) or not pattern.parent.is_dir():
            raise UsageError(f"--callee-decisions {args.callee_decisions}: %m must be in the file name of an "
                             "existing directory")
        for path in sorted(pattern.parent.glob(pattern.name.replace("%m", "*"))):
            _check_callee_decisions(str(path))
    elif args.callee_decisions is not None:
        _check_callee_decisions(args.callee_decisions)
    try:
        text = clang_flags_string(training_log=log, model=args.model, overwrite_log=args.overwrite_log,
                                  ir2vec_vocab=args.ir2vec_vocab, regalloc_model=args.regalloc_model,
                                  replay=args.replay, callee_decisions=args.callee_decisions, lto=args.lto,
                                  llvm=args.llvm, save_lto_modules=args.save_lto_modules)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(text)
    return 0


def _check_callee_decisions(path: str) -> None:
    """The plugin's -mlopt-inline-callee-decisions format, checked before a build (UsageError naming the line)."""
    try:
        lines = open(path, "rb").read().split(b"\n")
    except OSError as e:
        raise UsageError(f"--callee-decisions {path}: {e.strerror or e}") from None
    for number, line in enumerate(lines, 1):
        line = line.rstrip(b"\r")
        if not line or line.startswith(b"#"):
            continue
        if len(line) < 3 or line[:1] not in (b"0", b"1") or line[1:2] != b" " or any(c in line[2:] for c in b" \t"):
            raise UsageError(f"--callee-decisions {path}: line {number} is not \"<0|1> <callee name>\"")


def register(sub) -> None:
    path = add_command(sub, "plugin-path", "print the absolute path of the pass plugin",
                       ["opt-19 -load-pass-plugin=$(mlopt plugin-path --llvm 19) -mlopt-inline-training-log=x.log "
                        "-passes='default<Oz>' in.bc -o out.bc",
                        "opt-22 -load-pass-plugin=$(mlopt plugin-path --llvm 22) -passes='default<Oz>' a.bc -o b.bc"])
    path.set_defaults(func=cmd_plugin_path)

    flags = add_command(sub, "clang-flags", "print clang flags that load the plugin",
                        ["clang-19 -Oz $(mlopt clang-flags --llvm 19 --training-log x.log) -c a.c",
                         'make CC=clang-19 CFLAGS="-Oz $(mlopt clang-flags --llvm 19 --training-log logs/)"'
                         "   # logs/src_a.c.log, ...",
                         "clang-19 -Oz $(mlopt clang-flags --llvm 19 --model policy_dir) -c a.c",
                         "clang-19 -O2 $(mlopt clang-flags --llvm 19 --regalloc-model evict.so) -c a.c",
                         "clang-22 -Oz $(mlopt clang-flags --llvm 22 --model policy.so) -c a.c",
                         "clang-22 -Oz $(mlopt clang-flags --llvm 22 --ir2vec-vocab v.json --training-log l/) -c a.c",
                         "clang-19 -Oz $(mlopt clang-flags --llvm 19 --model policy.so --replay found.txt) -c a.c",
                         "clang++-19 -Oz $(mlopt clang-flags --llvm 19 --callee-decisions rules/pkg.txt) -c a.cc"
                         "   # mlopt corpus call-sites ... --callee-decisions rules/",
                         'F="$(mlopt clang-flags --llvm 19 --lto full --training-log $PWD/logs/)"; '
                         "clang-19 -Oz $F -c a.c b.c && clang-19 -Oz $F a.o b.o -o prog"
                         "   # logs/a.c.log, logs/b.c.log (compile), logs/prog.lto.log (link)",
                         'cmake -DCMAKE_C_COMPILER=clang-19 -DCMAKE_C_FLAGS="-Oz $(mlopt clang-flags --llvm 19 '
                         '--lto thin --model policy.so)" ..   # ThinLTO in lld, the policy in every backend'])
    flags.add_argument("--training-log", metavar="PATH",
                       help="write a training log of the inliner's decisions: a file, a directory (one "
                            "<module>.log per translation unit) or a pattern with %%m (module) / %%p (pid); "
                            "an existing log is an error")
    flags.add_argument("--overwrite-log", action="store_true", help="replace existing training logs")
    flags.add_argument("--model", metavar="PATH",
                       help="inlining policy: .tflite file, model directory or compiled .so (checked now)")
    flags.add_argument("--regalloc-model", metavar="PATH",
                       help="register-allocation eviction policy: .tflite file, model directory or compiled .so "
                            "(checked now)")
    flags.add_argument("--replay", metavar="PATH",
                       help="force the inliner's first decisions to this file's 0/1 characters (e.g. a sequence "
                            "found by search); %%m: one file per module; checked now")
    flags.add_argument("--callee-decisions", metavar="PATH",
                       help="every site calling a function this file names gets its decision (\"<0|1> <name>\" "
                            "lines; a package's one-site-linkonce rule from `mlopt corpus call-sites "
                            "--callee-decisions`); %%m: one file per module (mlopt tune writes DIR/%%m.txt), a "
                            "module without one keeps its decisions; checked now")
    flags.add_argument("--lto", choices=("full", "thin"),
                       help="flags for an LTO build, the same on the compile and the link line: -flto=MODE "
                            "-fuse-ld=lld, the plugin in the compile and in lld's LTO backends (link-time logs "
                            "are named after the output: logs/prog.lto.log, logs/prog.thinlto/<source>.log)")
    flags.add_argument("--save-lto-modules", metavar="DIR",
                       help="with --lto: save every module lld's LTO backends optimize, with the link's facts, in "
                            "DIR (mlopt corpus extract DIR CORPUS --lto makes an LTO corpus of them)")
    add_ir2vec_option(flags)
    flags.set_defaults(func=cmd_clang_flags)

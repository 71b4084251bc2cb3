"""``mlopt cmake flags|build|report``: a CMake project rebuilt with mlopt's
plugin, per target, and what it changed in each linked binary.

- ``flags BUILD --rules DIR [--model POLICY] -o OUT``: from the build the
  corpus was captured from (``mlopt corpus extract BUILD CORPUS --cmake``)
  and the rule files of its binaries (``mlopt corpus call-sites CORPUS
  --callee-decisions DIR``), writes ``OUT/mlopt.cmake`` for
  ``-DCMAKE_PROJECT_INCLUDE=OUT/mlopt.cmake`` and ``OUT/decisions/<target>.txt``.
  The include defers to the end of the top directory's ``CMakeLists.txt``
  and gives each target its own ``target_compile_options``: the plugin of
  the build's LLVM major and the decisions of the binaries the target's
  objects link into (a static library linked into several binaries gets
  the decisions all of them agree on). It stops the configure with one
  line when the compiler is not that major's clang.
- ``build BUILD``: ``cmake --build BUILD --clean-first``, timed (the CPU
  time of every process the build ran); writes ``BUILD/mlopt-build.json``.
- ``report BEFORE AFTER``: each linked binary's ``.text`` (read from the
  ELF files) in the two builds of one project, and their build CPU time
  when ``mlopt cmake build`` built them. The binaries are those of the
  first build with a File API reply, at the same place in the other.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ._common import UsageError, add_command, positive_int

BUILD_RECORD = "mlopt-build.json"


def _cmake_string(text: str) -> str:
    """``text`` as a quoted CMake argument."""
    for a, b in (("\\", "\\\\"), ('"', '\\"'), ("$", "\\$"), (";", "\\;")):
        text = text.replace(a, b)
    return f'"{text}"'


def _read_decisions(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _target_decisions(rules: Path, packages: list[str]) -> list[str]:
    """The decision lines every one of ``packages``' rule files has (in the first one's order)."""
    files = []
    for p in packages:
        path = rules / f"{p}.txt"
        if not path.is_file():
            raise UsageError(f"--rules {rules}: no {p}.txt (mlopt corpus call-sites CORPUS -o sites.npz "
                             f"--callee-decisions {rules}/ writes one per binary of a corpus extracted with --cmake)")
        files.append(_read_decisions(path))
    common = set(files[0]).intersection(*files[1:]) if files else set()
    return [line for line in files[0] if line in common] if files else []


def cmd_flags(args) -> int:
    from ..compiler import load_policy
    from ..compiler.plugin import clang_flags
    from ..corpus.cmake import compiler_major, read_build

    if args.rules is None and args.model is None:
        raise UsageError("give --rules DIR (the one-site-linkonce rule's files), --model POLICY, or both")
    build = read_build(args.build)
    major = compiler_major(args.build)
    if args.llvm is not None and args.llvm != major:
        raise UsageError(f"--llvm {args.llvm}: {args.build} is built by LLVM {major}'s clang, which loads only "
                         f"LLVM {major}'s plugin (pass --llvm {major})")
    if args.model is not None:
        load_policy(args.model)  # fail here, not in the middle of a build
    out = Path(args.output).resolve()
    include = out / "mlopt.cmake"
    if include.exists() and not args.force:
        raise UsageError(f"{include} exists (--force replaces it)")
    (out / "decisions").mkdir(parents=True, exist_ok=True)
    rules = Path(args.rules) if args.rules is not None else None
    lines, summary = [], []
    for target, packages in sorted(build.binaries_of().items()):
        decisions = None
        if rules is not None:
            chosen = _target_decisions(rules, packages)
            decisions = out / "decisions" / f"{target}.txt"
            decisions.write_text(f"# {target}: the decisions of {', '.join(packages)} ({rules})\n"
                                 + "".join(f"{line}\n" for line in chosen))
            summary.append({"target": target, "binaries": packages, "decisions": len(chosen),
                            "file": str(decisions)})
            if not chosen:
                decisions = None
        else:
            summary.append({"target": target, "binaries": packages, "decisions": 0, "file": None})
        if decisions is None and args.model is None:
            continue  # nothing to change: stock clang compiles it
        flags = clang_flags(llvm=major, model=args.model, callee_decisions=decisions)
        lines.append(f"  _mlopt_flags({_cmake_string(target)} {_cmake_string('SHELL:' + shlex.join(flags))})")
    include.write_text(_INCLUDE.format(source=build.build_dir, major=major, body="\n".join(lines)))
    if args.json:
        print(json.dumps({"include": str(include), "llvm": major, "targets": summary}, indent=2))
    else:
        for s in summary:
            print(f"{s['target']}: {s['decisions']} decisions ({', '.join(s['binaries'])})")
        print(f"configure with -DCMAKE_PROJECT_INCLUDE={include}")
    return 0


_INCLUDE = """\
# Generated by `mlopt cmake flags` from the build in {source}: mlopt's
# plugin for LLVM {major}, per target. Use it at configure time:
#   cmake -S SOURCE -B BUILD -DCMAKE_PROJECT_INCLUDE=<this file> ...
include_guard(GLOBAL)
if(CMAKE_VERSION VERSION_LESS 3.19)
  message(FATAL_ERROR "mlopt: ${{CMAKE_CURRENT_LIST_FILE}} needs CMake 3.19 or newer (cmake_language(DEFER))")
endif()
foreach(_mlopt_lang C CXX)
  if(CMAKE_${{_mlopt_lang}}_COMPILER_LOADED AND NOT (CMAKE_${{_mlopt_lang}}_COMPILER_ID STREQUAL "Clang"
     AND CMAKE_${{_mlopt_lang}}_COMPILER_VERSION MATCHES "^{major}[.]"))
    message(FATAL_ERROR "mlopt: ${{CMAKE_CURRENT_LIST_FILE}} loads LLVM {major}'s plugin, but the ${{_mlopt_lang}} "
            "compiler is ${{CMAKE_${{_mlopt_lang}}_COMPILER_ID}} ${{CMAKE_${{_mlopt_lang}}_COMPILER_VERSION}} "
            "(configure with clang-{major}, or make the flags with --llvm for this compiler)")
  endif()
endforeach()

function(_mlopt_flags target flags)
  if(TARGET ${{target}})
    target_compile_options(${{target}} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:${{flags}}>")
  else()
    message(WARNING "mlopt: no target ${{target}} in this project (flags made from another build?)")
  endif()
endfunction()

function(_mlopt_apply)
{body}
endfunction()

# After the top CMakeLists.txt, when every target exists.
cmake_language(DEFER DIRECTORY "${{CMAKE_SOURCE_DIR}}" CALL _mlopt_apply)
"""


def _cpu_of_children() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cmd_build(args) -> int:
    build = Path(args.build)
    if not (build / "CMakeCache.txt").is_file():
        raise UsageError(f"{build}: not a configured CMake build directory (no CMakeCache.txt)")
    command = ["cmake", "--build", str(build), "--clean-first", *(["-j", str(args.jobs)] if args.jobs else [])]
    cpu, wall = _cpu_of_children(), time.monotonic()
    r = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cpu, wall = _cpu_of_children() - cpu, time.monotonic() - wall
    if r.returncode != 0:
        sys.stderr.write(r.stdout.decode(errors="replace")[-4000:])
        raise UsageError(f"{' '.join(command)} failed (exit code {r.returncode})")
    record = {"command": command, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
    (build / BUILD_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        print(f"{build}: built in {wall:.1f} s, {cpu:.1f} s CPU ({' '.join(command)}); {build / BUILD_RECORD}")
    return 0


def _text_size(path: Path) -> int:
    from ..corpus.elf import read_sections

    return len(read_sections(path, {".text"}).get(".text", b""))


def _delta(before: float, after: float) -> str:
    return f"{(after - before) / before * 100:+.2f}%" if before else "—"


def report(before: str | os.PathLike, after: str | os.PathLike) -> dict:
    """Per linked binary: its files and ``.text`` in the two builds; their build CPU time when recorded."""
    from ..corpus.cmake import has_reply, linked_binaries

    # The binaries of one build with a File API reply, at the same place in the other (one project, two builds).
    known = next((Path(b) for b in (before, after) if has_reply(b)), None)
    if known is None:
        raise UsageError(f"neither {before} nor {after} has a CMake File API reply, which names the binaries: "
                         f"write an empty file {Path(before) / '.cmake/api/v1/query/codemodel-v2'} and run cmake "
                         f"-B {before} again")
    binaries = {name: path.relative_to(known.resolve()) for name, path in linked_binaries(known).items()}
    rows = []
    for name, relative in binaries.items():
        old, new = Path(before).resolve() / relative, Path(after).resolve() / relative
        for p in (old, new):
            if not p.is_file():
                raise UsageError(f"{p}: not built (run cmake --build, or mlopt cmake build)")
        a, b = _text_size(old), _text_size(new)
        rows.append({"binary": name, "before": str(old), "after": str(new), "text_before": a, "text_after": b,
                     "delta": b - a})
    total = {"text_before": sum(r["text_before"] for r in rows), "text_after": sum(r["text_after"] for r in rows)}
    total["delta"] = total["text_after"] - total["text_before"]
    cpu = {}
    for side, build in (("before", before), ("after", after)):
        record = Path(build) / BUILD_RECORD
        cpu[side] = json.loads(record.read_text())["cpu_s"] if record.is_file() else None
    return {"binaries": rows, "total": total, "build_cpu_s": cpu}


def cmd_report(args) -> int:
    data = report(args.before, args.after)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    rows = [(r["binary"], str(r["text_before"]), str(r["text_after"]), _delta(r["text_before"], r["text_after"]))
            for r in data["binaries"]]
    t = data["total"]
    rows.append(("all binaries", str(t["text_before"]), str(t["text_after"]),
                 _delta(t["text_before"], t["text_after"])))
    cpu = data["build_cpu_s"]
    if cpu["before"] is not None and cpu["after"] is not None:
        rows.append(("build CPU s", f"{cpu['before']:.2f}", f"{cpu['after']:.2f}", _delta(cpu["before"], cpu["after"])))
    header = (".text (bytes)", args.before, args.after, "delta")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for i, r in enumerate([header, *rows]):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    if cpu["before"] is None or cpu["after"] is None:
        print("(build CPU time: build both with `mlopt cmake build BUILD`)")
    return 0


def register(sub) -> None:
    cmake = sub.add_parser("cmake", help="rebuild a CMake project with the plugin per target; .text per binary",
                           description="A CMake project rebuilt with mlopt's plugin (docs/guide/your-project.md).")
    csub = cmake.add_subparsers(dest="cmake_command", metavar="COMMAND", required=True)

    fl = add_command(csub, "flags", "write a CMake include (-DCMAKE_PROJECT_INCLUDE) giving each target the plugin "
                     "and its binaries' decisions",
                     ["mlopt cmake flags build-capture --llvm 19 --rules rules/ -o rebuild/",
                      "mlopt cmake flags build-capture --llvm 19 --rules rules/ --model policy.so -o rebuild/",
                      "cmake -S . -B build-rule -DCMAKE_CXX_FLAGS=-Oz "
                      "-DCMAKE_PROJECT_INCLUDE=$PWD/rebuild/mlopt.cmake"])
    fl.add_argument("build", help="the CMake build the corpus was extracted from (mlopt corpus extract --cmake)")
    fl.add_argument("--rules", metavar="DIR",
                    help="the binaries' rule files (mlopt corpus call-sites CORPUS --callee-decisions DIR)")
    fl.add_argument("--model", metavar="POLICY", help="also decide the other call sites with this policy")
    fl.add_argument("-o", "--output", required=True, metavar="DIR",
                    help="where mlopt.cmake and decisions/<target>.txt go")
    fl.add_argument("--force", action="store_true", help="replace an existing mlopt.cmake")
    fl.add_argument("--json", action="store_true", help="machine-readable summary")
    fl.set_defaults(func=cmd_flags)

    bd = add_command(csub, "build", "cmake --build BUILD --clean-first, timed (CPU of every process it ran)",
                     ["mlopt cmake build build-oz", "mlopt cmake build build-rule --jobs 2"])
    bd.add_argument("build", help="a configured CMake build directory")
    bd.add_argument("--jobs", type=positive_int, metavar="N", help="parallel jobs (cmake --build -j N)")
    bd.add_argument("--json", action="store_true", help="machine-readable summary")
    bd.set_defaults(func=cmd_build)

    rp = add_command(csub, "report", "each linked binary's .text in two builds, and their build CPU time",
                     ["mlopt cmake report build-oz build-rule", "mlopt cmake report build-oz build-rule --json"])
    rp.add_argument("before", help="the build without mlopt (a CMake build directory)")
    rp.add_argument("after", help="the build with it")
    rp.add_argument("--json", action="store_true", help="machine-readable report")
    rp.set_defaults(func=cmd_report)

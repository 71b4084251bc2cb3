"""What a clang command line says about how a module is compiled: the -O
level, the target and the relocation model (ml-compiler-opt's ``.cmd`` files)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

# clang's codegen level for each -O level (clang/lib/CodeGen/BackendUtil).
CODEGEN_LEVEL = {"O0": 0, "O1": 1, "O2": 2, "O3": 3, "Os": 2, "Oz": 2}


def split_command_file(text: str) -> list[str]:
    """Arguments of a ``.cmd`` file: separated by NUL (as extract_ir writes
    them) or, without any NUL, a shell-quoted command line."""
    return [a for a in text.split("\0") if a] if "\0" in text else shlex.split(text)


def clang_vectorizers(opt_level: str | None) -> tuple[bool, bool]:
    """(loop, SLP) vectorization the clang-19 driver turns on at an -O level:
    loops at -O2/-O3/-Os, SLP also at -Oz."""
    loop = opt_level in ("O2", "O3", "Os")
    return loop, loop or opt_level == "Oz"


def parse_command_line(args: Sequence[str]) -> dict:
    """``opt_level``, ``target``, ``reloc_model``, ``loop_vectorize`` and
    ``slp_vectorize`` from a clang driver or ``-cc1`` command line (unknown
    arguments are ignored). A ``-cc1`` line (``.llvmcmd``) names the
    vectorizers it runs; for a driver line they follow clang's defaults for
    the -O level and ``-f[no-]vectorize`` / ``-f[no-]slp-vectorize``."""
    opt_level = target = reloc = None
    cc1 = "-cc1" in args
    pic: bool | None = None
    loop_vec: bool | None = None
    slp_vec: bool | None = None
    it = iter(range(len(args)))
    for i in it:
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a.startswith("-O"):
            level = a[2:]
            opt_level = {"": "O1", "0": "O0", "1": "O1", "2": "O2", "3": "O3", "s": "Os", "z": "Oz",
                         "fast": "O3", "g": "O1", "4": "O3"}.get(level, opt_level)
        elif a in ("-triple", "-target", "--target") and nxt is not None:
            target = nxt
            next(it, None)
        elif a.startswith("--target=") or a.startswith("-triple="):
            target = a.split("=", 1)[1]
        elif a == "-mrelocation-model" and nxt is not None:
            reloc = nxt
            next(it, None)
        elif a in ("-fPIC", "-fpic", "-fPIE", "-fpie"):
            pic = True
        elif a in ("-fno-PIC", "-fno-pic", "-fno-PIE", "-fno-pie", "-static"):
            pic = False
        elif a in ("-vectorize-loops", "-fvectorize", "-ftree-vectorize"):
            loop_vec = True
        elif a in ("-fno-vectorize", "-fno-tree-vectorize"):
            loop_vec = False
        elif a in ("-vectorize-slp", "-fslp-vectorize", "-ftree-slp-vectorize"):
            slp_vec = True
        elif a in ("-fno-slp-vectorize", "-fno-tree-slp-vectorize"):
            slp_vec = False
    if reloc is None and not cc1:
        if pic is None:
            # clang-19 as Debian ships it defaults to PIE on Linux targets.
            pic = "linux" in (target or "linux")
        reloc = "pic" if pic else "static"
    default_loop, default_slp = (False, False) if cc1 else clang_vectorizers(opt_level)
    return {"opt_level": opt_level, "target": target, "reloc_model": reloc,
            "loop_vectorize": default_loop if loop_vec is None else loop_vec,
            "slp_vectorize": default_slp if slp_vec is None else slp_vec}

"""Running Debian's LLVM tools (of the major a test runs for) the same way in every test."""

from __future__ import annotations

import re
import subprocess


def opt(llvm_tools, module, out, *flags, pipeline: str = "default<Oz>", level: str | None = None,
        check: bool = True, timeout: float = 600):
    """``opt-19 FLAGS -passes=PIPELINE MODULE -o OUT`` (``level``: ``default<level>``)."""
    if level is not None:
        pipeline = f"default<{level}>"
    return subprocess.run([llvm_tools["opt"], *flags, f"-passes={pipeline}", str(module), "-o", str(out)],
                          capture_output=True, text=True, check=check, timeout=timeout)


def llc(llvm_tools, module, out, *flags):
    """``llc-19 -filetype=obj FLAGS MODULE -o OUT``."""
    subprocess.run([llvm_tools["llc"], "-filetype=obj", *flags, str(module), "-o", str(out)], check=True)


def llvm_size_text(llvm_tools, obj) -> int:
    """.text bytes as llvm-size -A lists them (an independent reader)."""
    out = subprocess.run([llvm_tools["llvm-size"], "-A", str(obj)], check=True, capture_output=True, text=True).stdout
    return sum(int(m.group(1)) for m in re.finditer(r"^\.text\S*\s+(\d+)", out, re.M))


DEBUG_INFO_SOURCE = ("static int sq(int x) { return x * x; }\n"
                     "static int add(int a, int b) {\n"
                     "  int s = 0; for (int i = 0; i < a; i++) s += sq(i) + b; return s;\n"
                     "}\n"
                     "int f(int n) { return add(n, 3) + sq(n); }\n")


def debug_info_bitcode(llvm_tools, tmp_path):
    """A small C module with debug info (clang -g), unoptimized bitcode: its path."""
    src = tmp_path / "d.c"
    src.write_text(DEBUG_INFO_SOURCE)
    bc = tmp_path / "d.bc"
    subprocess.run([llvm_tools["clang"], "-g", "-Os", "-Xclang", "-disable-llvm-passes", "-c", "-emit-llvm",
                    str(src), "-o", str(bc)], check=True)
    return bc

"""End-to-end log demo on stock LLVM 19, no LLVM rebuild.

For each C file: compile to pre-optimization bitcode with clang-19, run stock
opt-19's ML inliner in interactive mode with a Python policy answering every
decision (mlopt.interactive.Host), save the stream the compiler sent, read it
back with mlopt.read_log and summarise it, then compare the policy's native
.text size with the stock -Oz heuristic's.

Usage: python examples/log_demo.py [--out DIR] [FILE.c ...]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mlopt
from mlopt.cli import main as mlopt_main
from mlopt.compiler.interactive import Host


def text_size(obj: Path) -> int:
    out = subprocess.run(["llvm-size-19", "-A", str(obj)], check=True, capture_output=True, text=True).stdout
    return sum(int(m.group(1)) for m in re.finditer(r"^\.text\S*\s+(\d+)", out, re.M))


def native(bc: Path) -> Path:
    obj = bc.with_suffix(".o")
    subprocess.run(["llc-19", "-O2", "-filetype=obj", str(bc), "-o", str(obj)], check=True)
    return obj


def policy(obs) -> int:
    """A toy policy: inline when LLVM's own cost estimate says it is cheap."""
    return int(obs["cost_estimate"][0] <= 0 or obs["callee_users"][0] == 1)


def run(source: Path, out: Path) -> None:
    bc = out / (source.stem + ".bc")
    subprocess.run(["clang-19", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    str(source), "-o", str(bc)], check=True)
    policy_bc, stock_bc = out / (source.stem + ".policy.bc"), out / (source.stem + ".stock.bc")
    start = time.perf_counter()
    result = Host(policy, timeout=600, capture=True).run(
        ["opt-19", "-passes=default<Oz>", "-enable-ml-inliner=release",
         "-inliner-interactive-channel-base={channel}", str(bc), "-o", str(policy_bc)])
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"opt-19 failed on {source}:\n{result.stderr}")
    stream = out / (source.stem + ".stream.log")
    stream.write_bytes(b"".join(result.streams))
    subprocess.run(["opt-19", "-passes=default<Oz>", str(bc), "-o", str(stock_bc)], check=True)

    log = mlopt.read_log(stream)
    inlined = sum(int(d) for d in result.decisions)
    print(f"== {source.name}: {len(log)} decisions in {elapsed:.2f} s "
          f"({len(log) / max(elapsed, 1e-9):.0f}/s), policy inlined {inlined}")
    print(f"   stream saved to {stream}")
    mlopt_main(["log", "stats", str(stream)])
    policy_size, stock_size = text_size(native(policy_bc)), text_size(native(stock_bc))
    print(f"   .text: policy {policy_size} bytes, stock -Oz heuristic {stock_size} bytes "
          f"({100.0 * (policy_size - stock_size) / stock_size:+.1f}%)\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, help="C files (default: examples/inline_demo.c)")
    ap.add_argument("--out", type=Path, help="output directory (default: a new temporary directory)")
    args = ap.parse_args()
    files = args.files or [Path(__file__).with_name("inline_demo.c")]
    out = args.out or Path(tempfile.mkdtemp(prefix="mlopt-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        run(f, out)
    print(f"outputs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

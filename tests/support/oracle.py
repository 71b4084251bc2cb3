"""Driving the LLVM logger oracle (tests/oracle/llvm_logger_oracle.cpp, built
against libLLVM-19 by the ``llvm_logger_oracle`` fixture)."""

from __future__ import annotations

import subprocess


def run_oracle(oracle, tmp_path, features, score, advice, ops) -> bytes:
    """The same calls on LLVM 19's llvm::Logger."""
    lines = ["features [" + ",".join(f.to_json() for f in features) + "]",
             "score " + (score.to_json() if score else "-"),
             "advice " + (advice.to_json() if advice else "-"),
             "begin"]
    for op in ops:
        if op[0] == "context":
            lines.append("context " + (op[1].hex() or "-"))
        elif op[0] in ("start", "end"):
            lines.append(op[0])
        elif op[0] == "tensor":
            lines.append(f"tensor {op[1]} {op[2].hex() or '-'}")
        else:
            lines.append("reward " + (op[1].hex() or "-"))
    script = tmp_path / "script.txt"
    out = tmp_path / "oracle.log"
    script.write_text("\n".join(lines) + "\n")
    subprocess.run([str(oracle), str(script), str(out)], check=True)
    return out.read_bytes()

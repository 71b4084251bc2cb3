"""The instructions of a binary's code sections: one ``llvm-objdump-<N> -d``
over the file, parsed to sorted instruction addresses and their assembly
text (AT&T, operands' ``<symbol+off>`` and ``# comments`` dropped, so the
text re-assembles for llvm-mca). ``count(start, end)`` is the number of
instructions starting in ``[start, end)``; ``text(start, end)`` their lines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np

from ..errors import RewardToolError

_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S.*)$")
_SYMBOL = re.compile(r"\s*<[^>]*>")


def tool(name: str, llvm: int = 19) -> str:
    """Path of ``<name>-<llvm>`` (else ``<name>``), or a RewardToolError."""
    for candidate in (f"{name}-{llvm}", name):
        path = shutil.which(candidate)
        if path:
            return path
    raise RewardToolError(f"{name}-{llvm} not found on PATH (Debian package llvm-{llvm})")


class Disassembly:
    def __init__(self, binary: str | os.PathLike, llvm: int = 19):
        cmd = [tool("llvm-objdump", llvm), "-d", "--no-show-raw-insn", os.fspath(binary)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RewardToolError(f"{' '.join(cmd)} failed: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
        addresses, lines = [], []
        for line in r.stdout.splitlines():
            m = _LINE.match(line)
            if m is None:
                continue
            text = m.group(2).split("#", 1)[0]
            addresses.append(int(m.group(1), 16))
            lines.append(_SYMBOL.sub("", text).strip().replace("\t", " "))
        order = np.argsort(np.asarray(addresses, dtype=np.int64), kind="stable")
        self.addresses = np.asarray(addresses, dtype=np.int64)[order]
        self.lines = [lines[i] for i in order]

    def _span(self, start: int, end: int) -> tuple[int, int]:
        return (int(np.searchsorted(self.addresses, start, "left")),
                int(np.searchsorted(self.addresses, end, "left")))

    def count(self, start: int, end: int) -> int:
        lo, hi = self._span(start, end)
        return hi - lo

    def counts(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return (np.searchsorted(self.addresses, ends, "left") - np.searchsorted(self.addresses, starts, "left"))

    def two_branch_ends(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """1 for each block [start, end) ending in a conditional jump followed
        by an unconditional one (a block with two terminators: its last
        instruction runs only when the conditional one falls through), else 0."""
        lo = np.searchsorted(self.addresses, starts, "left")
        hi = np.searchsorted(self.addresses, ends, "left")
        out = np.zeros(len(starts), np.int8)
        for k in np.nonzero(hi - lo >= 2)[0]:
            last, before = self.lines[hi[k] - 1], self.lines[hi[k] - 2]
            if _is_jump(last) and not _is_conditional(last) and _is_conditional(before):
                out[k] = 1
        return out

    def text(self, start: int, end: int) -> list[str]:
        lo, hi = self._span(start, end)
        return self.lines[lo:hi]


def _is_jump(line: str) -> bool:
    return line.startswith(("j", "notrack j"))


def _is_conditional(line: str) -> bool:
    op = line.split(" ", 1)[0]
    return op.startswith("j") and not op.startswith("jmp")

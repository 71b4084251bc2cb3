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
import tempfile

import numpy as np

from ..errors import RewardToolError

_LINE = re.compile(r"^ *([0-9a-f]+):\s+(\S[^\n]*)$", re.M)
_SYMBOL = re.compile(r"\s*<[^>]*>")


def tool(name: str, llvm: int = 19) -> str:
    """Path of ``<name>-<llvm>`` (else ``<name>``), or a RewardToolError."""
    for candidate in (f"{name}-{llvm}", name):
        path = shutil.which(candidate)
        if path:
            return path
    raise RewardToolError(f"{name}-{llvm} not found on PATH (Debian package llvm-{llvm})")


class Disassembly:
    @classmethod
    def of_bytes(cls, data: bytes, name: str, llvm: int = 19) -> Disassembly:
        """The disassembly of a file's bytes in memory (through a temporary file, on tmpfs where there is one)."""
        tmp = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        with tempfile.NamedTemporaryFile(suffix=".o", dir=tmp) as f:
            f.write(data)
            f.flush()
            try:
                return cls(f.name, llvm)
            except RewardToolError as e:
                raise RewardToolError(f"{name}: {e}") from None

    def __init__(self, binary: str | os.PathLike, llvm: int = 19):
        cmd = [tool("llvm-objdump", llvm), "-d", "--no-show-raw-insn", os.fspath(binary)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RewardToolError(f"{' '.join(cmd)} failed: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
        pairs = _LINE.findall(r.stdout)
        addresses = np.fromiter((int(a, 16) for a, _ in pairs), np.int64, len(pairs))
        raw = [t for _, t in pairs]
        if len(addresses) > 1 and np.any(np.diff(addresses) < 0):
            order = np.argsort(addresses, kind="stable")
            addresses, raw = addresses[order], [raw[i] for i in order]
        self.addresses = addresses
        self.lines = raw  # as printed; text() cleans the lines it returns

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
            last, before = _clean(self.lines[hi[k] - 1]), _clean(self.lines[hi[k] - 2])
            if _is_jump(last) and not _is_conditional(last) and _is_conditional(before):
                out[k] = 1
        return out

    def text(self, start: int, end: int) -> list[str]:
        lo, hi = self._span(start, end)
        return [_clean(line) for line in self.lines[lo:hi]]


def _clean(line: str) -> str:
    """Re-assemblable text: no ``# comment``, no ``<symbol+off>``, spaces."""
    return _SYMBOL.sub("", line.split("#", 1)[0]).strip().replace("\t", " ")


def _is_jump(line: str) -> bool:
    return line.startswith(("j", "notrack j"))


def _is_conditional(line: str) -> bool:
    op = line.split(" ", 1)[0]
    return op.startswith("j") and not op.startswith("jmp")

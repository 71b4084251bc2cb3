"""The order of a traced run's blocks, kept as *paths*: the run's sequence of
machine-basic-block entries cut into acyclic runs within one function, each
distinct path stored once with how often it ran.

Recording runs the program once under mlopt's valgrind tool ``mlopt-bbseq``
(``src/valgrind/BlockSequenceTool.c``), which streams the index of every
block entered (its start address in the traced binary) through a pipe;
:class:`PathCounter` cuts the stream as it arrives (numpy, a chunk at a
time, so the full sequence is never held): a path ends where the next block
is in another function (a call, a return), is not after it in the layout
(a loop's back edge, a jump back), or when it reaches ``MAX_BLOCKS``. A
loop whose iterations take one path is then that path, counted once per
iteration: costing a path as a loop (llvm-mca, repeated) gives a latency-
bound loop its loop-carried dependencies across all of its blocks, where
costing each block as its own loop invents one from the block's end to its
start and misses the rest.

Paths are rows of the trace's block table (the block that owns the entered
address; a block that is empty in the traced build shares the next block's
address and is never a path member). Every entry of a non-empty block is in
exactly one path, so the paths' block counts equal the block entry counts
callgrind gives (tested).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ..errors import RewardToolError

TOOL = "mlopt-bbseq"
PLATFORM = "amd64-linux"
MAX_BLOCKS = 32
CHUNK = 1 << 22  # block entries per numpy step (16 MiB)
_P1, _P2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)


def tool_path() -> Path:
    """The built valgrind tool, or a RewardToolError saying how to get it."""
    from .._native import native_dir

    path = native_dir() / "_valgrind" / f"{TOOL}-{PLATFORM}"
    if not path.is_file():
        raise RewardToolError(f"mlopt's valgrind tool {TOOL} is not built ({path} is missing): install valgrind "
                              "(Debian package valgrind, with its tool libraries) and reinstall mlopt")
    return path


def available() -> bool:
    try:
        tool_path()
        _valgrind_libexec()
    except RewardToolError:
        return False
    return shutil.which("valgrind") is not None


def _valgrind_libexec() -> Path:
    """Where valgrind keeps its tools (the launcher's default VALGRIND_LIB)."""
    for d in ("/usr/libexec/valgrind", "/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib/valgrind",
              "/usr/local/libexec/valgrind", "/usr/local/lib/valgrind"):
        if (Path(d) / f"callgrind-{PLATFORM}").exists():
            return Path(d)
    raise RewardToolError(f"valgrind's tool directory (with callgrind-{PLATFORM}) not found")


class PathCounter:
    """Cuts a stream of entered-block indices (into the traced binary's
    ascending distinct block starts) into paths and counts each distinct
    one. ``owner[i]``: the block-table row entered at start ``i``;
    ``func[i]``: its function."""

    def __init__(self, owner: np.ndarray, func: np.ndarray, max_blocks: int = MAX_BLOCKS):
        self.owner = np.asarray(owner, np.int64)
        self.func = np.asarray(func, np.int64)
        self.max_blocks = max_blocks
        self.entries = 0
        self._carry = np.zeros(0, np.int64)
        self._paths: dict[int, list] = {}  # hash of the rows -> [rows, count]
        self._pow1 = _P1 ** np.arange(max_blocks, dtype=np.uint64)
        self._pow2 = _P2 ** np.arange(max_blocks, dtype=np.uint64)

    def feed(self, indices: np.ndarray, last: bool = False) -> None:
        idx = np.asarray(indices)
        if len(idx) and int(idx.max()) >= len(self.owner):
            raise RewardToolError(f"{TOOL} reported block {int(idx.max())} of {len(self.owner)}: the tool and "
                                  "the block list disagree")
        self.entries += len(idx)
        x = np.concatenate([self._carry, idx.astype(np.int64)])
        if not len(x):
            return
        cut = np.ones(len(x), bool)
        cut[1:] = (self.func[x[1:]] != self.func[x[:-1]]) | (x[1:] <= x[:-1])
        starts = np.flatnonzero(cut)
        lengths = np.diff(np.append(starts, len(x)))
        pos = np.arange(len(x)) - np.repeat(starts, lengths)
        if int(lengths.max()) > self.max_blocks:
            cut |= (pos % self.max_blocks) == 0
            starts = np.flatnonzero(cut)
            lengths = np.diff(np.append(starts, len(x)))
            pos = np.arange(len(x)) - np.repeat(starts, lengths)
        if not last:  # the last path may go on in the next chunk
            self._carry = x[starts[-1]:]
            if len(starts) == 1:
                return
            x, starts, lengths = x[:starts[-1]], starts[:-1], lengths[:-1]
            pos = pos[:len(x)]
        else:
            self._carry = np.zeros(0, np.int64)
        rows = self.owner[x]
        v = rows.astype(np.uint64) + np.uint64(1)
        h1 = np.add.reduceat(v * self._pow1[pos], starts) ^ (lengths.astype(np.uint64) * _P2)
        h2 = np.add.reduceat(v * self._pow2[pos], starts) ^ lengths.astype(np.uint64)
        keys = _mix(h1) ^ h2
        uniq, first, counts = np.unique(keys, return_index=True, return_counts=True)
        for k, i, n in zip(uniq.tolist(), first.tolist(), counts.tolist()):
            entry = self._paths.get(k)
            if entry is None:
                s = int(starts[i])
                self._paths[k] = [rows[s:s + int(lengths[i])].astype(np.int32), n]
            else:
                entry[1] += n

    def result(self) -> dict[str, np.ndarray]:
        """``path_rows`` (the paths' block-table rows, concatenated),
        ``path_offsets`` (where each path starts in it, and the end) and
        ``path_count``; paths ordered by their rows, so a run gives the
        same arrays whatever the chunking."""
        if len(self._carry):
            self.feed(np.zeros(0, np.int64), last=True)
        paths = sorted((tuple(r.tolist()), n) for r, n in self._paths.values())
        lengths = np.fromiter((len(r) for r, _ in paths), np.int64, len(paths))
        offsets = np.zeros(len(paths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        rows = np.fromiter((b for r, _ in paths for b in r), np.int32, int(offsets[-1]))
        return {"path_rows": rows, "path_offsets": offsets,
                "path_count": np.fromiter((n for _, n in paths), np.int64, len(paths))}


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a 64-bit hash of a 64-bit value (not linear,
    so two polynomial hashes mixed this way do not collide together)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def entry_owners(table: dict[str, np.ndarray], instrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the traced binary's distinct block starts ascending, the block-table
    row entered at each: the non-empty block starting there)."""
    starts = np.unique(table["start"])
    owner = np.full(len(starts), -1, np.int64)
    where = np.searchsorted(starts, table["start"])
    rows = np.arange(len(where))
    nonempty = np.asarray(instrs) > 0
    owner[where[~nonempty]] = rows[~nonempty]
    owner[where[nonempty]] = rows[nonempty]  # at most one per start, and it wins
    return starts, owner


def record_paths(valgrind: str, exe: str, args: list[str], table: dict[str, np.ndarray], instrs: np.ndarray, *,
                 stdout=None, stderr=None) -> tuple[dict[str, np.ndarray], int, float]:
    """Run ``exe args`` once under ``valgrind --tool=mlopt-bbseq``: (the path
    arrays, the number of block entries, seconds)."""
    tool = tool_path()
    starts, owner = entry_owners(table, instrs)
    counter = PathCounter(owner, table["func"][owner])
    with tempfile.TemporaryDirectory(prefix="mlopt-bbseq-") as tmp:
        lib = Path(tmp) / "lib"
        lib.mkdir()
        for f in _valgrind_libexec().iterdir():
            os.symlink(f, lib / f.name)
        os.symlink(tool, lib / tool.name)
        blocks = Path(tmp) / "blocks.bin"
        blocks.write_bytes(np.asarray([len(starts)], "<u8").tobytes() + starts.astype("<u8").tobytes())
        log = Path(tmp) / "valgrind.log"
        r, w = os.pipe()
        cmd = [valgrind, f"--tool={TOOL}", f"--blocks={blocks}", f"--object={os.path.realpath(exe)}",
               f"--out=/proc/self/fd/{w}", f"--log-file={log}", exe, *args]
        t = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, pass_fds=(w,),
                                    env={**os.environ, "VALGRIND_LIB": str(lib)})
        finally:
            os.close(w)
        with os.fdopen(r, "rb", buffering=0) as pipe:
            buf = bytearray(CHUNK * 4)
            view = memoryview(buf)
            filled = 0
            while True:
                n = pipe.readinto(view[filled:])
                if not n:
                    break
                filled += n
                if filled == len(buf):
                    counter.feed(np.frombuffer(buf, "<u4"))
                    filled = 0
            if filled % 4:
                proc.wait()
                raise RewardToolError(f"{TOOL} wrote a partial block index ({filled} bytes): the run was cut short")
            counter.feed(np.frombuffer(bytes(buf[:filled]), "<u4"), last=True)
        code = proc.wait()
        seconds = time.perf_counter() - t
        text = log.read_text(errors="replace").strip() if log.exists() else ""
        last = text.splitlines()[-1] if text else f"valgrind exited {code}, no log"
        if "mlopt-bbseq: writing" in text or "Bad option" in text or "FATAL" in text or not counter.entries:
            # no entries at all: the tool did not run (e.g. valgrind was upgraded after mlopt was built)
            raise RewardToolError(f"{TOOL} recorded no block order for {exe}: {last}")
    return counter.result(), counter.entries, seconds

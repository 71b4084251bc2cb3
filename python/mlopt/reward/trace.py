"""A program's machine-basic-block trace: how often each block (keyed by
function name and MachineBasicBlock ID) ran in one recorded execution, plus
the instructions executed outside the mapped functions (libc, ld.so, PLT,
crt), which every variant's estimate adds unchanged.

Recording runs the program once under valgrind's callgrind with
``--dump-instr=yes`` (exact execution counts per instruction address, at
link-time addresses for the executable and each shared object, so PIE needs
no load-base arithmetic); a block's count is the count of its first
instruction, its padding's count that of the first padding instruction.
The order of blocks is kept as *paths* (:mod:`.sequence`: a second run,
under mlopt's valgrind tool ``mlopt-bbseq``, when it is built; ``order=False``
skips it): the path cycles model costs blocks in the order they ran.

File (``.npz``, zip-compressed, every member CRC-checked): ``meta`` (JSON:
the program's path, SHA-256 and arguments, exit code, totals, function
names and CFGs of the traced build) and per block ``func``, ``id``,
``count`` (of its first instruction), ``tail_count`` (of its last),
``fall_in`` (entries by falling through from the previous block: the last
instruction's count minus its taken jumps, from callgrind's jump counts),
``instrs``, ``two_branch``, ``pad_instrs`` (the traced build's instructions
in the block and in its padding); with the order, ``path_rows``,
``path_offsets``, ``path_count`` (:meth:`.sequence.PathCounter.result`).
Version 1 files (no order) still load.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import OutputExistsError, RewardToolError, TraceError
from . import sequence
from .bbaddrmap import FunctionMap, block_table, read_bb_addr_map
from .disasm import Disassembly
from .elf import ElfImage

FORMAT = "mlopt-bb-trace"
VERSION = 2
ARRAYS = ("func", "id", "count", "tail_count", "instrs", "two_branch", "fall_in", "pad_instrs")
PATH_ARRAYS = ("path_rows", "path_offsets", "path_count")


def executed(count, tail_count, instrs, two_branch, fall_in, pad_instrs) -> np.ndarray:
    """Instructions executed per block (padding included): every instruction
    of a block runs as often as its first, but the last of a block ending
    ``jcc; jmp`` runs as often as recorded for it (``tail_count``); the
    alignment padding before a block runs each time execution falls through
    from the previous block (``fall_in``), whichever build has padding."""
    count, tail = np.asarray(count, np.int64), np.asarray(tail_count, np.int64)
    instrs, tb = np.asarray(instrs, np.int64), np.asarray(two_branch, np.int64)
    return count * (instrs - tb) + tail * tb + np.asarray(fall_in, np.int64) * np.asarray(pad_instrs, np.int64)


def cfg_digest(f: FunctionMap) -> str:
    import hashlib

    return hashlib.sha256(repr(f.cfg()).encode()).hexdigest()[:16]


@dataclass
class Trace:
    program: str
    sha256: str
    args: list[str]
    exit_code: int
    total_instructions: int          # everything callgrind counted (Ir)
    outside_instructions: int        # outside the mapped functions' blocks and padding
    functions: list[str]             # the program's mapped functions (all, executed or not)
    cfgs: list[str]                  # cfg_digest per function
    successors: bool                 # the map had successor IDs (-pgo-analysis-map=br-prob)
    arrays: dict[str, np.ndarray] = field(repr=False)
    record_seconds: float = 0.0      # not saved: the same run gives the same file
    tool: str = "valgrind --tool=callgrind"
    order_entries: int = 0           # block entries the ordered run saw (0: no order kept)
    order_count_mismatch: int = 0    # blocks whose entries in the paths differ from callgrind's count

    @property
    def has_order(self) -> bool:
        return "path_rows" in self.arrays

    # -- derived -------------------------------------------------------------------
    def mapped_instructions(self) -> int:
        """The traced build's instructions executed in mapped blocks, as the
        estimate models them (``total - outside``)."""
        return int(executed(*(self.arrays[k] for k in ARRAYS[2:])).sum())

    def meta(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "program": self.program, "sha256": self.sha256,
                "args": self.args, "exit_code": self.exit_code, "total_instructions": self.total_instructions,
                "outside_instructions": self.outside_instructions, "functions": self.functions,
                "cfgs": self.cfgs, "successors": self.successors, "tool": self.tool,
                "order_entries": self.order_entries, "order_count_mismatch": self.order_count_mismatch}

    # -- file ----------------------------------------------------------------------
    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        path = Path(path)
        if path.exists() and not overwrite:
            raise OutputExistsError(path, "pass --force to replace it")
        buf = io.BytesIO()
        np.savez_compressed(buf, meta=np.frombuffer(json.dumps(self.meta()).encode(), np.uint8),
                            **{k: self.arrays[k] for k in ARRAYS + PATH_ARRAYS if k in self.arrays})
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Trace:
        where = os.fsdecode(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                names = set(z.files)
                if "meta" not in names or not set(ARRAYS) <= names:
                    raise TraceError(f"{where}: not an mlopt basic-block trace (members {sorted(names)})")
                meta = json.loads(bytes(z["meta"]).decode())
                arrays = {k: z[k] for k in ARRAYS + PATH_ARRAYS if k in names}
        except TraceError:
            raise
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, zipfile.LargeZipFile) as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise TraceError(f"{where}: not a readable trace file (truncated or corrupt: {e})") from None
        if meta.get("format") != FORMAT or meta.get("version") not in (1, VERSION):
            raise TraceError(f"{where}: format {meta.get('format')!r} version {meta.get('version')!r}, "
                             f"expected {FORMAT} {VERSION} (or 1)")
        n = len(arrays["func"])
        if any(len(arrays[k]) != n for k in ARRAYS) or (n and int(arrays["func"].max()) >= len(meta["functions"])):
            raise TraceError(f"{where}: inconsistent block arrays")
        if any(k in arrays for k in PATH_ARRAYS):
            _check_paths(arrays, n, where)
        keys = ("program", "sha256", "args", "exit_code", "total_instructions", "outside_instructions",
                "functions", "cfgs", "successors", "tool")
        extra = {k: meta.get(k, 0) for k in ("order_entries", "order_count_mismatch")}
        return cls(**{k: meta[k] for k in keys}, **extra, arrays=arrays)


def _check_paths(arrays: dict, n: int, where: str) -> None:
    if not all(k in arrays for k in PATH_ARRAYS):
        raise TraceError(f"{where}: incomplete block order (members {[k for k in PATH_ARRAYS if k in arrays]})")
    rows, off, count = (arrays[k] for k in PATH_ARRAYS)
    if (len(off) != len(count) + 1 or (len(off) and (off[0] != 0 or off[-1] != len(rows)))
            or np.any(np.diff(off) <= 0) or (len(rows) and (rows.min() < 0 or rows.max() >= n))):
        raise TraceError(f"{where}: inconsistent block order arrays")


def path_block_counts(arrays: dict, n: int) -> np.ndarray:
    """Entries per block-table row, from the paths."""
    rows, off, count = (arrays[k] for k in PATH_ARRAYS)
    return np.bincount(rows, weights=np.repeat(count, np.diff(off)), minlength=n).astype(np.int64)


# -- recording ------------------------------------------------------------------------

def valgrind() -> str:
    path = shutil.which("valgrind")
    if path is None:
        raise RewardToolError("valgrind not found on PATH (Debian package valgrind)")
    return path


def read_callgrind(path: str | os.PathLike, obj: str) -> tuple[dict[int, int], dict[int, int], dict, int]:
    """(self instruction counts by address in object ``obj``, taken jumps by
    source address in it, taken jumps by (source, target) address, total Ir)
    of a callgrind profile written with
    --dump-instr=yes --dump-line=no --compress-strings=no --compress-pos=no
    --collect-jumps=yes."""
    counts: dict[int, int] = {}
    taken: dict[int, int] = {}
    edges: dict[tuple[int, int], int] = {}
    target = 0
    total = None
    current = None
    skip = False
    jump = 0
    with open(path) as f:
        for line in f:
            c = line[:1]
            if c == "0":
                if skip:  # the call's inclusive cost
                    skip = False
                    continue
                if jump:  # the source of the jump before
                    if current:
                        a = int(line.split()[0], 16)
                        taken[a] = taken.get(a, 0) + max(jump, 0)
                        edges[a, target] = edges.get((a, target), 0) + max(jump, 0)
                    jump = 0
                    continue
                if current:
                    addr, n = line.split()
                    a = int(addr, 16)
                    counts[a] = counts.get(a, 0) + int(n)
            elif line.startswith("ob="):
                current = os.path.realpath(line[3:].strip()) == obj
            elif line.startswith("calls="):
                skip = True  # the next line is the call's inclusive cost
            elif line.startswith("jump="):
                n, target = line[5:].split()[:2]
                jump, target = int(n) or -1, int(target, 16)
            elif line.startswith("jcnd="):
                n, target = line[5:].split()[:2]
                jump, target = int(n.split("/")[0]) or -1, int(target, 16)
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
    if total is None:
        raise RewardToolError(f"{path}: callgrind wrote no totals (the run was cut short?)")
    return counts, taken, edges, total


def record(program: str, args: list[str], *, llvm: int = 19, stdout=None, stderr=None,
           order: bool | None = None) -> Trace:
    """Run ``program args`` once under callgrind and return its block trace;
    with ``order`` (default: when mlopt's valgrind tool is built) once more
    under ``mlopt-bbseq`` for the blocks' order (:mod:`.sequence`)."""
    exe = (shutil.which(program) or program) if os.sep not in program else program
    if exe is None or not os.path.isfile(exe):
        raise TraceError(f"{program}: no such program")
    exe = os.path.realpath(exe)
    image = ElfImage(exe)
    functions = read_bb_addr_map(exe, image)  # refuses a binary without maps before running anything
    table = block_table(functions)
    dis = Disassembly(exe, llvm)
    with tempfile.TemporaryDirectory(prefix="mlopt-trace-") as tmp:
        out, log = os.path.join(tmp, "callgrind.out"), os.path.join(tmp, "valgrind.log")
        cmd = [valgrind(), "--tool=callgrind", "--dump-instr=yes", "--dump-line=no", "--collect-jumps=yes",
               "--compress-strings=no", "--compress-pos=no", f"--callgrind-out-file={out}", f"--log-file={log}",
               exe, *args]
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=stdout, stderr=stderr)
        seconds = time.perf_counter() - t
        if not os.path.exists(out):
            text = Path(log).read_text(errors="replace").strip().splitlines() if os.path.exists(log) else []
            raise RewardToolError(f"valgrind wrote no profile for {program} (exit {r.returncode}): "
                                  f"{text[-1] if text else 'no log'}")
        counts, taken, edges, total = read_callgrind(out, exe)
    starts, ends, pads = table["start"], table["end"], table["pad_start"]
    count = np.fromiter((counts.get(int(a), 0) for a in starts), np.int64, len(starts))
    fall_in = _fall_in(table, dis, counts, taken)
    instrs = dis.counts(starts, ends).astype(np.int32)
    _count_empty_blocks(count, instrs, fall_in, table, functions, edges)
    last = np.searchsorted(dis.addresses, ends, "left") - 1
    tail_count = np.fromiter((counts.get(int(dis.addresses[i]), 0) if n else 0 for i, n in zip(last, instrs)),
                             np.int64, len(starts))
    arrays = {"func": table["func"], "id": table["id"], "count": count, "tail_count": tail_count,
              "fall_in": fall_in, "instrs": instrs, "two_branch": dis.two_branch_ends(starts, ends),
              "pad_instrs": dis.counts(pads, starts).astype(np.int32)}
    inside = int(executed(*(arrays[k] for k in ARRAYS[2:])).sum())
    order_entries = mismatch = 0
    if order is None:
        order = sequence.available()
    if order:
        paths, order_entries, more = sequence.record_paths(valgrind(), exe, list(args), table, instrs, stdout=stdout,
                                                           stderr=stderr)
        seconds += more
        arrays.update(paths)
        from_paths = path_block_counts(arrays, len(starts))
        mismatch = int(np.count_nonzero((from_paths != count) & (instrs > 0)))
    return Trace(program=exe, sha256=image.sha256(), args=list(args), exit_code=r.returncode,
                 total_instructions=total, outside_instructions=total - inside,
                 functions=[f.name for f in functions], cfgs=[cfg_digest(f) for f in functions],
                 successors=all(f.has_successors for f in functions), arrays=arrays, record_seconds=seconds,
                 order_entries=order_entries, order_count_mismatch=mismatch)



def _fall_in(table: dict, dis: Disassembly, counts: dict[int, int], taken: dict[int, int]) -> np.ndarray:
    """Per block: how often execution fell through into it from the block
    laid out before it in the same function (its last instruction's count
    minus the times it jumped; 0 after a return or an unconditional jump)."""
    out = np.zeros(len(table["start"]), np.int64)
    func, starts = table["func"], table["start"]
    for k in range(1, len(starts)):
        if func[k] != func[k - 1]:
            continue
        i = int(np.searchsorted(dis.addresses, starts[k], "left")) - 1  # the last instruction before the block
        if i < 0 or dis.addresses[i] < starts[k - 1]:
            continue  # the previous block (and its padding) is empty
        last = dis.lines[i].replace("\t", " ").strip()
        op = last.split(" ", 1)[0]
        if op.startswith(("ret", "jmp", "ud2", "hlt")) or last.startswith("notrack jmp"):
            continue
        a = int(dis.addresses[i])
        out[k] = max(counts.get(a, 0) - taken.get(a, 0), 0)
    return out


def _count_empty_blocks(count, instrs, fall_in, table: dict, functions: list[FunctionMap], edges: dict) -> None:
    """An empty block (no instructions in the traced build; a variant may put
    copies there) shares its address with the next block, so its first
    instruction's count is that block's. Its entries instead: fall-throughs
    into it plus the taken jumps to its address from blocks that list it as
    a successor and not the block after it (from the map's successor IDs)."""
    empty = np.nonzero(instrs == 0)[0]
    if not len(empty):
        return
    starts = table["start"]
    succ = [b.successors or () for f in functions for b in f.blocks]
    by_target: dict[int, list[tuple[int, int]]] = {}
    for (src, tgt), n in edges.items():
        by_target.setdefault(tgt, []).append((src, n))
    for k in empty:
        entries = int(fall_in[k])
        after, j = set(), k + 1
        while j < len(starts) and starts[j] == starts[k] and table["func"][j] == table["func"][k]:
            after.add(int(table["id"][j]))
            j += 1
        bid = int(table["id"][k])
        for src, n in by_target.get(int(starts[k]), ()):
            p = int(np.searchsorted(starts, src, "right")) - 1
            if p >= 0 and table["func"][p] == table["func"][k] and bid in succ[p] and not after & set(succ[p]):
                entries += n
        count[k] = entries

"""Cycles per execution of a block (or of a path of blocks) from llvm-mca's
scheduling model of a CPU: the instructions as one code region, repeated
``ITERATIONS`` times; cost = total cycles / iterations (the steady-state
cost when it runs back to back, dependencies across iterations included).
Calls are given ``CALL_LATENCY`` cycles (llvm-mca's default, 100, would
charge every call site a cache miss).

Two settings keep the dependencies register allocation changes:
- ``-noalias=false``: a load waits for the stores before it, so a value
  spilled and reloaded stays one dependency chain (store-to-load
  forwarding), where llvm-mca's default lets the reload start at once and
  a spill would *shorten* a chain.
- register-to-register ``movl``/``movq`` are given to llvm-mca as
  ``leal``/``leaq`` of the same registers: the models of CPUs that
  eliminate moves (znver3-5) lose the dependency through a chain of
  eliminated moves in LLVM 19's llvm-mca (a copy to another register and
  back, as an eviction makes, breaks a loop-carried chain), so a variant
  that adds copies would look faster. A lea keeps the dependency at one
  cycle (a move's is 0-1).

Costs are cached per (CPU, code bytes) in memory and in
``~/.cache/mlopt/reward-mca/<llvm>-<cpu>-v<MODEL_VERSION>.json``; many
regions go to one llvm-mca run. A region llvm-mca cannot analyse costs one
cycle per instruction and is counted in ``fallbacks``."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..errors import RewardToolError
from .disasm import tool

ITERATIONS = 100
CALL_LATENCY = 3
BATCH = 2000
MODEL_VERSION = 2  # in the cache's name: costs of another version are not reused
_GPR_MOVE = re.compile(r"^\s*mov([lq])\s+%(\w+),\s*%(\w+)\s*$")


def _as_lea(line: str) -> str:
    """``movq %a, %b`` -> ``leaq (%a), %b``, ``movl %a, %b`` -> ``leal (%a64), %b``
    (general-purpose registers only; anything else unchanged)."""
    m = _GPR_MOVE.match(line)
    if m is None:
        return line
    width, src, dst = m.groups()
    if width == "l":
        if src.startswith("e") and len(src) == 3:
            src = "r" + src[1:]
        elif src.startswith("r") and src.endswith("d"):
            src = src[:-1]
        else:
            return line
    elif not (src.startswith("r") and dst.startswith("r")):
        return line
    return f"lea{width} (%{src}), %{dst}"


@functools.cache
def host_cpu(llvm: int = 19) -> str:
    """The CPU llvm-mca's ``-mcpu=native`` means here (e.g. znver4)."""
    r = subprocess.run([tool("llvm-mca", llvm), "--version"], capture_output=True, text=True)
    m = re.search(r"Host CPU:\s*(\S+)", r.stdout)
    if m is None:
        raise RewardToolError("llvm-mca --version names no host CPU; pass --cpu NAME")
    return m.group(1)


def cache_file(cpu: str, llvm: int) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "mlopt" / "reward-mca" / f"{llvm}-{cpu}-v{MODEL_VERSION}.json"


class CycleModel:
    def __init__(self, cpu: str | None = None, llvm: int = 19, cache: bool = True):
        self.llvm = llvm
        self.cpu = cpu or host_cpu(llvm)
        self.fallbacks = 0
        self._path = cache_file(self.cpu, llvm) if cache else None
        self._costs: dict[str, float] = {}
        self._dirty = False
        if self._path is not None and self._path.exists():
            try:
                self._costs = json.loads(self._path.read_text())
            except (OSError, ValueError):
                self._costs = {}
        if not self._costs:
            self._check_cpu()

    def _check_cpu(self):
        if self._run(["nop"]) is None:
            raise RewardToolError(f"llvm-mca-{self.llvm} cannot model -mcpu={self.cpu}")

    def costs(self, blocks: dict[str, list[str]]) -> dict[str, float]:
        """Cycles per execution of each block (key: hex of its bytes; value: its instructions)."""
        todo = [k for k in blocks if k not in self._costs]
        if todo and self._costs:
            self._check_cpu()  # a cache from an earlier run does not prove the CPU
        for i in range(0, len(todo), BATCH):
            batch = todo[i:i + BATCH]
            got = self._run_many([blocks[k] for k in batch])
            for k, c in zip(batch, got):
                if c is None:
                    self.fallbacks += 1
                    c = float(len(blocks[k]))
                self._costs[k] = c
                self._dirty = True
        return {k: self._costs[k] for k in blocks}

    def save(self):
        if self._path is None or not self._dirty:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_name(f"{self._path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self._costs))
        os.replace(tmp, self._path)
        self._dirty = False

    def _run_many(self, blocks: list[list[str]]) -> list[float | None]:
        result = self._run_regions(blocks)
        if result is not None:
            return result
        if len(blocks) == 1:
            return [None]
        half = len(blocks) // 2  # one bad block fails the run: bisect to find it
        return self._run_many(blocks[:half]) + self._run_many(blocks[half:])

    def _run(self, lines: list[str]) -> float | None:
        r = self._run_regions([lines])
        return None if r is None else r[0]

    def _run_regions(self, blocks: list[list[str]]) -> list[float] | None:
        text = []
        for i, lines in enumerate(blocks):
            text.append(f"# LLVM-MCA-BEGIN b{i}")
            text.extend([_as_lea(line) for line in lines] or ["nop"])
            text.append("# LLVM-MCA-END")
        with tempfile.NamedTemporaryFile("w", suffix=".s", delete=False) as f:
            f.write("\n".join(text) + "\n")
            name = f.name
        try:
            r = subprocess.run([tool("llvm-mca", self.llvm), f"-mcpu={self.cpu}", f"-iterations={ITERATIONS}",
                                f"-call-latency={CALL_LATENCY}", "-noalias=false", "-json",
                                "-skip-unsupported-instructions=lack-sched",
                                name], capture_output=True, text=True)
        finally:
            os.unlink(name)
        if r.returncode != 0:
            return None
        try:
            regions = json.loads(r.stdout)["CodeRegions"]
            out = [reg["SummaryView"]["TotalCycles"] / reg["SummaryView"]["Iterations"] for reg in regions]
        except (ValueError, KeyError, ZeroDivisionError, TypeError):
            return None
        if len(out) != len(blocks):
            return None
        return [c if not lines_empty else 0.0 for c, lines_empty in zip(out, (not b for b in blocks))]

"""Predict the traced run's ``instructions`` and ``cycles`` for a variant
binary of the same program (other register allocation) without running it.

For every traced block the variant's block with the same (function, BB ID)
supplies the instructions: executed = count x instructions (the last one of
a ``jcc; jmp`` block: its own recorded count) + padding count x padding
instructions; plus the traced run's instructions outside the mapped
functions, unchanged. Cycles: each executed block's llvm-mca cost (see
:mod:`.mca`) x its count, plus ``OUTSIDE_CPI`` per outside instruction (the
same for every variant).

A function whose CFG (block IDs, successor IDs) differs from the traced
build's cannot take the trace's counts block by block; it is *scaled*: its
traced dynamic instructions x (the variant's static instructions in it /
the traced build's), its cycles at the variant's static cycles per
instruction in it. The result names those functions and their share of
the traced instructions; build with ``mlopt reward build-flags`` and there
are none.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import TraceError
from .bbaddrmap import block_table, read_bb_addr_map
from .disasm import Disassembly
from .elf import ElfImage
from .mca import CycleModel
from .trace import ARRAYS, Trace, cfg_digest, executed

OUTSIDE_CPI = 1.0
TREATMENT = "scaled: traced instructions x variant/traced static instructions of the function"


@dataclass
class Estimate:
    instructions: int
    cycles: float | None
    cpu: str | None
    binary: str
    sha256: str
    same_binary_as_traced: bool
    mapped_instructions: int
    outside_instructions: int
    functions: int
    executed_functions: int
    cfg_differs: list[str] = field(default_factory=list)      # executed functions, costed by TREATMENT
    cfg_differs_share: float = 0.0                            # of executed functions
    cfg_differs_instruction_share: float = 0.0                # of the traced mapped instructions
    cfg_differs_unexecuted: int = 0                           # differ but never ran: cost nothing
    treatment: str = TREATMENT
    blocks_costed: int = 0
    mca_fallbacks: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)


def check_same_program(trace: Trace, names: list[str], binary: str, where: str = "trace") -> None:
    """A TraceError unless ``binary``'s mapped functions are the traced program's."""
    traced, here = set(trace.functions), set(names)
    if traced == here:
        return
    missing, extra = sorted(traced - here), sorted(here - traced)
    parts = []
    if missing:
        parts.append(f"{len(missing)} traced function(s) missing from it (e.g. {', '.join(missing[:3])})")
    if extra:
        parts.append(f"{len(extra)} function(s) the trace does not know (e.g. {', '.join(extra[:3])})")
    raise TraceError(f"{where} was recorded of {trace.program} ({len(traced)} mapped functions), not of a "
                     f"variant of {binary}: {'; '.join(parts)}")


def estimate(trace: Trace, binary: str | os.PathLike, *, cpu: str | None = None, cycles: bool = True,
             llvm: int = 19, model: CycleModel | None = None, trace_name: str = "trace") -> Estimate:
    t0 = time.perf_counter()
    binary = os.fspath(binary)
    image = ElfImage(binary)
    functions = read_bb_addr_map(binary, image)
    names = [f.name for f in functions]
    check_same_program(trace, names, binary, trace_name)
    vt = block_table(functions)
    dis = Disassembly(binary, llvm)
    v_instrs = dis.counts(vt["start"], vt["end"]).astype(np.int64)
    v_two = dis.two_branch_ends(vt["start"], vt["end"]).astype(np.int64)
    v_pad = dis.counts(vt["pad_start"], vt["start"]).astype(np.int64)
    row = {(names[f], int(i)): k for k, (f, i) in enumerate(zip(vt["func"], vt["id"]))}
    index = {n: i for i, n in enumerate(names)}
    digests = [cfg_digest(f) for f in functions]

    a = trace.arrays
    traced_exec = executed(*(a[k] for k in ARRAYS[2:]))
    fidx = a["func"]
    order = np.argsort(fidx, kind="stable")
    bounds = np.searchsorted(fidx[order], np.arange(len(trace.functions) + 1))
    model = model if model is not None or not cycles else CycleModel(cpu, llvm)
    matched_rows, matched_trace = [], []
    differs, unexecuted, differs_instr = [], 0, 0
    scaled_instr = 0.0
    scaled_funcs: list[tuple[int, float]] = []  # (variant function index, scaled instructions)
    for fi, name in enumerate(trace.functions):
        rows = order[bounds[fi]:bounds[fi + 1]]
        vf = index[name]
        if trace.cfgs[fi] == digests[vf]:
            matched_trace.extend(rows)
            matched_rows.extend(row[(name, int(i))] for i in a["id"][rows])
            continue
        dyn = int(traced_exec[rows].sum())
        if dyn == 0:
            unexecuted += 1
            continue
        differs.append(name)
        differs_instr += dyn
        vrows = np.nonzero(vt["func"] == vf)[0]
        static_v = int((v_instrs[vrows] + v_pad[vrows]).sum())
        static_t = int((a["instrs"][rows] + a["pad_instrs"][rows]).sum())
        s = dyn * static_v / static_t if static_t else float(dyn)
        scaled_instr += s
        scaled_funcs.append((vf, s))
    mt, mv = np.asarray(matched_trace, np.int64), np.asarray(matched_rows, np.int64)
    count, tail, pad_count = a["count"][mt], a["tail_count"][mt], a["fall_in"][mt]
    mapped = int(executed(count, tail, v_instrs[mv], v_two[mv], pad_count, v_pad[mv]).sum()) + round(scaled_instr)
    instructions = mapped + trace.outside_instructions

    total_cycles = None
    costed = 0
    if cycles:
        blocks: dict[str, list[str]] = {}
        keys_b, keys_p = [], []
        for k, c, p in zip(mv, count, pad_count):
            kb = kp = None
            if c:
                kb = _key(image, dis, int(vt["start"][k]), int(vt["end"][k]), blocks)
            if p and v_pad[k]:
                kp = _key(image, dis, int(vt["pad_start"][k]), int(vt["start"][k]), blocks)
            keys_b.append(kb)
            keys_p.append(kp)
        for vf, _ in scaled_funcs:
            for k in np.nonzero(vt["func"] == vf)[0]:
                _key(image, dis, int(vt["start"][k]), int(vt["end"][k]), blocks)
        costs = model.costs(blocks)
        costed = len(blocks)
        cyc = 0.0
        for kb, kp, c, p in zip(keys_b, keys_p, count, pad_count):
            if kb is not None:
                cyc += float(c) * costs[kb]
            if kp is not None:
                cyc += float(p) * costs[kp]
        for vf, s in scaled_funcs:
            ks = [_key(image, dis, int(vt["start"][k]), int(vt["end"][k]), blocks)
                  for k in np.nonzero(vt["func"] == vf)[0]]
            n = sum(len(blocks[k]) for k in ks)
            cyc += s * (sum(costs[k] for k in ks) / n if n else 1.0)
        total_cycles = cyc + OUTSIDE_CPI * trace.outside_instructions
        model.save()
    executed_funcs = int(len(np.unique(fidx[traced_exec > 0])))
    traced_mapped = int(traced_exec.sum())
    return Estimate(
        instructions=int(instructions), cycles=total_cycles, cpu=model.cpu if cycles else None, binary=binary,
        sha256=image.sha256(), same_binary_as_traced=image.sha256() == trace.sha256, mapped_instructions=mapped,
        outside_instructions=trace.outside_instructions, functions=len(trace.functions),
        executed_functions=executed_funcs, cfg_differs=differs,
        cfg_differs_share=len(differs) / executed_funcs if executed_funcs else 0.0,
        cfg_differs_instruction_share=differs_instr / traced_mapped if traced_mapped else 0.0,
        cfg_differs_unexecuted=unexecuted, blocks_costed=costed,
        mca_fallbacks=model.fallbacks if cycles else 0, seconds=time.perf_counter() - t0)


def _key(image: ElfImage, dis: Disassembly, start: int, end: int, blocks: dict) -> str:
    key = image.read(start, end - start).hex() if end > start else ""
    if key not in blocks:
        blocks[key] = dis.text(start, end)
    return key

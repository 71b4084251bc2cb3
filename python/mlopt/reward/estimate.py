"""Predict the traced run's ``instructions`` and ``cycles`` for a variant
binary of the same program (other register allocation) without running it.

For every traced block the variant's block with the same (function, BB ID)
supplies the instructions: executed = count x instructions (the last one of
a ``jcc; jmp`` block: its own recorded count) + padding count x padding
instructions; plus the traced run's instructions outside the mapped
functions, unchanged. Cycles: each executed block's llvm-mca cost (see
:mod:`.mca`) x its count, plus ``OUTSIDE_CPI`` per outside instruction (the
same for every variant). With a trace that kept the blocks' order (paths,
:mod:`.sequence`), ``cycles`` is the *path* model: each traced path's
blocks, the variant's instructions in the order they ran, costed by
llvm-mca as one region (a loop path: its steady state across all of its
blocks) x the path's count, in place of the blocks' own costs (padding and
blocks empty in the traced build keep theirs; the paths covering all but
``1 - PATH_COVER`` of the executed instructions, at most ``MAX_PATHS``, the
rest at their blocks' costs). ``block_cycles`` is the per-block model
either way.

A function whose CFG (block IDs, successor IDs) differs from the traced
build's cannot take the trace's counts block by block; it is *scaled*: its
traced dynamic instructions x (the variant's static instructions in it /
the traced build's), its cycles at the variant's static cycles per
instruction in it. The result names those functions and their share of
the traced instructions; build with ``mlopt reward build-flags`` and there
are none.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import TraceError
from .bbaddrmap import block_table, number_duplicates, read_bb_addr_map
from .disasm import Disassembly
from .elf import ElfImage
from .mca import CycleModel
from .trace import ARRAYS, Trace, cfg_digest, executed

OUTSIDE_CPI = 1.0
PATH_COVER = 0.999
MAX_PATHS = 4000
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
    functions_not_compiled: int = 0                           # estimate_objects: traced functions costed as traced
    compiled_instructions: int = 0                            # of mapped_instructions: in the given code's functions
    cycles_model: str | None = None                           # "path" (the trace kept the order) or "block"
    block_cycles: float | None = None                         # the per-block model's cycles
    paths_costed: int = 0                                     # paths costed as regions (the rest: by block)
    compiled_cycles: float | None = None                      # of cycles: in the given code's functions

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


@dataclass
class _Code:
    """A variant's mapped code: one linked binary, or objects in link order.
    Per block (``vt``, concatenated over the parts): its part, function,
    ID, range and its instruction counts."""
    names: list[str]
    digests: list[str]
    vt: dict
    v_instrs: np.ndarray
    v_two: np.ndarray
    v_pad: np.ndarray
    parts: list[tuple[ElfImage, Disassembly]]


def _code(parts: list[tuple[ElfImage, Disassembly, list]]) -> _Code:
    names, digests, tables, counts, twos, pads = [], [], [], [], [], []
    for p, (_image, dis, functions) in enumerate(parts):
        vt = block_table(functions)
        vt["func"] = vt["func"] + len(names)
        vt["part"] = np.full(len(vt["func"]), p, np.int32)
        names += [f.name for f in functions]
        digests += [cfg_digest(f) for f in functions]
        tables.append(vt)
        counts.append(dis.counts(vt["start"], vt["end"]))
        twos.append(dis.two_branch_ends(vt["start"], vt["end"]))
        pads.append(dis.counts(vt["pad_start"], vt["start"]))
    vt = {k: np.concatenate([t[k] for t in tables]) if tables else np.zeros(0, np.int64) for k in
          ("func", "id", "start", "end", "pad_start", "part")}
    cat = lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, np.int64)  # noqa: E731
    return _Code(names, digests, vt, cat(counts), cat(twos), cat(pads), [(i, d) for i, d, _ in parts])


def estimate(trace: Trace, binary: str | os.PathLike, *, cpu: str | None = None, cycles: bool = True,
             llvm: int = 19, model: CycleModel | None = None, trace_name: str = "trace") -> Estimate:
    """The traced run's instructions (and cycles) for ``binary``, a variant of the traced program."""
    t0 = time.perf_counter()
    binary = os.fspath(binary)
    image = ElfImage(binary)
    functions = read_bb_addr_map(binary, image)
    check_same_program(trace, [f.name for f in functions], binary, trace_name)
    code = _code([(image, Disassembly(binary, llvm), functions)])
    return _estimate(trace, code, binary, image.sha256(), cpu=cpu, cycles=cycles, llvm=llvm, model=model, t0=t0)


def estimate_objects(trace: Trace, objects: list[tuple[str, bytes]], *, cpu: str | None = None,
                     cycles: bool = True, llvm: int = 19, model: CycleModel | None = None,
                     trace_name: str = "trace") -> Estimate:
    """The same estimate from object files in memory (``(name, bytes)`` in the
    program's link order, e.g. :func:`mlopt.allocate` with ``traceable=True,
    keep_object=True``): no link, no run. The objects may cover part of the
    program: a traced function that none of them defines is costed as it
    was traced (its instructions, at ``OUTSIDE_CPI`` cycles each: the same
    for every variant; ``Estimate.functions_not_compiled``); a function the
    trace does not know is a TraceError (another program)."""
    t0 = time.perf_counter()
    parts, seen = [], {}
    for name, data in objects:
        image = ElfImage.from_bytes(data, name)
        if not image.relocatable:
            raise TraceError(f"{name}: not a relocatable object (ET_REL); use estimate() for a linked binary")
        functions = number_duplicates(read_bb_addr_map(name, image, numbered=False), seen)
        parts.append((image, Disassembly.of_bytes(data, name, llvm), functions))
    code = _code(parts)
    extra = sorted(set(code.names) - set(trace.functions))
    if extra:
        raise TraceError(f"{trace_name} was recorded of {trace.program}, which has no function "
                         f"{', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''} (objects: "
                         f"{', '.join(n for n, _ in objects[:3])}{' ...' if len(objects) > 3 else ''})")
    digest = hashlib.sha256(b"".join(d for _, d in objects)).hexdigest()
    return _estimate(trace, code, f"{len(objects)} object(s)", digest, cpu=cpu, cycles=cycles, llvm=llvm,
                     model=model, t0=t0)


def _estimate(trace: Trace, code: _Code, binary: str, sha256: str, *, cpu, cycles, llvm, model, t0) -> Estimate:
    names, digests, vt = code.names, code.digests, code.vt
    v_instrs, v_two, v_pad = code.v_instrs, code.v_two, code.v_pad
    row = {(names[f], int(i)): k for k, (f, i) in enumerate(zip(vt["func"], vt["id"]))}
    index = {n: i for i, n in enumerate(names)}

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
    absent_instr, absent = 0, 0  # traced functions no part defines (objects): as traced
    for fi, name in enumerate(trace.functions):
        rows = order[bounds[fi]:bounds[fi + 1]]
        vf = index.get(name)
        if vf is None:
            absent += 1
            absent_instr += int(traced_exec[rows].sum())
            continue
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
    mapped = (int(executed(count, tail, v_instrs[mv], v_two[mv], pad_count, v_pad[mv]).sum()) + round(scaled_instr)
              + absent_instr)
    instructions = mapped + trace.outside_instructions

    total_cycles = block_cycles = None
    costed = paths_costed = 0
    if cycles:
        blocks: dict[str, list[str]] = {}

        def key(k: int, start, end) -> str:
            image, dis = code.parts[int(vt["part"][k])]
            return _key(image, dis, int(start), int(end), blocks)

        keys_b, keys_p = [], []
        for k, c, p in zip(mv, count, pad_count):
            kb = kp = None
            if c:
                kb = key(k, vt["start"][k], vt["end"][k])
            if p and v_pad[k]:
                kp = key(k, vt["pad_start"][k], vt["start"][k])
            keys_b.append(kb)
            keys_p.append(kp)
        scaled_keys = [[key(k, vt["start"][k], vt["end"][k]) for k in np.nonzero(vt["func"] == vf)[0]]
                       for vf, _ in scaled_funcs]
        costs = model.costs(blocks)
        costed = len(blocks)
        cyc = members = 0.0
        member = a["instrs"][mt] > 0  # the blocks paths are made of
        for kb, kp, c, p, m in zip(keys_b, keys_p, count, pad_count, member):
            if kb is not None:
                cyc += float(c) * costs[kb]
                if m:
                    members += float(c) * costs[kb]
            if kp is not None:
                cyc += float(p) * costs[kp]
        for (_, s), ks in zip(scaled_funcs, scaled_keys):
            n = sum(len(blocks[k]) for k in ks)
            cyc += s * (sum(costs[k] for k in ks) / n if n else 1.0)
        total_cycles = cyc + OUTSIDE_CPI * (trace.outside_instructions + absent_instr)
        block_cycles = total_cycles
        if trace.has_order:
            vrow = np.full(len(a["func"]), -1, np.int64)
            vrow[mt] = mv
            keyof = {int(k): kb for k, kb in zip(mv, keys_b) if kb is not None}
            path_cyc, paths_costed = _path_cycles(trace, vrow, keyof, blocks, costs, v_instrs, model)
            total_cycles = block_cycles - members + path_cyc
        model.save()
    executed_funcs = int(len(np.unique(fidx[traced_exec > 0])))
    traced_mapped = int(traced_exec.sum())
    return Estimate(
        instructions=int(instructions), cycles=total_cycles, cpu=model.cpu if cycles else None, binary=binary,
        sha256=sha256, same_binary_as_traced=sha256 == trace.sha256, mapped_instructions=mapped,
        outside_instructions=trace.outside_instructions, functions=len(trace.functions),
        executed_functions=executed_funcs, cfg_differs=differs,
        cfg_differs_share=len(differs) / executed_funcs if executed_funcs else 0.0,
        cfg_differs_instruction_share=differs_instr / traced_mapped if traced_mapped else 0.0,
        cfg_differs_unexecuted=unexecuted, blocks_costed=costed,
        mca_fallbacks=model.fallbacks if cycles else 0, seconds=time.perf_counter() - t0,
        functions_not_compiled=absent, compiled_instructions=mapped - absent_instr,
        cycles_model=None if not cycles else "path" if trace.has_order else "block", block_cycles=block_cycles,
        compiled_cycles=None if total_cycles is None else
        total_cycles - OUTSIDE_CPI * (trace.outside_instructions + absent_instr),
        paths_costed=paths_costed)


def _path_cycles(trace: Trace, vrow, keyof: dict, blocks: dict, costs: dict, v_instrs, model) -> tuple[float, int]:
    """Cycles of the traced paths of matched functions with the variant's
    instructions (the heaviest as llvm-mca regions, the rest by block), and
    how many were costed as regions."""
    rows, off, count = (trace.arrays[k] for k in ("path_rows", "path_offsets", "path_count"))
    v = vrow[rows]
    bad = np.add.reduceat((v < 0).astype(np.int64), off[:-1]) > 0 if len(rows) else np.zeros(0, bool)
    vi = np.where(v >= 0, v_instrs[np.maximum(v, 0)], 0)
    weight = np.add.reduceat(vi, off[:-1]) * count if len(rows) else np.zeros(0)
    weight[bad] = 0  # a function costed by scaling or not compiled: not the paths' business
    order = np.argsort(-weight, kind="stable")
    total = float(weight.sum())
    regions: dict[str, list[str]] = {}
    chosen: list[tuple[int, str]] = []
    covered = 0.0
    for p in order[:MAX_PATHS]:
        if weight[p] <= 0 or covered >= PATH_COVER * total:
            break
        members = [keyof.get(int(k)) for k in v[off[p]:off[p + 1]]]
        if any(m is None for m in members):
            continue
        key = "p:" + hashlib.sha1("|".join(members).encode()).hexdigest()
        if key not in regions:
            regions[key] = [line for m in members for line in blocks[m]]
        chosen.append((int(p), key))
        covered += float(weight[p])
    region_costs = model.costs(regions)
    cyc = 0.0
    done = np.zeros(len(count), bool)
    for p, key in chosen:
        cyc += float(count[p]) * region_costs[key]
        done[p] = True
    for p in np.nonzero(~done & ~bad)[0]:  # the long tail: by block
        c = float(count[p])
        for k in v[off[p]:off[p + 1]]:
            kb = keyof.get(int(k))
            if kb is not None:
                cyc += c * costs[kb]
    return cyc, len(chosen)


def _key(image: ElfImage, dis: Disassembly, start: int, end: int, blocks: dict) -> str:
    key = image.read(start, end - start).hex() if end > start else ""
    if key not in blocks:
        blocks[key] = dis.text(start, end)
    return key

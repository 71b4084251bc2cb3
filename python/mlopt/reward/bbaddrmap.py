"""LLVM's basic-block address map (section ``SHT_LLVM_BB_ADDR_MAP``, made by
clang ``-fbasic-block-address-map``): for every function, its machine basic
blocks (the MachineBasicBlock IDs, stable across register allocation) with
their address ranges and, built with ``-mllvm -pgo-analysis-map=br-prob``,
their successor IDs.

Encoding (LLVM 19 writes version 2; ``llvm/lib/Object/ELF.cpp``
``decodeBBAddrMap``): per function ``u8 version``, ``u8 features`` (bit 0
function entry count, 1 block frequencies, 2 branch probabilities, 3
multiple ranges), then either (one range) ``u64 address, uleb #blocks`` or
(bit 3) ``uleb #ranges`` and per range ``u64 address, uleb #blocks``; per
block ``uleb id`` (version >= 2; the block index before), ``uleb offset``
(from the end of the previous block of the range, version >= 1), ``uleb
size``, ``uleb metadata`` (1 return, 2 tail call, 4 EH pad, 8 can fall
through, 16 indirect branch). Then the PGO analyses: ``uleb entry count``
(bit 0), and per block ``uleb frequency`` (bit 1) and ``uleb #successors``
with ``(uleb id, uleb probability)`` each (bit 2).

``read_bb_addr_map(path)`` returns the functions named by ``.symtab``;
a binary without the section raises :class:`mlopt.errors.BBAddrMapError`
saying how to build one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import BBAddrMapError
from .elf import SHT_LLVM_BB_ADDR_MAP, ElfImage

FEATURE_ENTRY_COUNT, FEATURE_BB_FREQ, FEATURE_BR_PROB, FEATURE_MULTI_RANGE = 1, 2, 4, 8
KNOWN_FEATURES = 0xF
HAS_RETURN, HAS_TAIL_CALL, IS_EH_PAD, CAN_FALL_THROUGH, HAS_INDIRECT_BRANCH = 1, 2, 4, 8, 16


@dataclass(frozen=True)
class Block:
    id: int
    start: int      # virtual address
    size: int       # bytes (alignment padding before the block is not part of it)
    metadata: int
    successors: tuple[int, ...] | None  # block IDs, None when the map has no branch probabilities


@dataclass(frozen=True)
class FunctionMap:
    name: str            # the symbol's name; a repeated (static) name gets "#2", "#3" in address order
    address: int
    blocks: tuple[Block, ...]   # layout order

    def cfg(self) -> tuple:
        """What must not change between two builds whose traces are shared:
        the block IDs and, when known, each block's successor IDs."""
        return tuple(sorted((b.id, None if b.successors is None else tuple(sorted(b.successors)))
                            for b in self.blocks))

    @property
    def has_successors(self) -> bool:
        return all(b.successors is not None for b in self.blocks)


class _Reader:
    def __init__(self, data: bytes, where: str, relocated: dict[int, int] | None = None):
        self.data, self.pos, self.where = data, 0, where
        self.relocated = relocated or {}

    def fail(self, what: str):
        raise BBAddrMapError(f"{self.where}: .llvm_bb_addr_map byte {self.pos}: {what}")

    def u8(self) -> int:
        if self.pos >= len(self.data):
            self.fail("truncated")
        self.pos += 1
        return self.data[self.pos - 1]

    def u64(self) -> int:
        if self.pos + 8 > len(self.data):
            self.fail("truncated address")
        self.pos += 8
        at = self.pos - 8
        return self.relocated.get(at, int.from_bytes(self.data[at:self.pos], "little"))

    def uleb(self) -> int:
        data, pos = self.data, self.pos
        if pos < len(data) and data[pos] < 0x80:  # the common one-byte case
            self.pos = pos + 1
            return data[pos]
        value = shift = 0
        while True:
            byte = self.u8()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 63:
                self.fail("ULEB128 value too large")


def parse_bb_addr_map(data: bytes, where: str = "<bytes>",
                      relocated: dict[int, int] | None = None) -> list[tuple[int, list[Block]]]:
    """(function address, blocks) for each function of a section's bytes
    (``relocated``: an object's addresses by offset in the section)."""
    r = _Reader(data, where, relocated)
    out = []
    while r.pos < len(data):
        version = r.u8()
        if version not in (1, 2):
            r.fail(f"version {version} (this reader knows 1 and 2, as LLVM 19 writes)")
        features = r.u8()
        if features & ~KNOWN_FEATURES:
            r.fail(f"unknown feature bits {features:#x}")
        n_ranges = r.uleb() if features & FEATURE_MULTI_RANGE else 1
        blocks: list[list] = []
        function_address = None
        for k in range(n_ranges):
            base = r.u64()
            count = r.uleb()
            if k == 0:
                function_address = base
            prev_end = 0
            for index in range(count):
                bb_id = r.uleb() if version >= 2 else index
                offset = r.uleb() + prev_end
                size = r.uleb()
                metadata = r.uleb()
                prev_end = offset + size
                blocks.append([bb_id, base + offset, size, metadata, None])
        if features & (FEATURE_ENTRY_COUNT | FEATURE_BB_FREQ | FEATURE_BR_PROB):
            if features & FEATURE_ENTRY_COUNT:
                r.uleb()
            for b in blocks:
                if features & FEATURE_BB_FREQ:
                    r.uleb()
                if features & FEATURE_BR_PROB:
                    succ = []
                    for _ in range(r.uleb()):
                        succ.append(r.uleb())
                        r.uleb()  # probability
                    b[4] = tuple(succ)
        out.append((function_address, [Block(*b) for b in blocks]))
    return out


def read_bb_addr_map(path: str | os.PathLike, image: ElfImage | None = None, *,
                     numbered: bool = True) -> list[FunctionMap]:
    """The functions of ``path``'s BB address map, in address order.
    ``numbered``: a repeated (static) name gets ``#2``, ``#3``
    (turn off to number across several objects, :func:`number_duplicates`)."""
    image = image or ElfImage(path)
    sections = [s for s in image.sections if s.type == SHT_LLVM_BB_ADDR_MAP]
    if not sections:
        raise BBAddrMapError(f"{image.where}: no basic-block address map (section .llvm_bb_addr_map); build "
                             "it with the flags of 'mlopt reward build-flags' (clang-19 -fbasic-block-address-map)")
    symbols = image.functions()
    funcs = []
    for s in sections:
        relocated = image.relocated(s) if image.relocatable else None
        for address, blocks in parse_bb_addr_map(image.contents(s), image.where, relocated):
            names = symbols.get(address)
            if not names:
                raise BBAddrMapError(f"{image.where}: the function at {address:#x} of the BB address map has no "
                                     "symbol (a stripped binary?); keep .symtab")
            funcs.append((address, names[0], tuple(blocks)))
    funcs.sort()
    out = [FunctionMap(name, address, blocks) for address, name, blocks in funcs]
    return number_duplicates(out) if numbered else out


def number_duplicates(functions: list[FunctionMap], seen: dict[str, int] | None = None) -> list[FunctionMap]:
    """Repeated names get ``#2``, ``#3``... in order (a linked binary's
    address order; objects in link order, each in its address order, when
    ``seen`` is shared across them)."""
    seen = {} if seen is None else seen
    out = []
    for f in functions:
        seen[f.name] = seen.get(f.name, 0) + 1
        out.append(f if seen[f.name] == 1 else FunctionMap(f"{f.name}#{seen[f.name]}", f.address, f.blocks))
    return out


MAX_PADDING = 64  # bytes of alignment padding before a block (loop headers: 16)


def block_table(functions: list[FunctionMap]) -> dict[str, np.ndarray]:
    """Flat arrays over every block of ``functions`` (layout order): ``func``
    (index into ``functions``), ``id``, ``start``, ``end`` and ``pad_start``:
    where the alignment padding before the block begins (the previous block's
    end; ``start`` when there is none). Execution falls through the padding
    into the block, so its nops run too."""
    func, ids, starts, ends, pads = [], [], [], [], []
    for i, f in enumerate(functions):
        prev_end = None
        for b in f.blocks:
            func.append(i)
            ids.append(b.id)
            starts.append(b.start)
            ends.append(b.start + b.size)
            gap = None if prev_end is None else b.start - prev_end
            pads.append(prev_end if gap is not None and 0 < gap <= MAX_PADDING else b.start)
            prev_end = b.start + b.size
    return {"func": np.asarray(func, np.int32), "id": np.asarray(ids, np.int32),
            "start": np.asarray(starts, np.int64), "end": np.asarray(ends, np.int64),
            "pad_start": np.asarray(pads, np.int64)}

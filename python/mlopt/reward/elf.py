"""An executable's or object file's sections and function symbols, read
without tools: what the trace reward needs of an x86-64 ELF file (64-bit
little-endian).

``ElfImage(path)`` (or ``ElfImage.from_bytes``) holds the file's bytes;
``section(name)`` gives a section's address, file offset and size,
``read(address, size)`` the bytes at an address of an allocated section,
``functions()`` the defined ``STT_FUNC`` symbols of ``.symtab`` by address.
A relocatable object (``ET_REL``, what the in-process compiler makes) has
no addresses: its code must be in one section (``.text``, as clang and the
engine emit it without ``-ffunction-sections``) and an address is an offset
in that section, as ``llvm-objdump -d`` prints it; ``relocated(section)``
gives the values of a section's ``R_X86_64_64`` relocations by offset
(how the BB address map of an object names its functions). Malformed input
raises :class:`mlopt.errors.BBAddrMapError` naming the file and the byte
offset.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import BBAddrMapError

SHT_SYMTAB = 2
SHT_RELA = 4
SHT_NOBITS = 8
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
ET_REL = 1
R_X86_64_64 = 1
SHT_LLVM_BB_ADDR_MAP = 0x6FFF4C0A  # LLVM 16+ (the older 0x6FFF4C08 is version 0, unsupported)
STT_FUNC = 2


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    address: int
    offset: int
    size: int
    link: int
    flags: int = 0
    info: int = 0


class ElfImage:
    """One ELF64 little-endian file (an executable or shared object)."""

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = Path(path)
        self.data = self.path.read_bytes() if data is None else data
        where = os.fsdecode(path)
        d = self.data
        if d[:4] != b"\x7fELF":
            raise BBAddrMapError(f"{where}: not an ELF file")
        if len(d) < 0x40 or d[4] != 2 or d[5] != 1:
            raise BBAddrMapError(f"{where}: not a 64-bit little-endian ELF file (byte 4)")
        self.relocatable = struct.unpack_from("<H", d, 0x10)[0] == ET_REL
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
        if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(d) or shentsize < 64:
            raise BBAddrMapError(f"{where}: no readable section header table (byte {shoff})")
        raw = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
        if shstrndx >= shnum:
            raise BBAddrMapError(f"{where}: section name table index {shstrndx} out of range")
        names = self._blob(raw[shstrndx][4], raw[shstrndx][5], "section name table")
        self.sections: list[Section] = []
        for name_off, kind, flags, addr, off, size, link, info, *_ in raw:
            end = names.find(b"\0", name_off)
            if end < 0:
                raise BBAddrMapError(f"{where}: section name offset {name_off} outside the name table")
            self.sections.append(Section(names[name_off:end].decode("utf-8", "surrogateescape"), kind, addr, off,
                                         size, link, flags, info))
        self.where = where
        self.code_section: int | None = None  # ET_REL: the one section holding code
        if self.relocatable:
            code = [i for i, c in enumerate(self.sections)
                    if c.flags & SHF_EXECINSTR and c.flags & SHF_ALLOC and c.size > 0]
            if len(code) > 1:
                raise BBAddrMapError(f"{where}: code in {len(code)} sections "
                                     f"({', '.join(self.sections[i].name for i in code)}); an object's code must be "
                                     "in one section (no -ffunction-sections)")
            self.code_section = code[0] if code else None

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> ElfImage:
        """An image of bytes in memory (e.g. an object the engine made); ``where`` names it in errors."""
        return cls(where, data)

    def _blob(self, offset: int, size: int, what: str) -> bytes:
        if offset + size > len(self.data):
            raise BBAddrMapError(f"{os.fsdecode(self.path)}: {what} at byte {offset} runs past the end of the file")
        return self.data[offset:offset + size]

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def contents(self, section: Section) -> bytes:
        if section.type == SHT_NOBITS:
            return b""
        return self._blob(section.offset, section.size, f"section {section.name!r}")

    def read(self, address: int, size: int) -> bytes:
        """Bytes at a virtual address inside one allocated section (ET_REL: an
        offset in the code section)."""
        if self.relocatable:
            code = self.sections[self.code_section] if self.code_section is not None else None
            if code is None or address < 0 or address + size > code.size:
                raise BBAddrMapError(f"{self.where}: offset {address:#x} (+{size}) is outside the code section")
            return self._blob(code.offset + address, size, f"offset {address:#x}")
        for s in self.sections:
            if s.address and s.address <= address and address + size <= s.address + s.size and s.type != SHT_NOBITS:
                return self._blob(s.offset + address - s.address, size, f"address {address:#x}")
        raise BBAddrMapError(f"{self.where}: address {address:#x} (+{size}) is in no section")

    def functions(self) -> dict[int, list[str]]:
        """Defined function symbols of ``.symtab``: address -> names (global names first)."""
        symtab = next((s for s in self.sections if s.type == SHT_SYMTAB), None)
        if symtab is None:
            return {}
        strings = self.contents(self.sections[symtab.link])
        table = self.contents(symtab)
        out: dict[int, list[tuple[int, str]]] = {}
        for name_off, info, _other, shndx, value, _size in struct.iter_unpack("<IBBHQQ", table[:len(table) // 24 * 24]):
            if info & 0xF != STT_FUNC or shndx == 0 or (value == 0 and not self.relocatable):
                continue
            if self.relocatable and shndx != self.code_section:
                continue
            end = strings.find(b"\0", name_off)
            name = strings[name_off:end].decode("utf-8", "surrogateescape")
            out.setdefault(value, []).append((0 if info >> 4 == 1 else 1, name))  # STB_GLOBAL first
        return {a: [n for _, n in sorted(v)] for a, v in out.items()}

    def symbol_values(self) -> list[int]:
        """ET_REL: each ``.symtab`` symbol's value as an address (an offset in
        the code section; -1 for a symbol outside it)."""
        symtab = next((s for s in self.sections if s.type == SHT_SYMTAB), None)
        if symtab is None:
            return []
        table = self.contents(symtab)
        return [value if shndx == self.code_section else -1
                for _n, _i, _o, shndx, value, _s in struct.iter_unpack("<IBBHQQ", table[:len(table) // 24 * 24])]

    def relocated(self, section: Section) -> dict[int, int]:
        """ET_REL: ``R_X86_64_64`` relocations applied to ``section``: offset
        in it -> symbol's address + addend (symbols in the code section)."""
        index = self.sections.index(section)
        values = None
        out: dict[int, int] = {}
        for rela in self.sections:
            if rela.type != SHT_RELA or rela.info != index:
                continue
            values = values if values is not None else self.symbol_values()
            body = self.contents(rela)
            for k, (offset, info, addend) in enumerate(struct.iter_unpack("<QQq", body[:len(body) // 24 * 24])):
                symbol, kind = info >> 32, info & 0xFFFFFFFF
                if kind != R_X86_64_64:
                    continue
                if symbol >= len(values) or values[symbol] < 0:
                    raise BBAddrMapError(f"{self.where}: relocation {k} of {rela.name} (byte {rela.offset + 24 * k}) "
                                         "refers to a symbol outside the code section")
                out[offset] = values[symbol] + addend
        return out

"""An executable's sections and function symbols, read without tools:
what the trace reward needs of an x86-64 ELF file (64-bit little-endian).

``ElfImage(path)`` holds the file's bytes; ``section(name)`` gives a
section's address, file offset and size, ``read(address, size)`` the bytes
at a virtual address of an allocated section, ``functions()`` the defined
``STT_FUNC`` symbols of ``.symtab`` by address. Malformed input raises
:class:`mlopt.errors.BBAddrMapError` naming the file and the byte offset.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import BBAddrMapError

SHT_SYMTAB = 2
SHT_NOBITS = 8
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


class ElfImage:
    """One ELF64 little-endian file (an executable or shared object)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.data = self.path.read_bytes()
        where = os.fsdecode(path)
        d = self.data
        if d[:4] != b"\x7fELF":
            raise BBAddrMapError(f"{where}: not an ELF file")
        if len(d) < 0x40 or d[4] != 2 or d[5] != 1:
            raise BBAddrMapError(f"{where}: not a 64-bit little-endian ELF file (byte 4)")
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
        if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(d) or shentsize < 64:
            raise BBAddrMapError(f"{where}: no readable section header table (byte {shoff})")
        raw = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
        if shstrndx >= shnum:
            raise BBAddrMapError(f"{where}: section name table index {shstrndx} out of range")
        names = self._blob(raw[shstrndx][4], raw[shstrndx][5], "section name table")
        self.sections: list[Section] = []
        for name_off, kind, _flags, addr, off, size, link, *_ in raw:
            end = names.find(b"\0", name_off)
            if end < 0:
                raise BBAddrMapError(f"{where}: section name offset {name_off} outside the name table")
            self.sections.append(Section(names[name_off:end].decode("utf-8", "surrogateescape"), kind, addr, off,
                                         size, link))
        self.where = where

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
        """Bytes at a virtual address inside one allocated section."""
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
            if info & 0xF != STT_FUNC or shndx == 0 or value == 0:
                continue
            end = strings.find(b"\0", name_off)
            name = strings[name_off:end].decode("utf-8", "surrogateescape")
            out.setdefault(value, []).append((0 if info >> 4 == 1 else 1, name))  # STB_GLOBAL first
        return {a: [n for _, n in sorted(v)] for a, v in out.items()}

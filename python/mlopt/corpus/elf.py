"""The sections of an ELF object file, read without tools: enough to take
clang's embedded bitcode (``.llvmbc``) and command line (``.llvmcmd``) out
of an object built with ``-Xclang -fembed-bitcode=all``.

Malformed input raises :class:`mlopt.CorpusError` naming the file and the
byte offset; a file that is not ELF at all raises it with "not an ELF
object"."""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from ..errors import CorpusError


def read_sections(path: str | os.PathLike, names: set[str] | None = None) -> dict[str, bytes]:
    """Contents of the named sections (all sections when ``names`` is None).
    ``SHT_NOBITS`` sections are empty."""
    with open(path, "rb") as f:
        data = f.read()
    return sections_of(data, os.fsdecode(path), names)


def sections_of(data: bytes, where: str, names: set[str] | None = None, *,
                with_flags: bool = False) -> dict:
    """As :func:`read_sections`, of bytes read from ``where``; ``with_flags``: each name maps to a list of
    (size, sh_flags), one per section of that name (an object may have several: one per COMDAT group)."""
    if data[:4] != b"\x7fELF":
        raise CorpusError(f"{where}: not an ELF object")
    if len(data) < 0x34 or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise CorpusError(f"{where}: truncated or unknown ELF header at byte 4")
    is64, order = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if is64:
            shoff, = struct.unpack_from(order + "Q", data, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x3A)
            entry = order + "IIQQQQIIQQ"
        else:
            shoff, = struct.unpack_from(order + "I", data, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x2E)
            entry = order + "IIIIIIIIII"
    except struct.error:
        raise CorpusError(f"{where}: truncated ELF header") from None
    if shoff == 0 or shnum == 0:
        return {}
    if shentsize < struct.calcsize(entry) or shoff + shnum * shentsize > len(data):
        raise CorpusError(f"{where}: section header table at byte {shoff} runs past the end of the file "
                          f"({shnum} entries of {shentsize} bytes, file is {len(data)} bytes)")
    headers = []
    for i in range(shnum):
        fields = struct.unpack_from(entry, data, shoff + i * shentsize)
        name, kind, flags, offset, size = fields[0], fields[1], fields[2], fields[4], fields[5]
        headers.append((name, kind, offset, size, shoff + i * shentsize, flags))
    if shstrndx >= shnum:
        raise CorpusError(f"{where}: section name table index {shstrndx} out of range ({shnum} sections)")
    _, _, str_off, str_size, _, _ = headers[shstrndx]
    if str_off + str_size > len(data):
        raise CorpusError(f"{where}: section name table at byte {str_off} runs past the end of the file")
    strtab = data[str_off:str_off + str_size]
    out = {}
    for name_off, kind, offset, size, at, flags in headers:
        end = strtab.find(b"\0", name_off)
        if name_off >= len(strtab) or end < 0:
            raise CorpusError(f"{where}: section header at byte {at} has a name offset outside the name table")
        name = strtab[name_off:end].decode("utf-8", "surrogateescape")
        if names is not None and name not in names:
            continue
        if kind != 8 and offset + size > len(data):  # SHT_NOBITS has no bytes in the file
            raise CorpusError(f"{where}: section {name!r} (header at byte {at}) runs past the end of the file")
        if with_flags:
            out.setdefault(name, []).append((size if kind != 8 else 0, flags))
        else:
            out[name] = b"" if kind == 8 else data[offset:offset + size]
    return out


def text_bytes(sections: dict[str, bytes]) -> int:
    """Bytes of code: ``.text`` and the ``.text.*`` sections (C++ inline
    functions and templates go to COMDAT ``.text._Z...`` sections)."""
    return sum(len(data) for name, data in sections.items() if name == ".text" or name.startswith(".text."))


SHF_GROUP = 0x200  # the section is a member of a section group (a COMDAT)


class TextSection(NamedTuple):
    name: str
    size: int
    comdat: bool  # in a section group: the linker keeps one copy of a group per output


def text_sections(data: bytes, where: str) -> list[TextSection]:
    """The code sections of an ELF object (``.text`` and ``.text.*``), with
    their sizes and whether each is in a section group: C++ inline functions
    and template instances (``linkonce_odr``) are, and a linker keeps one
    copy per name of them however many objects bring one."""
    return [TextSection(name, size, bool(flags & SHF_GROUP))
            for name, entries in sections_of(data, where, with_flags=True).items()
            if name == ".text" or name.startswith(".text.")
            for size, flags in entries]

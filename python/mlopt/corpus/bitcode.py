"""How many bitcode modules a ``.llvmbc`` section holds.

One compile embeds one module. A partial link (``ld -r``, as pv's build
makes ``library.o``) concatenates the sections of the objects it merges, so
the section then holds several modules, each starting with ``BC\\xC0\\xDE``
and padded to 4 bytes; LLVM's reader takes such a buffer for one module and
fails with "Invalid encoding". :func:`bitcode_streams` walks the top-level
blocks of each module (their lengths are in the stream, so nothing inside a
block is mistaken for a magic number) and counts the modules.
"""

from __future__ import annotations

MAGIC = b"BC\xc0\xde"
_ENTER_SUBBLOCK = 1


class _Bits:
    """LLVM's bitstream: fields read least significant bit first."""

    def __init__(self, data: bytes, byte: int):
        self.data = data
        self.bit = 8 * byte

    def read(self, width: int) -> int:
        value = 0
        for k in range(width):
            byte, shift = divmod(self.bit + k, 8)
            if byte >= len(self.data):
                raise ValueError("truncated")
            value |= ((self.data[byte] >> shift) & 1) << k
        self.bit += width
        return value

    def vbr(self, width: int) -> int:
        value, shift = 0, 0
        while True:
            chunk = self.read(width)
            value |= (chunk & ((1 << (width - 1)) - 1)) << shift
            if not chunk >> (width - 1):
                return value
            shift += width - 1
            if shift > 64:
                raise ValueError("VBR too long")

    def align32(self) -> None:
        self.bit = (self.bit + 31) // 32 * 32


def bitcode_streams(data: bytes) -> int | None:
    """The number of bitcode modules in ``data`` (a raw stream, no wrapper
    header), or None when it is not such a sequence (no magic at the start,
    a block running past the end, or bytes other than zero padding where a
    module or block should start)."""
    pos, count = 0, 0
    while pos < len(data):
        if not any(data[pos:]):  # zero padding after the last module
            break
        if data[pos:pos + 4] != MAGIC:
            return None
        count += 1
        pos += 4
        while pos < len(data) and data[pos:pos + 4] != MAGIC and any(data[pos:pos + 4]):
            bits = _Bits(data, pos)
            try:
                if bits.read(2) != _ENTER_SUBBLOCK:
                    return None
                bits.vbr(8)  # block id
                bits.vbr(4)  # abbreviation width inside the block
                bits.align32()
                words = bits.read(32)
            except ValueError:
                return None
            pos = bits.bit // 8 + 4 * words
            if pos > len(data):
                return None
        while pos < len(data) and data[pos:pos + 4] == b"\0\0\0\0":  # padding between modules
            pos += 4
    return count or None

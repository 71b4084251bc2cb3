"""Link an LTO module's object as lld linked its binary, and measure the
binary: under full LTO the merged module is the binary's code, so a policy's
cost is the ``.text`` lld writes -- after ``--gc-sections`` and
``--icf=all`` (the strongest stock configuration), which the object alone
does not show; a ThinLTO backend's object is linked with the binary's other
backends' objects (``others``).

The object is linked by ``clang++-<llvm> -fuse-ld=lld`` (the C runtime's
start files and libraries and C++'s, as a C++ build's link had them; a C
binary's code does not change by them) as a shared
library, a PIE or a non-PIE executable, as the link facts the plugin saved
say (``<m>.link.json``: ``shared``, ``reloc_model``); undefined symbols are
allowed, for an executable's libraries are not at hand. What the build's
link had besides the LTO module (assembly objects, non-LTO archives) is not
linked again: it is the same for every policy, and :func:`other_code`
measures it against the binary's recorded ``.text``.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..corpus.elf import read_sections, text_bytes
from ..errors import CompileError, CorpusError

GC_ICF = ("--gc-sections", "--icf=all")  # lld's flags of the strongest stock configuration


def is_shared(facts: dict) -> bool:
    """Whether the link made a shared library: the fact, or (facts saved before the plugin recorded it) an
    output named ``*.so`` or ``*.so.N``."""
    if "shared" in facts:
        return bool(facts["shared"])
    output = facts.get("output")
    if not output:
        raise CorpusError("link facts without 'shared' or 'output': re-extract the LTO corpus")
    return re.search(r"\.so(\.[0-9.]+)?$", output) is not None


def relink_command(obj: Path, out: Path, facts: dict, llvm: int, lld_flags: Sequence[str] = GC_ICF,
                   others: Sequence[Path] = (), position: int = 0) -> list[str]:
    """The clang + lld command that links ``obj`` (and ``others``: the binary's other objects, a ThinLTO
    binary's other backends; ``obj`` goes before ``others[position]``) as the binary of ``facts`` into
    ``out``."""
    if any("," in f for f in lld_flags):
        raise ValueError(f"lld flags must not contain ',': {list(lld_flags)}")
    shared = is_shared(facts)
    kind = ["-shared"] if shared else (["-pie"] if facts.get("reloc_model", "pic") == "pic" else ["-no-pie"])
    wl = [f"-Wl,{f}" for f in lld_flags]
    if not shared:  # the symbols LTO left global are what the link's libraries or other objects refer to
        wl += ["-Wl,--unresolved-symbols=ignore-all", "-Wl,--export-dynamic"]
    # clang++: a C++ binary's link has libstdc++, whose definitions change what lld keeps (libfmt: 261 bytes)
    objects = [*others[:position], obj, *others[position:]]
    return [f"clang++-{llvm}", "-fuse-ld=lld", *kind, *map(os.fspath, objects), "-o", os.fspath(out), *wl]


def relinked_text(obj: bytes, facts: dict, *, llvm: int, where: str, lld_flags: Sequence[str] = GC_ICF,
                  others: Sequence[Path] = (), position: int = 0) -> int:
    """Bytes of code (``.text`` and ``.text.*``) of the binary ``obj`` (with ``others``, object files, as
    :func:`relink_command` orders them) links into, as ``facts`` say (see the module docstring). Raises
    CompileError naming ``where`` when the link fails."""
    with tempfile.TemporaryDirectory(prefix="mlopt-relink-") as d:
        path, out = Path(d) / "module.o", Path(d) / "binary"
        path.write_bytes(obj)
        cmd = relink_command(path, out, facts, llvm, lld_flags, others, position)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except FileNotFoundError:
            raise CompileError(f"{where}: clang++-{llvm} is not installed (apt-get install clang-{llvm} "
                               f"lld-{llvm})") from None
        except subprocess.TimeoutExpired:
            raise CompileError(f"{where}: linking its object timed out after 600 s") from None
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise CompileError(f"{where}: linking its object as {facts.get('output', 'its binary')} failed: {last}")
        return text_bytes(read_sections(out))


def other_code(obj: bytes, facts: dict, *, llvm: int, where: str, lld_flags: Sequence[str] = ()) -> int:
    """The code of the build's binary that is not the LTO module's (assembly, non-LTO objects): its recorded
    ``.text`` (``binary_text``) less ``obj`` (the heuristic's object) relinked as the build linked it
    (``lld_flags``: the build's own; none for mlopt corpus debian's LTO corpora).
    Raises CorpusError when the facts have no ``binary_text`` or the relink is larger than the binary."""
    if "binary_text" not in facts:
        raise CorpusError(f"{where}: its link facts record no binary_text (an LTO corpus from mlopt corpus debian)")
    relinked = relinked_text(obj, facts, llvm=llvm, where=where, lld_flags=lld_flags)
    if relinked > facts["binary_text"]:
        raise CorpusError(f"{where}: its object relinked has {relinked} bytes of code, more than the binary's "
                          f"{facts['binary_text']}: not the link the facts describe")
    return int(facts["binary_text"]) - relinked

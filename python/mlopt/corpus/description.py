"""Reading corpora in ml-compiler-opt's layout: ``corpus_description.json``
listing ``modules``, each ``<m>.bc`` with its compile command in ``<m>.cmd``
or, for every module, ``global_command_override``. An LTO corpus
(``has_thinlto``, or mlopt's ``"lto": "full"|"thin"``; :mod:`.lto`) holds
modules as lld's LTO backends optimize them: they are compiled as lld
compiles them, with the link's facts from ``<m>.link.json`` when it has them."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorpusError
from .layout import DESCRIPTION
from .module import Module

PathLike = str | os.PathLike


@dataclass(frozen=True)
class CorpusEntry:
    """One module of a corpus on disk, not loaded yet (cheap to send to a
    worker process). ``command``: the global command line override, or None
    when the module's ``.cmd`` says how it is compiled."""

    name: str
    bitcode_path: Path
    command: tuple[str, ...] | None = None
    lto: str | None = None  # "full" | "thin": an LTO corpus's module

    @property
    def size(self) -> int:
        return self.bitcode_path.stat().st_size

    def load(self, llvm: int | str | None = None) -> Module:
        if self.lto is not None:
            from .lto import lto_module_facts

            facts = lto_module_facts(self.bitcode_path) or {}
            return Module(self.bitcode_path, name=self.name, llvm=llvm, lto=self.lto,
                          reloc_model=facts.get("reloc_model"), lto_level=facts.get("lto_level", "O2"))
        return Module.from_corpus(self.bitcode_path, command=self.command, name=self.name, llvm=llvm)


def read_description(directory: PathLike) -> dict:
    desc_path = Path(directory) / DESCRIPTION
    try:
        desc = json.loads(desc_path.read_bytes())
    except OSError as e:
        raise FileNotFoundError(e.errno, f"not a corpus: {e.strerror}", str(desc_path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(f"{desc_path}: invalid JSON: {e}") from None
    modules = desc.get("modules") if isinstance(desc, dict) else None
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise CorpusError(f"{desc_path}: expected an object with a 'modules' list of names")
    lto = desc.get("lto", "thin" if desc.get("has_thinlto") else None)
    if lto not in (None, "full", "thin") or (desc.get("has_thinlto") and lto != "thin"):
        raise CorpusError(f"{desc_path}: 'lto' must be 'full' or 'thin' (and 'thin' with has_thinlto), not {lto!r}")
    override = desc.get("global_command_override")
    if lto is not None:  # compiled as lld compiles them: no clang command applies
        return {**desc, "lto": lto}
    if override is not None:
        if not isinstance(override, list) or not all(isinstance(a, str) for a in override):
            raise CorpusError(f"{desc_path}: 'global_command_override' must be a list of arguments")
        if override == ["<UNSPECIFIED>"]:
            raise CorpusError(f"{desc_path}: 'global_command_override' is <UNSPECIFIED>: set the command line "
                              "the modules are compiled with")
    return desc


def corpus_entries(directory: PathLike, exclude: Iterable[str] = ()) -> list[CorpusEntry]:
    """The modules of a corpus directory, in the description's order, less
    those of the ``exclude`` packages (module names ``PKG/...``)."""
    directory = Path(directory)
    desc = read_description(directory)
    override = desc.get("global_command_override")
    lto = desc.get("lto")
    command = tuple(override) if override is not None and lto is None else None
    excluded = set(exclude)
    return [CorpusEntry(m, directory / f"{m}.bc", command, lto) for m in desc["modules"]
            if not excluded or m.split("/", 1)[0] not in excluded]


def load_corpus(directory: PathLike, llvm: int | str | None = None) -> list[Module]:
    """The modules of an ml-compiler-opt corpus directory, loaded (by LLVM ``llvm``)."""
    return [e.load(llvm) for e in corpus_entries(directory)]

"""A ThinLTO binary's other backends, for costing one backend module by its
binary: under ThinLTO, lld compiles every module of the binary apart (after
importing) and links their objects, so a policy's decisions in one module
change the binary only through that module's object. The binary's code with
the policy deciding module ``m`` is the link of ``m``'s object with the
heuristic's objects of the binary's other modules.

A ThinLTO corpus keeps one directory per binary, ``<output>.thinlto/`` (the
plugin's ``%m`` names), with each backend module's bitcode and link facts;
:func:`siblings` lists them in a fixed order (by name), the order
:func:`heuristic_objects` returns their objects in, and the position the
module's own object takes among them. Each object is compiled once by the
heuristic and kept on disk under the mlopt cache (keyed like ``mlopt
trace``'s cache: the bitcode, its link facts, the LLVM and the engine build),
written whole and renamed into place, so concurrent workers share it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..corpus import CorpusEntry
from ..errors import CorpusError
from .trace_cache import module_key

_SUFFIX = ".thinlto"


def siblings(entry: CorpusEntry) -> tuple[list[CorpusEntry], int]:
    """The binary's other backend modules (``entry``'s directory, by name) and ``entry``'s position among
    them. CorpusError when ``entry`` is not in a ``<output>.thinlto/`` directory."""
    directory = entry.bitcode_path.parent
    if not directory.name.endswith(_SUFFIX):
        raise CorpusError(f"{entry.name}: not in a binary's <output>{_SUFFIX}/ directory of a ThinLTO corpus (from "
                          "mlopt corpus debian --lto thin or corpus extract --lto of lld's saved modules)")
    prefix = str(Path(entry.name).parent)
    others = [CorpusEntry(f"{prefix}/{p.stem}", p, None, "thin") for p in sorted(directory.glob("*.bc"))
              if p != entry.bitcode_path]
    position = sum(o.bitcode_path.name < entry.bitcode_path.name for o in others)
    return others, position


_PATHS: dict[tuple, Path] = {}  # per worker: a module's object path (its key hashes the whole bitcode)


def _object_path(entry: CorpusEntry, llvm: int) -> Path:
    st = entry.bitcode_path.stat()
    seen = (str(entry.bitcode_path), st.st_mtime_ns, st.st_size, llvm)
    if seen not in _PATHS:
        if len(_PATHS) >= 65536:
            _PATHS.clear()
        _PATHS[seen] = _key_path(entry, llvm)
    return _PATHS[seen]


def _key_path(entry: CorpusEntry, llvm: int) -> Path:
    from ..corpus.fetch import cache_dir

    h = hashlib.sha256(module_key(entry, llvm).encode())
    facts = entry.bitcode_path.with_name(entry.bitcode_path.stem + ".link.json")
    h.update(facts.read_bytes() if facts.exists() else b"")
    key = h.hexdigest()
    return cache_dir() / "thinlto-objects" / key[:2] / f"{key}.o"


def heuristic_objects(entries: list[CorpusEntry], llvm: int, load) -> list[Path]:
    """The heuristic's object of each entry (``load(entry)``: its Module), compiled when not on disk."""
    from ..compiler import compile

    paths = []
    for e in entries:
        path = _object_path(e, llvm)
        if not path.exists():
            obj = compile(load(e), None, keep_object=True).object
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.partial")
            tmp.write_bytes(obj)
            os.replace(tmp, path)
        paths.append(path)
    return paths

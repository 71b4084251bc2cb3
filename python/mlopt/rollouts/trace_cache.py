"""The heuristic's compile of each corpus module, kept on disk: its ``.text``
size and training log under ``<cache>/traces``, keyed by what the compile
depends on (module bitcode, its command line, LLVM version, mlopt version,
the engine's build, IR2Vec vocabulary, whether the log has
``callee_linkage``). ``mlopt trace`` writes and reads it; rollout workers
read it to start a module's trajectory replay from the heuristic's compile
(:func:`recorded_compile`: None when the cache has no entry)."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np

from .. import _native
from ..corpus import CorpusEntry, cache_dir

# v2: the key holds the engine's build (engine_digest), so a rebuilt engine does not reuse an older one's
# compiles: trajectory replay takes them as exact.
KIND = "heuristic-v2"


@functools.cache
def engine_digest(llvm: int) -> str:
    """The in-process compiler's build for LLVM ``llvm``: a digest of its compiled module's bytes."""
    return hashlib.sha256(Path(_native.engine(llvm).__file__).read_bytes()).hexdigest()


def module_key(entry: CorpusEntry, llvm: int, ir2vec_vocab: str = "", callee_linkage: bool = False) -> str:
    """What a module's compile depends on (and its log's layout), hashed."""
    h = hashlib.sha256()
    h.update(KIND.encode())
    if callee_linkage:
        h.update(b"\0callee_linkage")
    if ir2vec_vocab:
        h.update(b"\0ir2vec\0" + Path(ir2vec_vocab).read_bytes())
    h.update(_native.engine(llvm).llvm_version.encode() + b"\0" + _native.version().encode() + b"\0")
    h.update(engine_digest(llvm).encode() + b"\0")
    h.update(entry.bitcode_path.read_bytes())
    if entry.command is not None:
        h.update(b"\0override\0" + "\0".join(entry.command).encode("utf-8", "surrogateescape"))
    else:
        cmd = entry.bitcode_path.with_suffix(".cmd")
        h.update(b"\0cmd\0" + (cmd.read_bytes() if cmd.exists() else b""))
    return h.hexdigest()


def _cache_path(key: str) -> Path:
    return cache_dir() / "traces" / key[:2] / f"{key}.npz"


def recorded_compile(key: str) -> tuple[int, bytes] | None:
    """(``.text`` bytes, training log bytes) of the heuristic's compile under ``key``, or None."""
    p = _cache_path(key)
    try:
        with np.load(p, allow_pickle=False) as z:
            return int(z["text_size"]), bytes(z["log"])
    except (OSError, KeyError, ValueError):
        return None


def store_compile(key: str, text_size: int, log: bytes) -> None:
    """Keeps the heuristic's compile under ``key`` (written whole, then renamed into place)."""
    p = _cache_path(key)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f"{p.stem}.{os.getpid()}.partial.npz")
    np.savez(tmp, text_size=np.int64(text_size), log=np.frombuffer(log, np.uint8))
    os.replace(tmp, p)

"""``mlopt trace CORPUS``: the heuristic's training log and ``.text`` size of
every module, as one :class:`TraceDataset`. Each module's result is cached
under ``<cache>/traces`` by (module bitcode, its command line, LLVM version,
mlopt version), so a second trace of the same corpus compiles nothing."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import _native
from ..corpus import CorpusEntry, cache_dir, corpus_entries
from .dataset import TraceDataset
from .runner import failures_of, run_rollouts
from .tasks import RolloutTask, default_ir2vec_vocab

KIND = "heuristic-v1"


def module_key(entry: CorpusEntry, llvm: int, ir2vec_vocab: str = "") -> str:
    """What a module's compile depends on, hashed."""
    h = hashlib.sha256()
    h.update(KIND.encode())
    if ir2vec_vocab:
        h.update(b"\0ir2vec\0" + Path(ir2vec_vocab).read_bytes())
    h.update(_native.engine(llvm).llvm_version.encode() + b"\0" + _native.version().encode() + b"\0")
    h.update(entry.bitcode_path.read_bytes())
    if entry.command is not None:
        h.update(b"\0override\0" + "\0".join(entry.command).encode("utf-8", "surrogateescape"))
    else:
        cmd = entry.bitcode_path.with_suffix(".cmd")
        h.update(b"\0cmd\0" + (cmd.read_bytes() if cmd.exists() else b""))
    return h.hexdigest()


def _cache_path(key: str) -> Path:
    return cache_dir() / "traces" / key[:2] / f"{key}.npz"


def _cached(key: str) -> tuple[int, bytes] | None:
    p = _cache_path(key)
    try:
        with np.load(p, allow_pickle=False) as z:
            return int(z["text_size"]), bytes(z["log"])
    except (OSError, KeyError, ValueError):
        return None


def _store(key: str, text_size: int, log: bytes) -> None:
    p = _cache_path(key)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f"{p.stem}.{os.getpid()}.partial.npz")
    np.savez(tmp, text_size=np.int64(text_size), log=np.frombuffer(log, np.uint8))
    os.replace(tmp, p)


def trace_corpus(corpus: str | os.PathLike, *, modules: Sequence[str] | None = None, use_cache: bool = True,
                 workers: int | None = None, ray: str | None = None, timeout: float | None = None, pool=None,
                 quiet: bool = False, llvm: int | str | None = None,
                 ir2vec_vocab: str | os.PathLike | None = None, exclude: Sequence[str] = ()) -> TraceDataset:
    """Traces every module of ``corpus`` (or the named ``modules``) with
    LLVM ``llvm`` (default :func:`mlopt._native.default_llvm`). Modules
    that fail are left out and listed in ``meta["failed"]``; the modules of
    the ``exclude`` packages are left out too (``meta["excluded"]``). With an IR2Vec
    vocabulary (default ``$MLOPT_IR2VEC_VOCAB``; LLVM 22) the logs carry
    the embeddings and ``meta["problem"]`` is ``inlining-ir2vec:<dim>``."""
    from ..compiler import inlining_problem

    major = _native.resolve_llvm(llvm)
    vocab = os.fspath(ir2vec_vocab) if ir2vec_vocab is not None else default_ir2vec_vocab()
    vocab = str(Path(vocab).resolve()) if vocab else ""
    problem = inlining_problem(vocab or None)
    started = time.monotonic()
    entries = corpus_entries(corpus, exclude)
    if modules is not None:
        wanted = set(modules)
        entries = [e for e in entries if e.name in wanted]
    keys = [module_key(e, major, vocab) for e in entries]
    found = {i: c for i, k in enumerate(keys) if use_cache and (c := _cached(k)) is not None}
    todo = [i for i in range(len(entries)) if i not in found]
    tasks = [RolloutTask(entries[i], None, log=True, llvm=major, ir2vec_vocab=vocab) for i in todo]
    results = run_rollouts(tasks, pool=pool, workers=workers, ray=ray, timeout=timeout, quiet=quiet,
                           desc="tracing") if tasks else []
    for i, r in zip(todo, results):
        if r.ok:
            found[i] = (r.value.text_size, r.value.log_bytes)
            if use_cache:
                _store(keys[i], r.value.text_size, r.value.log_bytes)
    failed = failures_of(tasks, results)
    kept = [i for i in range(len(entries)) if i in found]
    meta = {"corpus": str(Path(corpus).resolve()), "llvm": _native.engine(major).llvm_version,
            "mlopt": _native.version(), "cached": len(entries) - len(todo), "failed": failed,
            "problem": problem.name, "ir2vec_vocab": vocab or None, "excluded": sorted(set(exclude)),
            "compiled": len(todo), "seconds": round(time.monotonic() - started, 2)}
    return TraceDataset.from_logs([entries[i].name for i in kept], [found[i][0] for i in kept],
                                  [found[i][1] for i in kept], meta)


def summary(ds: TraceDataset) -> dict:
    seconds, compiled = ds.meta.get("seconds"), ds.meta.get("compiled", 0)
    return {"modules": len(ds.modules), "rows": len(ds), "text_size": int(ds.text_size.sum()),
            "cached": ds.meta.get("cached", 0), "compiled": compiled, "seconds": seconds,
            "compiles_per_second": round(compiled / seconds, 2) if seconds and compiled else None,
            "failed": [{"module": m, "reason": r} for m, r in ds.meta["failed"]]}


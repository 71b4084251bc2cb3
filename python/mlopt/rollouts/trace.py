"""``mlopt trace CORPUS``: the heuristic's training log and ``.text`` size of
every module, as one :class:`TraceDataset`. Each module's result is cached
(:mod:`.trace_cache`: by module bitcode, its command line, LLVM version,
mlopt version and engine build), so a second trace of the same corpus
compiles nothing."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from .. import _native
from ..corpus import corpus_entries
from .dataset import TraceDataset
from .runner import failures_of, run_rollouts
from .tasks import RolloutTask, default_ir2vec_vocab
from .trace_cache import module_key, recorded_compile, store_compile


def trace_corpus(corpus: str | os.PathLike, *, modules: Sequence[str] | None = None, use_cache: bool = True,
                 workers: int | None = None, ray: str | None = None, timeout: float | None = None, pool=None,
                 quiet: bool = False, llvm: int | str | None = None,
                 ir2vec_vocab: str | os.PathLike | None = None, exclude: Sequence[str] = (),
                 callee_linkage: bool = False) -> TraceDataset:
    """Traces every module of ``corpus`` (or the named ``modules``) with
    LLVM ``llvm`` (default :func:`mlopt._native.default_llvm`). Modules
    that fail are left out and listed in ``meta["failed"]``; the modules of
    the ``exclude`` packages are left out too (``meta["excluded"]``). With an IR2Vec
    vocabulary (default ``$MLOPT_IR2VEC_VOCAB``; LLVM 22) the logs carry
    the embeddings and ``meta["problem"]`` is ``inlining-ir2vec:<dim>``. With
    ``callee_linkage`` the logs also have the callee's linkage class (the
    ``inlining-linkage`` problem's 40th input; its ``meta["problem"]``)."""
    from ..compiler import inlining_problem

    major = _native.resolve_llvm(llvm)
    vocab = os.fspath(ir2vec_vocab) if ir2vec_vocab is not None else default_ir2vec_vocab()
    vocab = str(Path(vocab).resolve()) if vocab else ""
    if callee_linkage:
        from ..errors import ProblemError
        from ..problems import get as get_problem

        if vocab:
            raise ProblemError(f"callee_linkage with an IR2Vec vocabulary ({vocab}) is no problem mlopt has: "
                               "inlining-linkage takes no embeddings")
        problem = get_problem("inlining-linkage")
    else:
        problem = inlining_problem(vocab or None)
    started = time.monotonic()
    entries = corpus_entries(corpus, exclude)
    if modules is not None:
        wanted = set(modules)
        entries = [e for e in entries if e.name in wanted]
    keys = [module_key(e, major, vocab, callee_linkage) for e in entries]
    found = {i: c for i, k in enumerate(keys) if use_cache and (c := recorded_compile(k)) is not None}
    todo = [i for i in range(len(entries)) if i not in found]
    # these are the modules the cache lacks: no worker need look them up again (start_from_trace)
    tasks = [RolloutTask(entries[i], None, log=True, llvm=major, ir2vec_vocab=vocab, start_from_trace=False,
                         callee_linkage=callee_linkage) for i in todo]
    results = run_rollouts(tasks, pool=pool, workers=workers, ray=ray, timeout=timeout, quiet=quiet,
                           desc="tracing") if tasks else []
    for i, r in zip(todo, results):
        if r.ok:
            found[i] = (r.value.text_size, r.value.log_bytes)
            if use_cache:
                store_compile(keys[i], r.value.text_size, r.value.log_bytes)
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


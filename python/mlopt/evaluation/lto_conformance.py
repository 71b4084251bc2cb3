"""Does the in-process engine compile what lld links? For every module of an
LTO corpus that recorded the ``.text`` of lld's own object of it
(``lld_text`` in its link facts: ``mlopt corpus debian --lto``), the engine's
compile of the module with the same decisions (the stock heuristic's, as in
the build) must give that ``.text`` exactly."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..compiler.compile import compile as compile_module
from ..compiler.compile import map_modules
from ..corpus import corpus_entries
from ..corpus.lto import lto_module_facts


def check_lto_corpus(corpus: str | Path, *, llvm: int | None = None, threads: int | None = None,
                     policy=None, on_result: Callable[[int, int], None] | None = None) -> dict:
    """Per module: lld's ``.text``, the engine's, equal or not; the count of
    exact modules, and the engine's CPU-bound wall time. ``policy``: the
    policy the build's links ran (None: the heuristic)."""
    entries = [e for e in corpus_entries(corpus) if e.lto is not None]
    facts = [lto_module_facts(e.bitcode_path) or {} for e in entries]
    checked = [(e, f) for e, f in zip(entries, facts) if f.get("lld_text") is not None]
    started = time.monotonic()
    done = [0]

    def run(pair):
        entry, _ = pair
        return compile_module(entry.load(llvm), policy, log=False).text_size

    def progress(i, _):
        done[0] += 1
        if on_result:
            on_result(done[0], len(checked))

    sizes = map_modules(run, [_Sized(p) for p in checked], threads, progress)
    rows = [{"module": e.name, "lld_text": f["lld_text"], "engine_text": s, "exact": s == f["lld_text"]}
            for (e, f), s in zip(checked, sizes)]
    return {"corpus": str(corpus), "modules": len(rows), "exact": sum(r["exact"] for r in rows),
            "unchecked": len(entries) - len(checked), "seconds": round(time.monotonic() - started, 1), "rows": rows}


class _Sized(tuple):
    """A (entry, facts) pair that map_modules can order by bitcode size."""

    def __new__(cls, pair):
        return super().__new__(cls, pair)

    @property
    def size(self) -> int:
        return self[0].size

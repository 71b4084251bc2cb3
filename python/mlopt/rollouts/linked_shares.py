"""The table the ``linked_share`` objective charges by (problems/inlining_linked):
every module compiled once with the heuristic, its grouped (COMDAT) code
sections listed, counted per package.

    shares, costs = build_linked_shares(entries, pool=pool)   # LinkedShares, {module: -Oz charge}
    shares.save("shares.npz")   # rollouts read it as $MLOPT_LINKED_SHARES (--linked-shares)

Give it every module of every package a run compiles (training, validation
and test: a package's counts need all of its modules). A module whose
compile fails is left out, and named in the error unless ``skip_failed``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..corpus import CorpusEntry
from ..errors import TraceError
from ..problems.inlining_linked.shares import LinkedShares
from .runner import failures_of, run_rollouts
from .tasks import RolloutTask


def build_linked_shares(entries: Sequence[CorpusEntry], *, pool=None, workers: int | None = None,
                        quiet: bool = True, skip_failed: bool = False) -> tuple[LinkedShares, dict[str, float]]:
    """The packages' table and each module's ``-Oz`` charge by it (the linked_share cost of the heuristic)."""
    tasks = [RolloutTask(e, None, grouped_code=True) for e in entries]
    results = run_rollouts(tasks, pool=pool, workers=workers, quiet=quiet, desc="-Oz grouped code")
    failed = failures_of(tasks, results)
    if failed and not skip_failed:
        module, reason = failed[0]
        raise TraceError(f"linked shares: {len(failed)} module(s) failed to compile, first {module}: {reason}")
    done = {t.entry.name: r.value for t, r in zip(tasks, results) if r.ok}
    shares = LinkedShares.from_heuristic({m: r.grouped_code for m, r in done.items()})
    return shares, {m: shares.charged(m, r.text_size, r.grouped_code) for m, r in done.items()}

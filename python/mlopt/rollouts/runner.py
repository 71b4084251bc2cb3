"""Rollouts of a whole corpus on a pool, largest modules first, with
progress; failed modules are reported, never dropped silently."""

from __future__ import annotations

from ..compiler import largest_first
from ..workers import Progress, TaskResult, make_pool
from .tasks import RolloutTask, run_rollout


def run_rollouts(tasks: list[RolloutTask], *, pool=None, workers: int | None = None, ray: str | None = None,
                 timeout: float | None = None, quiet: bool = False, desc: str = "compiling") -> list[TaskResult]:
    """One :class:`TaskResult` (value: :class:`Rollout`) per task, in task
    order. A pool given is reused (not closed)."""
    own = pool is None
    pool = pool or make_pool(workers, ray=ray, timeout=timeout)
    try:
        with Progress(len(tasks), desc, quiet=quiet) as bar:
            # A module's rollouts go to the worker that compiled it last: its caches know the module.
            return pool.map(run_rollout, tasks, order=largest_first([t.entry for t in tasks]),
                            on_result=lambda r: bar.update(), affinity=[t.entry.name for t in tasks])
    finally:
        if own:
            pool.close()


def failures_of(tasks: list[RolloutTask], results: list[TaskResult]) -> list[tuple[str, str]]:
    return [(t.entry.name, r.describe()) for t, r in zip(tasks, results) if not r.ok]

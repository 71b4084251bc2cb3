"""A policy's total objective delta against the heuristic on a set of
modules (the trainers' validation score: ``.text`` bytes for the inliner,
RegAllocScore for regalloc, as the problem's ``objective`` says): in
process, on a pool."""

from __future__ import annotations

from pathlib import Path

from ..corpus import CorpusEntry
from ..rollouts import RolloutTask, run_rollouts


def sizes_of(items: list[tuple[str | None, CorpusEntry]], *, pool=None) -> list[int | None]:
    """``.text`` bytes of each (policy path, module) compile (None: failed)."""
    results = run_rollouts([RolloutTask(e, policy) for policy, e in items], pool=pool, quiet=True)
    return [r.value.text_size if r.ok else None for r in results]


def costs_of(items: list[tuple[str | None, CorpusEntry]], problem: str, *, pool=None, quiet: bool = True,
             desc: str = "compiling") -> list[float | None]:
    """The problem's objective (``Problem.objective``, lower is better) of
    each (policy path, module) rollout (None: failed)."""
    results = run_rollouts([RolloutTask(e, policy, problem=problem) for policy, e in items], pool=pool,
                           quiet=quiet, desc=desc)
    return [r.value.cost if r.ok else None for r in results]


def total_delta_percent(policy, entries: list[CorpusEntry], baseline: dict[str, float], work: Path, *,
                        pool=None, name: str = "validate.tflite") -> float | None:
    """Total delta (%) of ``policy`` (an MLPPolicy) against ``baseline`` sizes
    over the modules that compiled; None without modules."""
    if not entries:
        return None
    work.mkdir(parents=True, exist_ok=True)
    path = work / name
    path.write_bytes(policy.to_tflite())
    sizes = costs_of([(str(path), e) for e in entries], policy.problem.name, pool=pool)
    pairs = [(s, baseline[e.name]) for s, e in zip(sizes, entries) if s is not None]
    base = sum(b for _, b in pairs)
    return 100.0 * (sum(s for s, _ in pairs) - base) / base if base else None

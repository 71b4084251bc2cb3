"""The Problem protocol: what generic code (policies, vocab, logs, trainers)
needs to know about one optimization problem, and nothing else.

A problem is a package under ``mlopt/problems/`` exposing ``PROBLEM``, an
instance of :class:`Problem`, and registered in ``mlopt/problems/__init__.py``.
Generic code receives a Problem (or its registered name) as an argument; it
never tests which problem it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..log import TensorSpec


@dataclass(frozen=True)
class Problem:
    """One optimization problem's tensors and decision rule.

    ``features``: the compiler's input tensors, in the compiler's order (a
    policy's inputs are bound to them by name: ``<feed_prefix><name>:0``).
    ``decision``: the policy's answer, an index in ``[0, num_actions)``
    (for the inliner 0/1, for regalloc eviction the candidate to evict).
    ``default_decision``: the compiler heuristic's answer, when the training
    log records it. ``reward``: the score a training log may carry.
    ``zscore_features``: features normalized per element by mean and
    standard deviation (float embeddings) instead of MLGO's quantile
    buckets. ``optional_features``: features a policy may lack (it runs
    where the compiler provides them, ignoring them). ``objective``: what a
    rollout measures, lower is better: ``"text_size"`` (bytes of ``.text``,
    the inliner's), ``"regalloc_score"`` (the RegAllocScore sum, regalloc's),
    ``"trace_instructions"`` or ``"trace_cycles"`` (the trace reward's
    counts or cycles model, regalloc-trace's and regalloc-trace-cycles');
    rollouts and trainers pick their measurement by it. ``starts_from``:
    problems whose saved weights this one's training may start from (the
    same features and decision, another objective).
    """

    name: str
    features: tuple[TensorSpec, ...]
    decision: TensorSpec
    num_actions: int
    feed_prefix: str = "action_"
    default_decision: TensorSpec | None = None
    reward: TensorSpec | None = None
    description: str = ""
    zscore_features: tuple[str, ...] = ()
    optional_features: tuple[str, ...] = ()
    objective: str = "text_size"
    starts_from: tuple[str, ...] = ()

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.features)

    @property
    def feature_widths(self) -> tuple[int, ...]:
        """Elements per feature (1 for a scalar, 33 for a [1, 33] tensor)."""
        return tuple(int(s.element_count) for s in self.features)

    @property
    def logits_name(self) -> str:
        """The name policies give their logits when they output them."""
        return f"{self.name}_logits"

    def decode_decisions(self, raw: np.ndarray) -> np.ndarray:
        """A policy's raw decision outputs -> int64 decisions, -1 where the
        output is not a decision (not an integral value in ``[0, num_actions)``)."""
        raw = np.asarray(raw).reshape(-1)
        if raw.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                valid = np.isfinite(raw) & (raw == np.floor(raw))
        else:
            valid = np.ones(raw.shape, bool)
        valid &= (raw >= 0) & (raw < self.num_actions)
        out = np.full(raw.shape, -1, np.int64)
        out[valid] = raw[valid].astype(np.int64)
        return out

    def output_spec(self, extras: Sequence[TensorSpec] = ()) -> list[dict]:
        """``output_spec.json`` of a model directory: the decision first, then
        extra outputs (logged by the compiler as columns after the features)."""
        entries = [self.decision, *extras]
        return [{"logging_name": s.name,
                 "tensor_spec": {"name": s.name, "port": 0, "type": s.type, "shape": list(s.shape)}}
                for s in entries]

    def __repr__(self) -> str:
        return f"<mlopt problem {self.name!r}: {len(self.features)} features -> {self.decision.name}>"

"""A policy as the compiler runs it: a .tflite file, a model directory or a
compiled .so, loaded once by the C++ core and bound by name to a problem's
features, with the same code (and so the same errors and decisions) as the
pass plugin. One :class:`LoadedPolicy` serves both :meth:`evaluate` and
in-process compiles (its C++ pool lends one model instance per concurrent
user).

    policy = LoadedPolicy("model_dir", problem)
    policy.evaluate(log)      # {"<decision>": int64 [n], <extra output>: [n, *shape], ...}
"""

from __future__ import annotations

import os

import numpy as np

from .._native import core
from .batching import feature_columns


class LoadedPolicy:
    """``problem``: a :class:`mlopt.problems.Problem`; ``feed_prefix``
    (default: the problem's, ``action_``) prefixes the model's input names;
    ``litert_library`` overrides where LiteRT's runtime is found (default:
    ``$MLOPT_LITERT_LIBRARY``, then the pinned ai-edge-litert wheel)."""

    def __init__(self, path: str | os.PathLike, problem, *, feed_prefix: str | None = None,
                 litert_library: str | os.PathLike | None = None):
        self.path = os.fspath(path)
        self.problem = problem
        self.pool = core().PolicyPool.load(self.path, list(problem.features),
                                           problem.feed_prefix if feed_prefix is None else feed_prefix,
                                           problem.decision.name,
                                           os.fspath(litert_library) if litert_library else "",
                                           list(problem.optional_features))
        # The problem's features the model takes (optional ones it lacks are not).
        self.inputs = [s.name for s in self.pool.model_inputs]
        self.kind: str = self.pool.kind
        self.extra_outputs = list(self.pool.extra_outputs)
        # The same policy as numpy weights (an MLPPolicy), set by whoever wrote both (ES's candidates): decide()
        # then runs the model only on the rows the twin cannot settle. twin_rows / model_rows count them.
        self.twin = None
        self.twin_rows = 0
        self.model_rows = 0

    def evaluate(self, batch) -> dict[str, np.ndarray]:
        """The decision (int64 [n]; -1 where the model's answer is not a
        decision of the problem) and every extra output ``[n, *shape]``."""
        cols = feature_columns(batch, self.problem.features)
        n = len(cols[0]) if cols else 0
        raw, extra = self.pool.evaluate_batch(
            n, [c.reshape(n, s.element_count).view(np.uint8) for c, s in zip(cols, self.problem.features)])
        out = {self.problem.decision.name: self.problem.decode_decisions(raw)}
        at = 0
        for spec in self.extra_outputs:
            chunk = np.ascontiguousarray(extra[:, at : at + spec.byte_size])
            out[spec.name] = chunk.view(spec.dtype).reshape((n, *spec.shape))
            at += spec.byte_size
        return out

    def decide(self, batch, inputs: np.ndarray | None = None) -> np.ndarray:
        """The model's decisions. With a numpy ``twin`` (the same policy's
        :class:`MLPPolicy` weights), rows whose top logit leads by more than
        any float32 evaluation order can move it are decided by the twin
        (:meth:`MLPPolicy.sure_of_inputs`) and only the others by the
        model: the same decisions, several times faster. ``inputs``: the
        twin's normalized inputs for ``batch`` when the caller has them
        (``twin.normalized(batch)``, e.g. kept per trajectory)."""
        if self.twin is None:
            return self.evaluate(batch)[self.problem.decision.name]
        x = self.twin.normalized(batch) if inputs is None else inputs
        decisions, unsure = self.twin.sure_of_inputs(x)  # NaN leads are unsure too
        n = len(decisions)
        if unsure.any():
            picked = np.flatnonzero(unsure)
            cols = feature_columns(batch, self.problem.features)
            decisions[picked] = self.evaluate({s.name: c[picked] for s, c in zip(self.problem.features, cols)})[
                self.problem.decision.name]
        self.twin_rows += n
        self.model_rows += int(unsure.sum())
        return decisions

    __call__ = decide

    @property
    def loaded_instances(self) -> int:
        """Model instances loaded so far (one per concurrent compile or evaluate)."""
        return self.pool.loaded_instances

    def __repr__(self) -> str:
        return f"LoadedPolicy({self.path!r}, kind={self.kind!r}, problem={self.problem.name!r})"

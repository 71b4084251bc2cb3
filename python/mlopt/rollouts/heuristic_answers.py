"""Costs known in the calling process, without a rollout: trajectory
replay started from the trace (:class:`RolloutTask.start_from_trace`), moved
out of the workers and checked for many candidate policies at once.

A policy that, shown the features the heuristic's compile of a module
logged (``mlopt trace``'s cache, :mod:`.trace_cache`), decides as the
heuristic did at every call site makes the compiler walk exactly that
compile's path (:mod:`mlopt.compiler.replay`): its ``.text`` size is that
compile's. For ES's candidates, most of an iteration's modules are such
items; answering them here spares writing, sending, loading and checking
each candidate in a worker.

Only plain MLP policies (their numpy weights decide) and the ``.text``
objective qualify -- and ``linked_share`` when the heuristic's cost of each
module by it is given (``heuristic_costs``: the answer is then that cost).
A row is decided here only where every float32 evaluation order picks the
same action (:meth:`MLPPolicy.sure_of_inputs`);
an item with a near-tie row, a policy deciding otherwise anywhere, a module
the cache does not hold, or a policy of another kind is left to a rollout
(None). A policy that takes ``callee_linkage`` is checked against the
trace that logged it (``trace_corpus(callee_linkage=True)``). A module the
one-site-linkonce rule forces decisions in (``$MLOPT_PACKAGE_CALL_SITES``)
is never answered: a policy's compile of it is not the heuristic's. So
every answer is the one a rollout would return.

    answers = HeuristicAnswers()
    costs = answers.costs(policies, [(policy_index, entry), ...])   # float or None per item
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..corpus import CorpusEntry
from ..policy import MLPPolicy
from ..problems.inlining_linkage import takes_linkage
from .tasks import _package_call_sites, entry_stamp


@dataclass
class _Trajectory:
    """A module's heuristic compile: its size, decisions, the features its log has, and its rows
    normalized per (vocab fingerprint, widths, features) asked for (the raw columns are read again from
    the cache for another vocab, rarely: ES's candidates share one)."""

    entry: CorpusEntry
    size: int
    decisions: np.ndarray
    features: frozenset[str]
    linkage: bool  # read from the trace that logged callee_linkage
    inputs: dict[tuple, np.ndarray] = field(default_factory=dict)


class HeuristicAnswers:
    """The answers above, with each module's trajectory read from the trace cache once (at most
    ``max_modules`` kept, least recently used dropped first). ``answered`` counts the items answered."""

    def __init__(self, llvm: int | None = None, ir2vec_vocab: str | None = None, max_modules: int = 32768,
                 heuristic_costs: dict[str, float] | None = None):
        self.llvm = llvm
        self.heuristic_costs = heuristic_costs
        self.ir2vec_vocab = ir2vec_vocab
        self.max_modules = max_modules
        self.answered = 0
        self._trajectories: OrderedDict[tuple, _Trajectory | None] = OrderedDict()

    def qualifies(self, policy) -> bool:
        """A plain MLP (its numpy forward pass is the policy) of a problem whose cost is ``.text`` bytes, or
        the linked share with the heuristic's costs given."""
        objective = getattr(getattr(policy, "problem", None), "objective", None)
        return (isinstance(policy, MLPPolicy) and type(policy).logits is MLPPolicy.logits
                and (objective == "text_size" or objective == "linked_share" and self.heuristic_costs is not None))

    def _answer(self, t: _Trajectory, policy) -> float | None:
        """The cost, by ``policy``'s objective, of a compile that walks ``t``: its size, or the given
        heuristic cost (linked_share)."""
        if policy.problem.objective == "text_size":
            return float(t.size)
        return self.heuristic_costs.get(t.entry.name)

    def costs(self, policies, items) -> list[float | None]:
        """Per item ``(policy index, entry)``: the heuristic compile's size where the policy decides as
        the heuristic at every row of it, else None."""
        out: list[float | None] = [None] * len(items)
        by_module: dict[str, list[int]] = {}
        entries: dict[str, CorpusEntry] = {}
        rule = _package_call_sites()
        for k, (c, entry) in enumerate(items):
            if rule is not None and rule.decisions(entry.name):
                continue  # the rule forces decisions here: the policy's compile is not the heuristic's
            if self.qualifies(policies[c]):
                by_module.setdefault(entry.name, []).append(k)
                entries[entry.name] = entry
        # per policy, the modules it is asked about with rows to check; rows of all of them in one pass
        asked: dict[int, list[str]] = {}
        for name, ks in by_module.items():
            t = self._trajectory(entries[name], policies[items[ks[0]][0]])
            if t is None:
                continue
            if not len(t.decisions):  # no call site: every policy compiles it as the heuristic
                for k in ks:
                    out[k] = self._answer(t, policies[items[k][0]])
                continue
            for c in sorted({items[k][0] for k in ks}):
                asked.setdefault(c, []).append(name)
        stacked: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray, list]] = {}
        for c, names in asked.items():
            policy = policies[c]
            tag = (*policy.normalization_key(), tuple(names))
            if tag not in stacked:
                held = [self._trajectory(entries[n], policy) for n in names]  # as the policy reads them
                parts = [None if t is None else self._inputs(t, policy) for t in held]
                if any(p is None for p in parts):
                    continue
                bounds = np.cumsum([0] + [len(p) for p in parts])
                decisions = np.concatenate([t.decisions for t in held])
                stacked[tag] = (np.concatenate(parts), bounds, decisions, held)
            x, bounds, decisions, held = stacked[tag]
            lead, unsure = policy.sure_of_inputs(x)
            same = (lead == decisions) & ~unsure
            agree = np.logical_and.reduceat(same, bounds[:-1]) if len(same) else np.zeros(0, bool)
            for name, ok, t in zip(names, agree, held):
                if ok:
                    for k in by_module[name]:
                        if items[k][0] == c:
                            out[k] = self._answer(t, policy)
        self.answered += sum(v is not None for v in out)
        return out

    def _trajectory(self, entry: CorpusEntry, policy) -> _Trajectory | None:
        """The module's heuristic compile from the trace cache (None: not cached, or its log lacks a
        feature ``policy`` takes)."""
        linkage = takes_linkage(policy)
        key = (*entry_stamp(entry), linkage)
        if key in self._trajectories:
            self._trajectories.move_to_end(key)
            t = self._trajectories[key]
        else:
            t = self._read(entry, policy, linkage)
            self._trajectories[key] = t
            while len(self._trajectories) > self.max_modules:
                self._trajectories.popitem(last=False)
        if t is not None and len(t.decisions) and any(s.name not in t.features for s in policy.problem.features):
            return None
        return t

    def _read(self, entry: CorpusEntry, policy, linkage: bool) -> _Trajectory | None:
        from ..compiler.compile import _parsed_log
        from .trace_cache import recorded_compile

        recorded = recorded_compile(self._cache_key(entry, linkage))
        if recorded is None:
            return None
        size, log_bytes = recorded
        parsed, decisions, defaults = _parsed_log(log_bytes)
        if not np.array_equal(decisions, defaults):  # not a heuristic's compile: leave it to the rollouts
            return None
        t = _Trajectory(entry, int(size), decisions, frozenset(parsed.feature_names if parsed else ()), linkage)
        if len(decisions) and all(s.name in t.features for s in policy.problem.features):
            t.inputs[policy.normalization_key()] = policy.normalized(
                {s.name: parsed[s.name] for s in policy.problem.features})
        return t

    def _inputs(self, t: _Trajectory, policy) -> np.ndarray | None:
        """The trajectory's rows normalized as ``policy`` normalizes them, made once per vocab (None: the
        cache no longer holds the module)."""
        tag = policy.normalization_key()
        if tag not in t.inputs:
            from ..compiler.compile import _parsed_log
            from .trace_cache import recorded_compile

            recorded = recorded_compile(self._cache_key(t.entry, t.linkage))
            if recorded is None or recorded[0] != t.size:
                return None
            parsed = _parsed_log(recorded[1])[0]
            t.inputs[tag] = policy.normalized({s.name: parsed[s.name] for s in policy.problem.features})
        return t.inputs[tag]

    def _cache_key(self, entry: CorpusEntry, linkage: bool) -> str:
        from .._native import resolve_llvm
        from .tasks import default_ir2vec_vocab
        from .trace_cache import module_key

        vocab = default_ir2vec_vocab() if self.ir2vec_vocab is None else self.ir2vec_vocab
        return module_key(entry, resolve_llvm(self.llvm), vocab, linkage)


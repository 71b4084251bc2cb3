"""Trajectory replay: a compile whose policy would make exactly the
decisions of a compile already made is not compiled again.

The compiler is deterministic and the inliner asks its policy one call
site at a time, so the features logged at step k are a function of the
module, the compile options and the decisions taken before step k. If a
policy, shown the features an earlier compile logged, answers every step
with that compile's decision, the compiler would walk exactly the same
path: the same features, decisions, log and ``.text`` size. The earlier
result is then this compile's, and the compile is skipped entirely.

The check is exact, not a prediction: the policy is evaluated by the same
C++ runner the compiler calls, one row at a time, on the very feature
bytes the compiler logged (:meth:`LoadedPolicy.decide`). It applies to
policies loaded by :func:`mlopt.load_policy` (``.tflite``, model
directories, ``.so``) and to LLVM's heuristic, whose answer at every step
is the log's ``inlining_default`` column. numpy policies and callables are
always compiled (a batched numpy forward pass need not give a one-row
call's bits). Forced decisions (local search) must match the trajectory's
first decisions; the policy must reproduce the rest. Decisions forced by
callee name (``forced_callees``) take the place of the policy's answer at
every later site whose callee they name, as in the compiler: they are
checked against trajectories that kept their call sites.

    replay = TrajectoryReplay()
    hit = replay.lookup(key, policy, forced, call_sites, forced_callees)   # CompileResult or None
    replay.add(key, result)                                 # after a real compile
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace

import numpy as np

from ..policy import LoadedPolicy


class TrajectoryReplay:
    """Compiles already made, per (module, options): at most ``per_module``
    trajectories each (most recently used first) and ``max_bytes`` of logs
    in all (least recently used modules dropped first). Thread-safe.
    ``replays`` counts compiles answered by replay, ``checks`` the
    trajectories a policy was checked against."""

    def __init__(self, per_module: int = 4, max_bytes: int = 256 << 20):
        self.per_module = per_module
        self.max_bytes = max_bytes
        self.replays = 0
        self.checks = 0
        self._lock = threading.Lock()
        self._store: OrderedDict[tuple, list] = OrderedDict()
        self._bytes = 0
        # id(kept result) -> (the result, the twin vocab's fingerprint and widths, its normalized log rows): the
        # inputs a policy's numpy twin checks (LoadedPolicy.decide), made once per trajectory and vocab; a budget
        # of their own (max_bytes / 2, least recently made dropped first), so what trajectories are kept is
        # as without them
        self._inputs: OrderedDict[int, tuple[object, tuple, np.ndarray]] = OrderedDict()
        self._input_bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._store.values())

    def has(self, key: tuple) -> bool:
        """Whether a compile of ``key`` is kept."""
        with self._lock:
            return bool(self._store.get(key))

    @staticmethod
    def replayable(policy) -> bool:
        """Policies whose decisions the check reproduces exactly: None (the
        heuristic) and loaded policies."""
        return policy is None or isinstance(policy, LoadedPolicy)

    def lookup(self, key: tuple, policy, forced: str, call_sites: bool, forced_callees: dict[str, int] | None = None):
        """The stored result this compile would give, or None. ``policy``:
        None or a :class:`LoadedPolicy`; ``forced``: '0'/'1' prefix;
        ``forced_callees``: callee name -> 0/1 after the prefix."""
        with self._lock:
            entries = list(self._store.get(key, ()))
        for result in entries:
            if (call_sites or forced_callees) and result.call_sites is None:
                continue
            with self._lock:
                self.checks += 1
            if _reproduces(result, policy, forced, lambda r, twin, key=key: self._twin_inputs(key, r, twin),
                           forced_callees):
                with self._lock:
                    self.replays += 1
                    if key in self._store:
                        self._store.move_to_end(key)
                        kept = [r for r in self._store[key] if r is not result]
                        self._store[key] = [result, *kept]
                return result
        return None

    def _twin_inputs(self, key: tuple, result, twin) -> np.ndarray | None:
        """``twin.normalized`` of ``result``'s whole log (a trajectory kept under ``key``), made once per
        (trajectory, vocab); None when the log lacks a feature the twin takes."""
        tag = twin.normalization_key()
        with self._lock:
            held = self._inputs.get(id(result))
        if held is not None and held[0] is result and held[1] == tag:
            return held[2]
        try:
            x = twin.normalized({s.name: result.log[s.name] for s in twin.problem.features})
        except KeyError:
            return None
        with self._lock:
            if any(r is result for r in self._store.get(key, ())):  # still kept
                self._drop_inputs(result)
                self._inputs[id(result)] = (result, tag, x)
                self._input_bytes += x.nbytes
                while self._input_bytes > self.max_bytes // 2 and self._inputs:
                    self._drop_inputs(next(iter(self._inputs.values()))[0])
        return x

    def _drop_inputs(self, result) -> None:
        held = self._inputs.get(id(result))
        if held is not None and held[0] is result:
            del self._inputs[id(result)]
            self._input_bytes -= held[2].nbytes

    def _forget(self, result) -> int:
        """Drops ``result`` and its normalized rows; the bytes of the trajectory budget that frees."""
        self._drop_inputs(result)
        return _nbytes(result)

    def add(self, key: tuple, result) -> None:
        """Keeps a real compile's result (with its parsed log, if it asked
        the policy anything) as a trajectory of ``key``."""
        if result.log is None and len(result.decisions):
            return
        size = _nbytes(result)
        if size > self.max_bytes:
            return
        with self._lock:
            kept = self._store.setdefault(key, [])
            if any(np.array_equal(r.decisions, result.decisions) and (r.call_sites is not None or
                                                                      result.call_sites is None) for r in kept):
                return
            kept.insert(0, result)
            self._bytes += size
            while len(kept) > self.per_module:
                self._bytes -= self._forget(kept.pop())
            self._store.move_to_end(key)
            while self._bytes > self.max_bytes and self._store:
                _, dropped = self._store.popitem(last=False)
                self._bytes -= sum(self._forget(r) for r in dropped)


def _nbytes(result) -> int:
    """What keeping ``result`` costs: its log's bytes, parsed and raw, and its call sites' names (with the
    Python objects that hold them, about 160 bytes a site)."""
    sites = sum(len(caller) + len(callee) + 160 for caller, callee in result.call_sites or ())
    return len(result.log_bytes) + (result.log.nbytes if result.log is not None else 0) + sites + 256


def _by_callee(result, f: int, forced_callees) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps from ``f`` on whose callee ``forced_callees`` names, their forced decisions), or None if none."""
    if not forced_callees:
        return None
    if len(result.call_sites) != len(result.decisions):
        raise ValueError(f"{result.module}: {len(result.call_sites)} call sites for {len(result.decisions)} "
                         f"decisions")
    steps = [(k, forced_callees[callee]) for k, (_, callee) in enumerate(result.call_sites[f:])
             if callee in forced_callees]
    if not steps:
        return None
    return np.array([k for k, _ in steps], np.int64), np.array([d for _, d in steps], np.int64)


def _reproduces(result, policy, forced: str, twin_inputs=None, forced_callees=None) -> bool:
    decisions = result.decisions
    n, f = len(decisions), len(forced)
    if f > n:  # forced decisions beyond the trajectory's end: not this trajectory
        return False
    if f and not np.array_equal(decisions[:f], np.frombuffer(forced.encode(), np.uint8) - ord("0")):
        return False
    if f == n:
        return True
    by_callee = _by_callee(result, f, forced_callees)
    if by_callee is not None and not np.array_equal(decisions[f:][by_callee[0]], by_callee[1]):
        return False
    if policy is None:  # LLVM's heuristic: its answer at every step is in the log
        expected = result.default_decisions[f:]
        if by_callee is not None:
            expected = expected.copy()
            expected[by_callee[0]] = by_callee[1]
        return bool(np.array_equal(decisions[f:], expected))
    try:
        batch = {s.name: result.log[s.name][f:] for s in policy.problem.features}
    except KeyError:  # the compile did not log a feature this policy takes
        return False
    twin = getattr(policy, "twin", None)
    x = twin_inputs(result, twin) if twin is not None and twin_inputs is not None else None
    decided = policy.decide(batch) if x is None else policy.decide(batch, inputs=x[f:])
    if by_callee is not None:
        decided = np.array(decided, copy=True)
        decided[by_callee[0]] = by_callee[1]
    return bool(np.array_equal(decided, decisions[f:]))


def replayed(result, log: bool, call_sites: bool, hit: bool = True):
    """A stored result as a compile returns it (a copy the caller may
    change): flagged as a cache hit, without what the caller did not ask
    for."""
    return replace(result, log=result.log if log else None, log_bytes=result.log_bytes if log else b"",
                   call_sites=result.call_sites if call_sites else None, cache_hit=hit or result.cache_hit,
                   decisions=result.decisions.copy(), default_decisions=result.default_decisions.copy(),
                   warnings=list(result.warnings),
                   grouped_code=None if result.grouped_code is None else list(result.grouped_code))


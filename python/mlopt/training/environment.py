"""Where the trainers' policies meet the problem: an environment measures
deterministic policies (ES, validation) and rolls out sampling policies
(PPO), so a trainer is the same code on the real compiler and on a
synthetic problem with a known optimum (tests/test_trainers_learn.py).

    env = CompilerEnvironment(problem, pool)
    env.costs(policies, [(policy_index, entry), ...], work)   # objective or None per item
    env.trajectories(policy, [(entry, seed), ...], work)      # Trajectory or None per item
    env.own_compiles(policy, [entry, ...], work)              # OwnCompile or None per entry
    env.forced_costs(policy, [(entry, "0110"), ...], work)    # objective or None per item

A cost is the problem's objective (lower is better: ``.text`` bytes for the
inliner); a trajectory is one module compiled with sampled decisions: its
cost and its training log (the features and the decisions taken, in order);
an own compile is a deterministic policy's compile of a module with its
decisions and logged features, and a forced cost the objective of a compile
whose first decisions are forced and whose rest the policy takes.

``total_delta_percent`` is THE objective every trainer reports: the
candidates' total cost over a set of modules against the heuristic's total
on the same modules, in percent (negative = smaller than the heuristic).
ES's training reward and PPO's training figure are this quantity on the
iteration's sampled modules; best-policy selection is it on validation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ..policy import MLPPolicy


@dataclass
class Trajectory:
    cost: float
    log: object  # a feature batch with the decision column (mlopt.Log or a mapping of arrays)


@dataclass
class OwnCompile:
    cost: float
    decisions: str  # '0'/'1' per decision, in the compile's order
    columns: dict  # the logged features (a feature batch), one row per decision


class Environment(Protocol):
    problem: object

    def costs(self, policies: Sequence, items: Sequence[tuple[int, object]], work: Path) -> list[float | None]: ...

    def trajectories(self, policy, items: Sequence[tuple[object, int]], work: Path) -> list[Trajectory | None]: ...

    def own_compiles(self, policy, entries: Sequence[object], work: Path) -> list[OwnCompile | None]: ...

    def forced_costs(self, policy, items: Sequence[tuple[object, str]], work: Path) -> list[float | None]: ...


def total_delta_percent(costs: Sequence[float | None], baselines: Sequence[float]) -> float | None:
    """100 * (sum of costs - sum of baselines) / sum of baselines over the
    items that have a cost; None when none has."""
    pairs = [(c, b) for c, b in zip(costs, baselines) if c is not None]
    base = float(sum(b for _, b in pairs))
    return 100.0 * (float(sum(c for c, _ in pairs)) - base) / base if base else None


class CompilerEnvironment:
    """The real compiler on a worker pool (local or Ray): policies are
    written under ``work`` (a new name per call: workers cache loaded
    policies by path) and compiled by :mod:`mlopt.rollouts`."""

    def __init__(self, problem, pool=None, *, twins: bool = True, start_from_trace: bool = True,
                 heuristic_costs: dict[str, float] | None = None):
        self.problem = problem
        self.pool = pool
        self.twins = twins  # write each MLP's numpy weights beside it for replay (RolloutTask.weights)
        # workers start a module's replay from mlopt trace's cached heuristic compile (RolloutTask.start_from_trace)
        self.start_from_trace = start_from_trace
        # with it: costs() answers in this process the items a worker would replay from the trace (a candidate
        # deciding as the heuristic throughout), without writing, sending or loading the candidate; an objective
        # other than .text bytes (linked_share) with ``heuristic_costs``: the heuristic's cost of each module by it
        self.answers = None
        if start_from_trace:
            from ..rollouts import HeuristicAnswers

            self.answers = HeuristicAnswers(heuristic_costs=heuristic_costs)
        self._calls = 0
        self.failures: list[tuple[str, str]] = []  # (module, reason) of the last call's failed rollouts
        # Of the last costs() call's rollouts, how many the workers' caches answered (trajectory replay
        # or repeated decisions: no compile, or no code generation).
        self.cache_hits = 0

    def _name(self, tag: str) -> str:
        self._calls += 1
        return f"{tag}{self._calls}"

    def _write(self, policy, path: Path) -> tuple[str, str | None]:
        """``policy`` as ``path`` (.tflite) and, for a plain MLP, its numpy twin beside it (replay settles
        most rows without the model: RolloutTask.weights); the two paths."""
        path.write_bytes(policy.to_tflite())
        weights = (str(path.with_suffix(".npz")) if self.twins and type(policy).logits is MLPPolicy.logits
                   else None)
        if weights:
            policy.save(weights, overwrite=True)
        return str(path), weights

    def _run(self, tasks: list) -> list:
        from ..rollouts import failures_of, run_rollouts

        results = run_rollouts(tasks, pool=self.pool, quiet=True) if tasks else []
        self.failures = failures_of(tasks, results)
        self.cache_hits = sum(bool(r.ok and r.value.cache_hit) for r in results)
        return results

    def costs(self, policies, items, work: Path) -> list[float | None]:
        from ..rollouts import RolloutTask

        work.mkdir(parents=True, exist_ok=True)
        stem = self._name("c")
        out = self.answers.costs(policies, items) if self.answers is not None else [None] * len(items)
        rest = [k for k, v in enumerate(out) if v is None]
        needed = sorted({items[k][0] for k in rest})
        written = {i: self._write(policies[i], work / f"{stem}-{i}.tflite") for i in needed}
        tasks = [RolloutTask(items[k][1], written[items[k][0]][0], problem=self.problem.name,
                             weights=written[items[k][0]][1], start_from_trace=self.start_from_trace) for k in rest]
        results = self._run(tasks)
        self.cache_hits += len(items) - len(rest)  # answered here: no compile, as a replay
        for k, r in zip(rest, results):
            out[k] = r.value.cost if r.ok else None
        return out

    def own_compiles(self, policy, entries, work: Path) -> list[OwnCompile | None]:
        from ..rollouts import RolloutTask, TraceDataset

        work.mkdir(parents=True, exist_ok=True)
        path, weights = self._write(policy, work / f"{self._name('o')}.tflite")
        tasks = [RolloutTask(e, path, log=True, decisions=True, problem=self.problem.name, weights=weights,
                             start_from_trace=self.start_from_trace)
                 for e in entries]
        out = []
        for r in self._run(tasks):
            if not r.ok:
                out.append(None)
                continue
            v = r.value
            decisions = "".join("1" if d else "0" for d in v.policy_decisions.tolist())
            columns = (TraceDataset.from_logs([v.module], [v.text_size], [v.log_bytes]).columns
                       if v.log_bytes else {})
            out.append(OwnCompile(v.cost, decisions, columns))
        return out

    def forced_costs(self, policy, items, work: Path) -> list[float | None]:
        from ..rollouts import RolloutTask

        work.mkdir(parents=True, exist_ok=True)
        path, weights = self._write(policy, work / f"{self._name('f')}.tflite")
        tasks = [RolloutTask(e, path, forced=forced, problem=self.problem.name, weights=weights,
                             start_from_trace=self.start_from_trace)
                 for e, forced in items]
        return [r.value.cost if r.ok else None for r in self._run(tasks)]

    def trajectories(self, policy, items, work: Path) -> list[Trajectory | None]:
        from ..log import read_log
        from ..rollouts import RolloutTask, failures_of, run_rollouts

        work.mkdir(parents=True, exist_ok=True)
        path = work / f"{self._name('s')}.npz"
        policy.save(path, overwrite=True)
        tasks = [RolloutTask(e, str(path), log=True, problem=self.problem.name, sample_seed=int(seed))
                 for e, seed in items]
        results = run_rollouts(tasks, pool=self.pool, quiet=True)
        self.failures = failures_of(tasks, results)
        out = []
        for r in results:
            if not r.ok:
                out.append(None)
            elif not r.value.log_bytes:  # no decision asked: nothing to learn from
                out.append(Trajectory(r.value.cost, None))
            else:
                out.append(Trajectory(r.value.cost, read_log(r.value.log_bytes)))
        return out


def first_failure(env) -> str:
    """'' or '; first: <module>: <reason>' from an environment's last call."""
    failures = getattr(env, "failures", None)
    return f"; first: {failures[0][0]}: {failures[0][1]}" if failures else ""


def rollout_seed(seed: int, iteration: int, index: int, sample: int = 0) -> int:
    """The sampling seed of one module's rollout in one iteration (``sample``:
    which of the module's rollouts in that iteration; 0 is the only one of a
    run that samples each module once)."""
    entropy = [seed, iteration, index] + ([sample] if sample else [])
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> 1)

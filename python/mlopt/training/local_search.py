"""Trajectory search and imitation, the approach behind ml-compiler-opt's
``inlining-Oz-v1.2`` (its BC-Max exploration): search each training module
for a decision sequence that compiles smaller than the policy's own, then
train the policy to imitate the best sequences found (behavioral cloning
on their logs, warm started from the starting policy), and keep the
imitation that does best on the validation modules (the starting policy
included).

A module's state is a trajectory: the decisions and logged features of a
compile. It starts as the starting policy's own compile. A move flips
decision ``k``: the compile is forced to the trajectory's decisions
``[:k]`` plus the flipped bit -- the same call sites as the parent's up to
``k``, since compiling is deterministic -- and the policy decides every
later call site (which may differ from the parent's after the flip). Moves
are tried where the policy is least sure of its answer (the two most
likely actions' probabilities closest), only after the last accepted flip,
ranked on the current trajectory's own logged features: after every
accepted flip the ranking is recomputed on the new trajectory. Each round
evaluates up to ``batch`` moves of every active module on the pool; a
module takes its smallest strictly smaller compile. A module stops at its
evaluation budget, after ``max_flips`` accepted flips (BC-Max: 10), or when
no move is left.

"Smaller" is the problem's objective (``Problem.objective``): ``.text``
bytes, or for ``inlining-linked`` the module's share of its package's
linked ``.text`` (grouped code charged 1/k; the rollouts read the table
``$MLOPT_LINKED_SHARES``), so a move that drops a COMDAT copy the package
still links from its other modules is credited that share, not the body.
An objective other than bytes needs the heuristic's cost of each module
(``baseline``: what :func:`mlopt.rollouts.build_linked_shares` returns).

Imitation weighs the rows so that each module-size partition (modules in
``partitions`` quantiles of their -Oz ``.text`` size) carries the same
total weight -- the many small modules do not drown the few large ones,
nor the reverse -- and the flipped decisions ``flip_weight`` times more.

Generic over the problem (features and decision columns come from it);
the compiler's forced decisions are 0/1, so the search needs a two-action
problem. Deterministic: the same trace, policy and config give the same
trajectories and policy bytes on any pool."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..corpus import CorpusEntry
from ..errors import MloptError
from ..policy import MLPPolicy
from ..policy.sampled import action_probabilities
from ..rollouts import RolloutTask, TraceDataset, run_rollouts
from .bc import train_bc


@dataclass
class SearchConfig:
    evaluations_per_module: int = 48
    batch: int = 8  # moves per module per round
    max_flips: int = 10  # accepted flips per module (BC-Max)
    max_decisions: int = 3000  # modules with more decisions keep the policy's own trajectory
    flip_weights: tuple[float, ...] = (1.0, 4.0, 16.0)  # imitation: weight of the flipped decisions
    partitions: int = 4  # imitation: module-size partitions of equal total weight
    epochs: int = 4
    lr: float = 1e-3
    seed: int = 0


@dataclass
class Trajectory:
    """A compile's decisions ('0'/'1'), logged features, ``.text`` size and
    cost (the problem's objective; the size for ``text_size``)."""

    decisions: str
    columns: dict[str, np.ndarray]
    size: int
    log_bytes: bytes = field(default=b"", repr=False)
    cost: float = 0.0


@dataclass
class ModuleSearch:
    """One module's search state."""

    entry: CorpusEntry
    baseline: float  # the heuristic's (-Oz) cost (the objective: .text bytes, linked share)
    start: float  # the starting policy's own cost
    best: Trajectory
    queue: list[int]  # positions to try, best first (all after the last accepted flip)
    evaluations: int = 0
    flips: list[dict] = field(default_factory=list)  # accepted moves: position, size, parent's size, costs
    heuristic_text: int = 0  # the heuristic's .text bytes (the trace's)
    start_text: int = 0  # the starting policy's .text bytes
    budget: int | None = None  # evaluations for this module (None: the config's evaluations_per_module)

    @property
    def saved(self) -> float:
        """Cost saved against the heuristic (bytes for text_size)."""
        return self.baseline - self.best.cost


def _trajectory(rollout, problem) -> Trajectory:
    ds = TraceDataset.from_logs([rollout.module], [rollout.text_size], [rollout.log_bytes])
    columns = ds.columns
    decisions = "".join("1" if v else "0" for v in rollout.policy_decisions.tolist())
    if columns and len(columns[problem.decision.name]) != len(decisions):
        raise MloptError(f"{rollout.module}: the log has {len(columns[problem.decision.name])} rows for "
                         f"{len(decisions)} decisions")
    return Trajectory(decisions, columns, rollout.text_size, rollout.log_bytes, float(rollout.cost))


def uncertainty_order(policy: MLPPolicy, columns: dict[str, np.ndarray], after: int = -1) -> list[int]:
    """Positions of a trajectory's decisions after ``after``, the policy's
    least certain first: smallest gap between its two most likely actions'
    probabilities (softmax of its logits) on the logged features; ties by
    position."""
    n = len(columns[policy.problem.decision.name]) if columns else 0
    if n <= after + 1:
        return []
    probs = action_probabilities(policy.logits(columns))
    top2 = np.sort(probs, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    positions = np.arange(after + 1, n)
    return [int(k) for k in positions[np.lexsort((positions, gap[after + 1:]))]]


def flip_move(decisions: str, k: int) -> str:
    """The forced prefix of the move that flips decision ``k``: the parent's
    decisions before ``k`` and the flipped bit (the policy decides the rest)."""
    return decisions[:k] + ("0" if decisions[k] == "1" else "1")


class TrajectorySearch:
    """Runs the search over ``train`` (entries with rows in ``ds``, the
    heuristic's trace: their -Oz sizes) from ``policy``'s own trajectories.
    ``work``: a directory for the policy's exported model. ``baseline``:
    the heuristic's cost of each module by the problem's objective; for
    ``text_size`` it defaults to the trace's sizes, any other objective
    requires it."""

    kind = "trajectory-search"  # the trajectories' dataset metadata
    moves = "flip"  # what a move changes (reports, `mlopt train search --moves`)

    def __init__(self, policy: MLPPolicy, ds: TraceDataset, train: list[CorpusEntry], config: SearchConfig, *,
                 work: Path, pool=None, baseline: Mapping[str, float] | None = None):
        problem = policy.problem
        self._check(problem)
        self.config, self.pool, self.problem, self.policy = config, pool, problem, policy
        index = ds.module_index()
        missing = [e.name for e in train if e.name not in index]
        if missing:
            raise MloptError(f"module {missing[0]!r} is not in the trace (trace the corpus first)")
        if baseline is None and problem.objective != "text_size":
            raise MloptError(f"problem {problem.name!r} is costed by {problem.objective}: the search needs the "
                             "heuristic's cost of every module (baseline)")
        missing = [] if baseline is None else [e.name for e in train if e.name not in baseline]
        if missing:
            raise MloptError(f"module {missing[0]!r} has no heuristic cost in the baseline "
                             f"({len(missing)} of {len(train)} missing)")
        work = Path(work)
        work.mkdir(parents=True, exist_ok=True)
        self.policy_path = str(work / "search-policy.tflite")
        Path(self.policy_path).write_bytes(policy.to_tflite())
        starts = self._run([self._start_task(e) for e in train])
        self.modules = []
        for e, r in zip(train, starts):
            if not r.ok:
                raise MloptError(f"{e.name}: the starting policy's compile failed: {r.describe()}")
            heuristic_text = int(ds.text_size[index[e.name]])
            m = self._start_module(e, heuristic_text if baseline is None else float(baseline[e.name]), r.value)
            m.heuristic_text, m.start_text = heuristic_text, m.best.size
            self.modules.append(m)
        self.round = 0

    @staticmethod
    def _check(problem) -> None:
        if problem.num_actions != 2:
            raise MloptError(f"trajectory search forces 0/1 decisions; problem {problem.name!r} has "
                             f"{problem.num_actions} actions")

    def _task(self, entry: CorpusEntry, **kw) -> RolloutTask:
        """A compile of ``entry`` by the search's policy, costed by its problem's objective."""
        return RolloutTask(entry, self.policy_path, log=True, decisions=True, problem=self.problem.name, **kw)

    def _start_task(self, entry: CorpusEntry) -> RolloutTask:
        return self._task(entry)

    def _start_module(self, entry: CorpusEntry, baseline: float, rollout) -> ModuleSearch:
        t = _trajectory(rollout, self.problem)
        order = uncertainty_order(self.policy, t.columns) if len(t.decisions) <= self.config.max_decisions else []
        return ModuleSearch(entry, baseline, t.cost, t, order)

    def delta_percent(self) -> float:
        """The modules' best compiles against the heuristic's, total cost (the objective) in % (negative =
        smaller)."""
        base = sum(m.baseline for m in self.modules)
        return 100.0 * -sum(m.saved for m in self.modules) / base if base else 0.0

    def _run(self, tasks: list[RolloutTask]) -> list:
        return run_rollouts(tasks, pool=self.pool, quiet=True) if tasks else []

    def active(self) -> list[ModuleSearch]:
        c = self.config
        return [m for m in self.modules if m.queue and m.evaluations < self.budget(m) and len(m.flips) < c.max_flips]

    def budget(self, m: ModuleSearch) -> int:
        return self.config.evaluations_per_module if m.budget is None else m.budget

    def _move_tasks(self, m: ModuleSearch, n: int) -> list[tuple[object, RolloutTask]]:
        """The next ``n`` moves of ``m`` (taken off its queue) and their compiles."""
        moves, m.queue = m.queue[:n], m.queue[n:]
        return [(k, self._task(m.entry, forced=flip_move(m.best.decisions, k))) for k in moves]

    def _accept(self, m: ModuleSearch, k, rollout) -> None:
        m.flips.append({"position": k, "size": rollout.text_size, "parent_size": m.best.size,
                        "cost": float(rollout.cost), "parent_cost": m.best.cost})
        m.best = _trajectory(rollout, self.problem)
        m.queue = uncertainty_order(self.policy, m.best.columns, after=k)  # re-ranked on the new trajectory

    def _retry(self, m: ModuleSearch, moves: list) -> None:
        """The round's other moves that beat the old best, after ``_accept`` took the best one: single
        flips are re-ranked on the new trajectory anyway (nothing to do)."""

    def step(self) -> dict:
        """One round; returns its metrics."""
        start = time.perf_counter()
        tasks, owners = [], []
        for m in self.active():
            for move, task in self._move_tasks(m, min(self.config.batch, self.budget(m) - m.evaluations)):
                tasks.append(task)
                owners.append((m, move))
        results = self._run(tasks)
        by_module: dict[int, list] = {}
        for (m, move), r in zip(owners, results):
            m.evaluations += 1
            if r.ok:
                by_module.setdefault(id(m), []).append((float(r.value.cost), move, r.value))
        improved = 0
        for m in {id(m): m for m, _ in owners}.values():
            tried = sorted(by_module.get(id(m), []), key=lambda t: (t[0], t[1]))
            if tried and tried[0][0] < m.best.cost:
                better = [move for cost, move, _ in tried[1:] if cost < m.best.cost]
                self._accept(m, tried[0][1], tried[0][2])
                self._retry(m, better)
                improved += 1
        self.round += 1
        elapsed = time.perf_counter() - start
        return {"round": self.round, "evaluations": len(tasks), "failed": sum(not r.ok for r in results),
                "improved_modules": improved, "active_modules": len(self.active()),
                "train_delta_percent": self.delta_percent(),
                "evaluations_per_s": len(tasks) / elapsed if elapsed > 0 else 0.0}

    def run(self, on_round: Callable[[dict], None] | None = None) -> list[dict]:
        rounds = []
        while self.active():
            rounds.append(self.step())
            if on_round:
                on_round(rounds[-1])
        return rounds

    def changed_rows(self) -> list[list[int]]:
        """Per module, the rows of its best trajectory that were flipped."""
        return [[f["position"] for f in m.flips] for m in self.modules]

    def trajectories(self) -> TraceDataset:
        """The logs of every module's best compile, as a trace dataset
        (``text_size``: the sizes those compiles gave), each checked by a
        replay forced to its whole decision string."""
        tasks = [RolloutTask(m.entry, None, forced=m.best.decisions, cache=False) for m in self.modules]
        for m, r in zip(self.modules, self._run(tasks)):
            if not r.ok:
                raise MloptError(f"{m.entry.name}: replaying its best trajectory failed: {r.describe()}")
            if r.value.text_size != m.best.size:
                raise MloptError(f"{m.entry.name}: its best trajectory compiled to {r.value.text_size} bytes on "
                                 f"replay, {m.best.size} in the search (the compiler is not deterministic?)")
        return TraceDataset.from_logs([m.entry.name for m in self.modules], [m.best.size for m in self.modules],
                                      [m.best.log_bytes for m in self.modules], {"kind": self.kind})

    def report(self) -> list[dict]:
        return [{"module": m.entry.name, "heuristic_text": m.heuristic_text, "start_text": m.start_text,
                 "best_text": m.best.size, "heuristic_cost": m.baseline, "start_cost": m.start,
                 "best_cost": m.best.cost, "evaluations": m.evaluations, "flips": m.flips,
                 "decisions": m.best.decisions} for m in self.modules]


def partition_weights(sizes: np.ndarray, rows: np.ndarray, partitions: int) -> np.ndarray:
    """Per-module row weight such that each of ``partitions`` size quantiles
    (by ``sizes``, ties kept together) carries the same total weight, rows
    within a partition weigh the same; mean row weight 1."""
    sizes, rows = np.asarray(sizes, np.float64), np.asarray(rows, np.int64)
    if len(sizes) == 0 or rows.sum() == 0:
        return np.ones(len(sizes))
    k = max(1, min(partitions, len(sizes)))
    edges = np.quantile(sizes, np.linspace(0, 1, k + 1)[1:-1]) if k > 1 else np.zeros(0)
    part = np.searchsorted(edges, sizes, side="right")
    weight = np.zeros(len(sizes))
    used = [p for p in np.unique(part) if rows[part == p].sum() > 0]
    for p in used:
        weight[part == p] = 1.0 / (len(used) * rows[part == p].sum())
    return weight * rows.sum()


def imitation_weights(best: TraceDataset, flipped: list[list[int]], baseline: list[int], config: SearchConfig,
                      flip_weight: float) -> np.ndarray:
    """Row weights of the best trajectories: size partitions of equal weight,
    the flipped decisions (positions per module) ``flip_weight`` times more."""
    per_module = partition_weights(np.asarray(baseline), np.diff(best.module_rows), config.partitions)
    weights = np.repeat(per_module, np.diff(best.module_rows)).astype(np.float32)
    for i, positions in enumerate(flipped):
        start = int(best.module_rows[i])
        for k in positions:
            weights[start + k] *= flip_weight
    return weights


def imitate(policy: MLPPolicy, best: TraceDataset, weights: np.ndarray, config: SearchConfig) -> MLPPolicy:
    """The starting policy trained further on the best trajectories' decisions."""
    return train_bc(best, policy.problem, epochs=config.epochs, lr=config.lr, heldout_fraction=0.0,
                    seed=config.seed, label=policy.problem.decision.name, init=policy, weights=weights).policy


def search_and_imitate(policy: MLPPolicy, ds: TraceDataset, train: list[CorpusEntry], run_dir: Path,
                       config: SearchConfig, *, validate: Callable[[MLPPolicy], float | None],
                       pool=None, say: Callable[[str], None] = lambda s: None,
                       search_class: type[TrajectorySearch] | None = None,
                       baseline: Mapping[str, float] | None = None) -> tuple[MLPPolicy, dict]:
    """The whole trainer: search (``search_class``: :class:`TrajectorySearch`,
    single flips, by default; :class:`.callee_search.CalleeSearch`, every
    site of one callee), imitation with each flip weight, choice by
    ``validate`` (the validation delta of the problem's objective in %; lower
    is better; ``baseline``: the heuristic's cost of each training module,
    needed for an objective other than .text bytes). Writes
    ``metrics.jsonl``, ``search.json`` and ``trajectories.npz`` into
    ``run_dir``; returns the chosen policy and a report."""
    search_class = search_class or TrajectorySearch
    moves = search_class.moves
    run_dir = Path(run_dir)
    start = time.perf_counter()
    search = search_class(policy, ds, train, config, pool=pool, work=run_dir / "work", baseline=baseline)

    def on_round(m: dict) -> None:
        with open(run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(m, sort_keys=True) + "\n")
        say(f"         round {m['round']}: {m['evaluations']} evaluations, {m['improved_modules']} modules "
            f"improved, training modules {m['train_delta_percent']:+.3f}% vs -Oz, "
            f"{m['evaluations_per_s']:.1f} evaluations/s")

    rounds = search.run(on_round)
    searched_delta = search.delta_percent()
    search_seconds = time.perf_counter() - start
    best = search.trajectories()
    best.save(run_dir / "trajectories.npz", force=True)
    (run_dir / "search.json").write_text(json.dumps(search.report(), indent=1) + "\n")
    flipped = search.changed_rows()
    baseline = [m.baseline for m in search.modules]
    candidates = [("start", policy)] + [
        (f"flip_weight={w:g}", imitate(policy, best, imitation_weights(best, flipped, baseline, config, w), config))
        for w in config.flip_weights]
    scores = []
    for name, p in candidates:
        v = validate(p)
        scores.append(v)
        say(f"         {name}: validation {'n/a' if v is None else f'{v:+.3f}%'}")
    finite = [(v, i) for i, v in enumerate(scores) if v is not None]
    chosen = min(finite)[1] if finite else len(candidates) - 1
    base = sum(baseline)
    report = {"config": asdict(config), "moves": moves, "rounds": len(rounds),
              "evaluations": sum(r["evaluations"] for r in rounds),
              "search_seconds": search_seconds,
              "start_delta_percent": 100.0 * (sum(m.start for m in search.modules) - base) / base if base else 0.0,
              "searched_delta_percent": searched_delta,
              "train_delta_percent": search.delta_percent(),
              "improved_modules": sum(bool(m.flips) for m in search.modules), "modules": len(search.modules),
              "flips": sum(len(f) for f in flipped),
              "validation": {name: v for (name, _), v in zip(candidates, scores)}, "chosen": candidates[chosen][0]}
    return candidates[chosen][1], report

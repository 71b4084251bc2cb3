"""Trajectory search and imitation, the approach behind ml-compiler-opt's
``inlining-Oz-v1.2``: search each training module's decision sequence for
one that compiles smaller than the heuristic's, then train the policy to
imitate the best sequences found (behavioral cloning on their logs, warm
started from the starting policy), and keep the imitation that does best
on the validation modules (the starting policy included).

The search is a first-improvement hill climb on a module's decision string
(its state: the decisions its best compile made). A move flips one
decision; the compile is forced to the whole string (the inliner's first
``len`` decisions, by position) and the heuristic decides any further call
sites. Moves are tried in order of the starting policy's uncertainty at
that call site (smallest logit margin first) -- where a policy's answer is
most likely to be wrong. Each round evaluates up to ``batch`` moves of
every active module on the pool; a module takes its best strictly smaller
compile and re-tries that round's other improving moves first next round.
A module stops at its evaluation budget or when no move is left.

Generic over the problem (features, decision and default-decision columns
come from it); the compiler's forced decisions are 0/1, so the search needs
a two-action problem. Deterministic: the same trace, policy and config give
the same trajectories and policy bytes on any pool."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..corpus import CorpusEntry
from ..errors import MloptError
from ..policy import MLPPolicy
from ..policy.batching import feature_matrix
from ..rollouts import RolloutTask, TraceDataset, run_rollouts
from .bc import train_bc
from .mlp_train import forward


@dataclass
class SearchConfig:
    evaluations_per_module: int = 48
    batch: int = 8  # moves per module per round
    max_decisions: int = 3000  # modules with more decisions keep the heuristic's trajectory
    flip_weights: tuple[float, ...] = (1.0, 4.0, 16.0)  # imitation: weight of rows the search changed
    epochs: int = 4
    lr: float = 1e-3
    seed: int = 0


@dataclass
class ModuleSearch:
    """One module's search state."""

    entry: CorpusEntry
    baseline: int  # the heuristic's .text bytes
    best: int
    decisions: str  # of the best compile
    queue: list[int]  # positions to try, best first
    evaluations: int = 0
    flips: list[int] = field(default_factory=list)  # accepted moves' positions, in order

    @property
    def saved(self) -> int:
        return self.baseline - self.best

    def moves(self, n: int) -> list[int]:
        out = []
        while self.queue and len(out) < n:
            k = self.queue.pop(0)
            if k < len(self.decisions):
                out.append(k)
        return out


def uncertainty_order(policy: MLPPolicy, ds: TraceDataset, i: int) -> list[int]:
    """Positions of module ``i``'s decisions, the policy's least certain first
    (smallest gap between its two best logits; ties by position)."""
    rows = ds.rows_of(i)
    n = rows.stop - rows.start
    if n == 0:
        return []
    cols = {s.name: ds.columns[s.name][rows] for s in policy.problem.features}
    x = policy.vocab.normalize(feature_matrix(cols, policy.problem.features), policy.widths)
    logits, _ = forward(policy.layers, x)
    top2 = np.sort(logits, axis=1)[:, -2:]
    margin = (top2[:, 1] - top2[:, 0]).astype(np.float64)
    return [int(k) for k in np.lexsort((np.arange(n), margin))]


def _flip(decisions: str, k: int) -> str:
    return decisions[:k] + ("0" if decisions[k] == "1" else "1") + decisions[k + 1:]


class TrajectorySearch:
    """Runs the search over ``train`` (entries with rows in ``ds``)."""

    def __init__(self, policy: MLPPolicy, ds: TraceDataset, train: list[CorpusEntry], config: SearchConfig, *,
                 pool=None):
        problem = policy.problem
        if problem.num_actions != 2:
            raise MloptError(f"trajectory search forces 0/1 decisions; problem {problem.name!r} has "
                             f"{problem.num_actions} actions")
        self.config, self.pool, self.problem = config, pool, problem
        index = ds.module_index()
        decision = ds.columns[problem.decision.name].reshape(-1)
        self.modules: list[ModuleSearch] = []
        for e in train:
            if e.name not in index:
                raise MloptError(f"module {e.name!r} is not in the trace (trace the corpus first)")
            i = index[e.name]
            rows = ds.rows_of(i)
            d = "".join("1" if v else "0" for v in decision[rows].tolist())
            order = uncertainty_order(policy, ds, i) if len(d) <= config.max_decisions else []
            self.modules.append(ModuleSearch(e, int(ds.text_size[i]), int(ds.text_size[i]), d, order))
        self.round = 0

    def active(self) -> list[ModuleSearch]:
        return [m for m in self.modules if m.queue and m.evaluations < self.config.evaluations_per_module]

    def step(self) -> dict:
        """One round; returns its metrics."""
        start = time.perf_counter()
        tasks, owners = [], []
        for m in self.active():
            for k in m.moves(min(self.config.batch, self.config.evaluations_per_module - m.evaluations)):
                tasks.append(RolloutTask(m.entry, None, forced=_flip(m.decisions, k), decisions=True))
                owners.append((m, k))
        results = run_rollouts(tasks, pool=self.pool, quiet=True) if tasks else []
        by_module: dict[int, list] = {}
        for (m, k), r in zip(owners, results):
            m.evaluations += 1
            if r.ok:
                by_module.setdefault(id(m), []).append((r.value.text_size, k, r.value))
        improved = 0
        for m in {id(m): m for m, _ in owners}.values():
            tried = sorted(by_module.get(id(m), []), key=lambda t: (t[0], t[1]))
            if tried and tried[0][0] < m.best:
                previous = m.best
                size, k, rollout = tried[0]
                m.best = size
                m.decisions = "".join("1" if v else "0" for v in rollout.policy_decisions.tolist())
                m.flips.append(k)
                retry = [kk for s, kk, _ in tried[1:] if s < previous]
                m.queue = retry + [q for q in m.queue if q not in retry]
                improved += 1
        self.round += 1
        elapsed = time.perf_counter() - start
        base = sum(m.baseline for m in self.modules)
        return {"round": self.round, "evaluations": len(tasks), "failed": sum(not r.ok for r in results),
                "improved_modules": improved, "active_modules": len(self.active()),
                "train_delta_percent": 100.0 * -sum(m.saved for m in self.modules) / base if base else 0.0,
                "evaluations_per_s": len(tasks) / elapsed if elapsed > 0 else 0.0}

    def run(self, on_round: Callable[[dict], None] | None = None) -> list[dict]:
        rounds = []
        while self.active():
            rounds.append(self.step())
            if on_round:
                on_round(rounds[-1])
        return rounds

    def trajectories(self) -> TraceDataset:
        """The logs of every module's best compile, as a trace dataset
        (``text_size``: the sizes those compiles gave, checked against the
        search's)."""
        tasks = [RolloutTask(m.entry, None, log=True, forced=m.decisions, cache=False) for m in self.modules]
        results = run_rollouts(tasks, pool=self.pool, quiet=True)
        for m, r in zip(self.modules, results):
            if not r.ok:
                raise MloptError(f"{m.entry.name}: replaying its best trajectory failed: {r.describe()}")
            if r.value.text_size != m.best:
                raise MloptError(f"{m.entry.name}: its best trajectory compiled to {r.value.text_size} bytes on "
                                 f"replay, {m.best} in the search (the compiler is not deterministic?)")
        return TraceDataset.from_logs([m.entry.name for m in self.modules], [m.best for m in self.modules],
                                      [r.value.log_bytes for r in results], {"kind": "trajectory-search"})

    def report(self) -> list[dict]:
        return [{"module": m.entry.name, "heuristic_text": m.baseline, "best_text": m.best,
                 "evaluations": m.evaluations, "flips": m.flips} for m in self.modules]


def imitate(policy: MLPPolicy, best: TraceDataset, config: SearchConfig, flip_weight: float) -> MLPPolicy:
    """The starting policy trained further on the best trajectories' decisions;
    rows whose decision differs from the heuristic's weigh ``flip_weight``."""
    problem = policy.problem
    decided = best.columns[problem.decision.name].reshape(-1)
    weights = np.ones(len(best), np.float32)
    if problem.default_decision is not None:
        weights[decided != best.columns[problem.default_decision.name].reshape(-1)] = flip_weight
    return train_bc(best, problem, epochs=config.epochs, lr=config.lr, heldout_fraction=0.0, seed=config.seed,
                    label=problem.decision.name, init=policy, weights=weights).policy


def search_and_imitate(policy: MLPPolicy, ds: TraceDataset, train: list[CorpusEntry], run_dir: Path,
                       config: SearchConfig, *, validate: Callable[[MLPPolicy], float | None],
                       pool=None, say: Callable[[str], None] = lambda s: None) -> tuple[MLPPolicy, dict]:
    """The whole trainer: search, imitation with each flip weight, choice by
    ``validate`` (the validation .text delta in %; lower is better). Writes
    ``metrics.jsonl``, ``search.json`` and ``trajectories.npz`` into
    ``run_dir``; returns the chosen policy and a report."""
    run_dir = Path(run_dir)
    search = TrajectorySearch(policy, ds, train, config, pool=pool)
    start = time.perf_counter()

    def on_round(m: dict) -> None:
        with open(run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(m, sort_keys=True) + "\n")
        say(f"         round {m['round']}: {m['evaluations']} evaluations, {m['improved_modules']} modules "
            f"improved, training modules {m['train_delta_percent']:+.3f}% vs -Oz, "
            f"{m['evaluations_per_s']:.1f} evaluations/s")

    rounds = search.run(on_round)
    search_seconds = time.perf_counter() - start
    best = search.trajectories()
    best.save(run_dir / "trajectories.npz", force=True)
    (run_dir / "search.json").write_text(json.dumps(search.report(), indent=1) + "\n")
    candidates = [("start", policy)] + [(f"flip_weight={w:g}", imitate(policy, best, config, w))
                                        for w in config.flip_weights]
    scores = []
    for name, p in candidates:
        v = validate(p)
        scores.append(v)
        say(f"         {name}: validation {'n/a' if v is None else f'{v:+.3f}%'}")
    finite = [(v, i) for i, v in enumerate(scores) if v is not None]
    chosen = min(finite)[1] if finite else len(candidates) - 1
    base = sum(m.baseline for m in search.modules)
    report = {"config": asdict(config), "rounds": len(rounds), "evaluations": sum(r["evaluations"] for r in rounds),
              "search_seconds": search_seconds,
              "train_delta_percent": 100.0 * -sum(m.saved for m in search.modules) / base if base else 0.0,
              "improved_modules": sum(m.saved > 0 for m in search.modules), "modules": len(search.modules),
              "changed_rows": int((best.columns[policy.problem.decision.name] !=
                                   best.columns[policy.problem.default_decision.name]).sum())
              if policy.problem.default_decision is not None else None,
              "validation": {name: v for (name, _), v in zip(candidates, scores)}, "chosen": candidates[chosen][0]}
    return candidates[chosen][1], report

"""Search over callees: the local search whose moves are "never inline f"
and "inline f wherever the inliner asks" for one function ``f`` of the
module, every site of ``f`` at once.

Why a second kind of move: a single flip cannot find the changes that
repeat across packages. ``std::string``'s destructor, say, is inlined at
every one of its sites at ``-Oz``; declining it at one site alone makes
the module larger (its ``linkonce_odr`` body must now be emitted once), and
only declining it everywhere pays. Such callees -- header code of the
language's library, a package's small helpers -- are what a policy can
carry to code it never saw, while single flips find per-module accidents
(measured in benchmarks/README.md, "Trainers on the Debian corpus").

A module's state is the starting policy's compile plus the callees forced
so far (``forced_callees`` of the compiler: every site of a forced callee
gets its decision, the policy decides every other site). The moves of a
state are, for each callee named at a logged site, the decision opposite
to what some of its sites got, ranked by how many sites they change
(ties by name). Each round evaluates up to ``batch`` untried moves of
every active module on the pool, on top of the callees already forced; a
module takes its smallest strictly smaller compile and ranks its moves
again on the new compile. A module stops at its evaluation budget, after
``max_flips`` accepted moves, or when no move is left.

The imitation rows that carry the searched choice are those of sites
whose callee was forced (:meth:`CalleeSearch.changed_rows`), weighted as
:mod:`.local_search` weighs flipped decisions. Deterministic like it."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..corpus import CorpusEntry
from ..errors import MloptError
from ..policy import MLPPolicy
from ..rollouts import RolloutTask, TraceDataset, run_rollouts
from .local_search import SearchConfig, Trajectory, _trajectory


def callee_moves(sites: list[tuple[str, str]], decisions: str, skip=frozenset()) -> list[tuple[str, int]]:
    """The moves of a compile: (callee, 0) for a callee inlined at some site,
    (callee, 1) for one declined at some site; most sites changed first,
    then by name and decision. Unnamed (indirect) callees and ``skip`` are
    left out."""
    inlined, declined = Counter(), Counter()
    for (_, callee), d in zip(sites, decisions):
        if callee:
            (inlined if d == "1" else declined)[callee] += 1
    moves = [((callee, 0), n) for callee, n in inlined.items()] + [((callee, 1), n) for callee, n in
                                                                    declined.items()]
    moves = [(m, n) for m, n in moves if m not in skip]
    return [m for m, _ in sorted(moves, key=lambda t: (-t[1], t[0][0], t[0][1]))]


@dataclass
class CalleeModule:
    """One module's search state."""

    entry: CorpusEntry
    baseline: int  # the heuristic's (-Oz) .text bytes
    start: int  # the starting policy's own .text bytes
    best: Trajectory
    sites: list[tuple[str, str]]  # (caller, callee) of each of best's decisions
    queue: list[tuple[str, int]]
    forced: dict[str, int] = field(default_factory=dict)  # accepted moves
    tried: set = field(default_factory=set)
    evaluations: int = 0
    flips: list[dict] = field(default_factory=list)  # accepted moves: callee, decision, size, parent's size

    @property
    def saved(self) -> int:
        return self.baseline - self.best.size


class CalleeSearch:
    """Runs the callee search over ``train`` from ``policy``'s own compiles
    (the interface of :class:`.local_search.TrajectorySearch`)."""

    def __init__(self, policy: MLPPolicy, ds: TraceDataset, train: list[CorpusEntry], config: SearchConfig, *,
                 work: Path, pool=None):
        problem = policy.problem
        if problem.num_actions != 2 or problem.objective != "text_size":
            raise MloptError(f"callee search forces inlining decisions; problem {problem.name!r} is not an "
                             "inlining problem")
        self.config, self.pool, self.problem, self.policy = config, pool, problem, policy
        index = ds.module_index()
        missing = [e.name for e in train if e.name not in index]
        if missing:
            raise MloptError(f"module {missing[0]!r} is not in the trace (trace the corpus first)")
        work = Path(work)
        work.mkdir(parents=True, exist_ok=True)
        self.policy_path = str(work / "search-policy.tflite")
        Path(self.policy_path).write_bytes(policy.to_tflite())
        starts = self._run([RolloutTask(e, self.policy_path, log=True, decisions=True, call_sites=True)
                            for e in train])
        self.modules: list[CalleeModule] = []
        for e, r in zip(train, starts):
            if not r.ok:
                raise MloptError(f"{e.name}: the starting policy's compile failed: {r.describe()}")
            t = _trajectory(r.value, problem)
            sites = [tuple(s) for s in r.value.call_sites]
            queue = callee_moves(sites, t.decisions) if len(t.decisions) <= config.max_decisions else []
            self.modules.append(CalleeModule(e, int(ds.text_size[index[e.name]]), t.size, t, sites, queue))
        self.round = 0

    def _run(self, tasks: list[RolloutTask]) -> list:
        return run_rollouts(tasks, pool=self.pool, quiet=True) if tasks else []

    def active(self) -> list[CalleeModule]:
        c = self.config
        return [m for m in self.modules if m.queue and m.evaluations < c.evaluations_per_module
                and len(m.flips) < c.max_flips]

    def step(self) -> dict:
        start = time.perf_counter()
        tasks, owners = [], []
        for m in self.active():
            n = min(self.config.batch, self.config.evaluations_per_module - m.evaluations)
            moves, m.queue = m.queue[:n], m.queue[n:]
            for callee, d in moves:
                m.tried.add((callee, d))
                forced = tuple(sorted({**m.forced, callee: d}.items()))
                tasks.append(RolloutTask(m.entry, self.policy_path, forced_callees=forced, log=True,
                                         decisions=True, call_sites=True))
                owners.append((m, (callee, d)))
        results = self._run(tasks)
        by_module: dict[int, list] = {}
        for (m, move), r in zip(owners, results):
            m.evaluations += 1
            if r.ok:
                by_module.setdefault(id(m), []).append((r.value.text_size, move, r.value))
        improved = 0
        for m in {id(m): m for m, _ in owners}.values():
            tried = sorted(by_module.get(id(m), []), key=lambda t: (t[0], t[1]))
            if tried and tried[0][0] < m.best.size:
                size, (callee, d), rollout = tried[0]
                m.flips.append({"callee": callee, "decision": d, "size": size, "parent_size": m.best.size})
                m.forced[callee] = d
                m.best = _trajectory(rollout, self.problem)
                m.sites = [tuple(s) for s in rollout.call_sites]
                m.queue = callee_moves(m.sites, m.best.decisions, skip=m.tried | {(c, 1 - v) for c, v in
                                                                                   m.forced.items()})
                improved += 1
        self.round += 1
        elapsed = time.perf_counter() - start
        base = sum(m.baseline for m in self.modules)
        return {"round": self.round, "evaluations": len(tasks), "failed": sum(not r.ok for r in results),
                "improved_modules": improved, "active_modules": len(self.active()),
                "train_delta_percent": 100.0 * -sum(m.saved for m in self.modules) / base if base else 0.0,
                "evaluations_per_s": len(tasks) / elapsed if elapsed > 0 else 0.0}

    def run(self, on_round=None) -> list[dict]:
        rounds = []
        while self.active():
            rounds.append(self.step())
            if on_round:
                on_round(rounds[-1])
        return rounds

    def keep_shared(self, min_packages: int) -> dict:
        """Keeps only the accepted moves that were accepted in at least
        ``min_packages`` packages (a move that helps in one package is
        likelier an accident of its code than a rule a policy can carry to
        others): every module with a move dropped is compiled again with the
        moves kept (on top of the starting policy) and that compile becomes
        its best. Returns what was kept."""
        from ..corpus.split import package_of

        seen: dict[tuple[str, int], set] = {}
        for m in self.modules:
            for f in m.flips:
                seen.setdefault((f["callee"], f["decision"]), set()).add(package_of(m.entry.name))
        shared = {move for move, packages in seen.items() if len(packages) >= min_packages}
        redo = [m for m in self.modules if any(move not in shared for move in m.forced.items())]
        tasks = [RolloutTask(m.entry, self.policy_path, log=True, decisions=True, call_sites=True,
                             forced_callees=tuple(sorted(kv for kv in m.forced.items() if kv in shared)))
                 for m in redo]
        for m, task, r in zip(redo, tasks, self._run(tasks)):
            if not r.ok:
                raise MloptError(f"{m.entry.name}: compiling its shared moves failed: {r.describe()}")
            m.forced = dict(task.forced_callees)
            m.flips = [f for f in m.flips if (f["callee"], f["decision"]) in shared]
            m.best = _trajectory(r.value, self.problem)
            m.sites = [tuple(s) for s in r.value.call_sites]
        base = sum(m.baseline for m in self.modules)
        return {"min_packages": min_packages, "moves_kept": len(shared), "moves_dropped": len(seen) - len(shared),
                "modules_recompiled": len(redo),
                "train_delta_percent": 100.0 * -sum(m.saved for m in self.modules) / base if base else 0.0}

    def changed_rows(self) -> list[list[int]]:
        """Per module, the rows of its best compile whose callee was forced."""
        return [[i for i, (_, callee) in enumerate(m.sites) if callee in m.forced] for m in self.modules]

    def trajectories(self) -> TraceDataset:
        """The logs of every module's best compile, each checked by a replay
        forced to its whole decision string (as TrajectorySearch does)."""
        tasks = [RolloutTask(m.entry, None, forced=m.best.decisions, cache=False) for m in self.modules]
        for m, r in zip(self.modules, self._run(tasks)):
            if not r.ok:
                raise MloptError(f"{m.entry.name}: replaying its best trajectory failed: {r.describe()}")
            if r.value.text_size != m.best.size:
                raise MloptError(f"{m.entry.name}: its best trajectory compiled to {r.value.text_size} bytes on "
                                 f"replay, {m.best.size} in the search (the compiler is not deterministic?)")
        return TraceDataset.from_logs([m.entry.name for m in self.modules], [m.best.size for m in self.modules],
                                      [m.best.log_bytes for m in self.modules], {"kind": "callee-search"})

    def report(self) -> list[dict]:
        return [{"module": m.entry.name, "heuristic_text": m.baseline, "start_text": m.start,
                 "best_text": m.best.size, "evaluations": m.evaluations, "flips": m.flips,
                 "decisions": m.best.decisions} for m in self.modules]

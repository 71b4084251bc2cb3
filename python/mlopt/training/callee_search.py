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
again on the new compile, the round's other moves that made it smaller
first (tried again on top of the one taken). A module stops at its evaluation budget, after
``max_flips`` accepted moves, or when no move is left.

The imitation rows that carry the searched choice are those of sites
whose callee was forced (:meth:`CalleeSearch.changed_rows`), weighted as
:mod:`.local_search` weighs flipped decisions. Deterministic like it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..corpus import CorpusEntry
from ..errors import MloptError
from ..problems import get
from ..rollouts import RolloutTask
from .local_search import ModuleSearch, TrajectorySearch, _trajectory


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
class CalleeModule(ModuleSearch):
    """One module's search state: ``queue`` holds (callee, decision) moves,
    ``flips`` the accepted ones (callee, decision, size, parent's size)."""

    sites: list[tuple[str, str]] = field(default_factory=list)  # (caller, callee) of each of best's decisions
    forced: dict[str, int] = field(default_factory=dict)  # accepted moves
    tried: set = field(default_factory=set)


class CalleeSearch(TrajectorySearch):
    """Runs the callee search over ``train`` from ``policy``'s own compiles
    (:class:`.local_search.TrajectorySearch` with other moves)."""

    kind = "callee-search"
    moves = "callee"

    @staticmethod
    def _check(problem) -> None:
        if problem.num_actions != 2 or problem.decision != get("inlining").decision:
            raise MloptError(f"callee search forces inlining decisions; problem {problem.name!r} is not an "
                             "inlining problem")

    def _start_task(self, entry: CorpusEntry) -> RolloutTask:
        return self._task(entry, call_sites=True)

    def _start_module(self, entry: CorpusEntry, baseline: float, rollout) -> CalleeModule:
        t = _trajectory(rollout, self.problem)
        sites = [tuple(s) for s in rollout.call_sites]
        queue = callee_moves(sites, t.decisions) if len(t.decisions) <= self.config.max_decisions else []
        return CalleeModule(entry, baseline, t.cost, t, queue, sites=sites)

    def _move_tasks(self, m: CalleeModule, n: int) -> list[tuple[object, RolloutTask]]:
        moves, m.queue = m.queue[:n], m.queue[n:]
        m.tried.update(moves)
        return [((callee, d), self._task(m.entry, call_sites=True,
                                         forced_callees=tuple(sorted({**m.forced, callee: d}.items()))))
                for callee, d in moves]

    def _accept(self, m: CalleeModule, move, rollout) -> None:
        callee, d = move
        m.flips.append({"callee": callee, "decision": d, "size": rollout.text_size, "parent_size": m.best.size,
                        "cost": float(rollout.cost), "parent_cost": m.best.cost})
        m.forced[callee] = d
        m.best = _trajectory(rollout, self.problem)
        m.sites = [tuple(s) for s in rollout.call_sites]
        m.queue = callee_moves(m.sites, m.best.decisions, skip=m.tried | {(c, 1 - v) for c, v in m.forced.items()})

    def _retry(self, m: CalleeModule, moves: list) -> None:
        """The round's other moves that made the module smaller are tried first on the new compile (a
        round keeps only its best move; without this, ``batch`` parallel moves would find an improvement
        and drop it)."""
        again = [move for move in moves if move[0] not in m.forced]
        m.tried.difference_update(again)
        fresh = callee_moves(m.sites, m.best.decisions, skip=m.tried | {(c, 1 - v) for c, v in m.forced.items()})
        m.queue = [move for move in again if move in fresh] + [move for move in fresh if move not in again]

    def changed_rows(self) -> list[list[int]]:
        """Per module, the rows of its best compile whose callee was forced."""
        return [[i for i, (_, callee) in enumerate(m.sites) if callee in m.forced] for m in self.modules]

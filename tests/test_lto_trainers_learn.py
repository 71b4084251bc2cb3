"""Trainers must learn under full LTO, on the real compiler and linker: a
synthetic merged module (tests/support/merged.py: a shared library whose
hidden helpers only the link-time inliner sees) has a known optimum, the
best all-or-none choice per helper found by enumerating them all, each
choice a compile and an lld link costed by the binary's .text (problem
inlining-lto). The heuristic is 20% above it there. The callee search and
ES, started from a policy that decides as the heuristic, must reach it;
with the objective's sign flipped, neither may come near it."""

from __future__ import annotations

import dataclasses
import os
from unittest import mock

import pytest

from mlopt.corpus import corpus_entries
from mlopt.problems import load_weights
from mlopt.rollouts import RolloutTask, run_rollouts
from mlopt.training import ESConfig, ESTrainer
from mlopt.training.callee_search import CalleeSearch
from mlopt.training.environment import CompilerEnvironment
from mlopt.training.local_search import SearchConfig
from tests.support import merged

pytestmark = pytest.mark.llvm
PROBLEM = "inlining-lto"


@pytest.fixture(scope="module")
def synthetic(llvm_tools, tmp_path_factory):
    """The module's corpus entry, its trace, the heuristic's cost, the optimum and a heuristic-deciding start."""
    from mlopt.problems import get
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.rollouts import trace_corpus
    from mlopt.training import train_bc

    root = tmp_path_factory.mktemp("merged")
    corpus = merged.build(root, llvm_tools["major"])
    entry = corpus_entries(corpus)[0]
    with mock.patch.dict(os.environ, {"MLOPT_LLVM": str(llvm_tools["major"])}):  # set up before the test's body
        ds = trace_corpus(corpus, callee_linkage=True, quiet=True)
        heuristic = run_rollouts([RolloutTask(entry, None, problem=PROBLEM)], quiet=True)[0].value.cost
        optimum, choice = merged.callee_optimum(entry)
    bc = train_bc(ds, get("inlining"), epochs=3, hidden=()).policy  # linear
    with_linkage_input(with_default_prior(bc, 1.0)).save(root / "start.npz")
    return entry, ds, heuristic, optimum, choice, load_weights(root / "start.npz", PROBLEM), root


def _cost(entry, policy, tmp_path) -> float:
    path = policy.export(tmp_path / f"p{len(list(tmp_path.iterdir()))}")
    r = run_rollouts([RolloutTask(entry, str(path), problem=PROBLEM, cache=False)], quiet=True)[0]
    assert r.ok, r.describe()
    return r.value.cost


def test_the_module_has_room_and_the_optimum_is_every_helpers_best(synthetic):
    entry, _, heuristic, optimum, choice, start, _ = synthetic
    assert optimum <= 0.85 * heuristic  # much to gain over the heuristic
    # popcount and mix helpers declined, switch helpers inlined (the module docstring's account)
    assert choice == {f"h{i}": int(kind == "switch") for i, (kind, _, _) in enumerate(merged.HELPERS)}


class _Flipped:
    """The objective's sign flipped around the heuristic's cost: smaller binaries score worse."""

    def __init__(self, heuristic: float):
        self.heuristic = heuristic

    def __call__(self, cost):
        return None if cost is None else 2 * self.heuristic - cost


class _FlippedSearch(CalleeSearch):
    flip: _Flipped

    def _run(self, tasks):
        out = super()._run(tasks)
        return [dataclasses.replace(r, value=dataclasses.replace(r.value, cost=self.flip(r.value.cost)))
                if r.ok else r for r in out]


class _FlippedEnvironment(CompilerEnvironment):
    flip: _Flipped

    def costs(self, policies, items, work):
        return [self.flip(c) for c in super().costs(policies, items, work)]


def _search(cls, synthetic, tmp_path, flip=None):
    entry, ds, heuristic, *_, start, _ = synthetic
    cls = type("S", (cls,), {"flip": flip}) if flip else cls
    search = cls(start, ds, [entry], SearchConfig(evaluations_per_module=24, batch=4, max_flips=24),
                 work=tmp_path, baseline={entry.name: flip(heuristic) if flip else heuristic})
    search.run()
    return search.modules[0]


def test_callee_search_reaches_the_optimum_and_not_with_the_sign_flipped(synthetic, tmp_path):
    entry, _, heuristic, optimum, choice, _, _ = synthetic
    m = _search(CalleeSearch, synthetic, tmp_path / "up")
    assert m.best.cost == optimum
    assert m.forced == {c: d for c, d in choice.items() if c in m.forced}  # every move it kept is the optimum's
    flipped = _search(_FlippedSearch, synthetic, tmp_path / "down", _Flipped(heuristic))
    forced = tuple(sorted(flipped.forced.items()))
    real = run_rollouts([RolloutTask(entry, None, problem=PROBLEM, forced_callees=forced)], quiet=True)[0].value.cost
    assert real > heuristic  # it made the binary larger


def _es(synthetic, tmp_path, flip=None):
    entry, _, heuristic, *_, start, _ = synthetic
    baseline = {entry.name: heuristic}
    env = None
    if flip:
        env = type("E", (_FlippedEnvironment,), {"flip": flip})(start.problem, heuristic_costs=baseline)
    cfg = ESConfig(iterations=10, perturbations=8, sigma=0.5, lr=0.3, modules_per_perturbation=1, seed=0)
    trainer = ESTrainer(start, [entry], baseline, tmp_path, cfg, validation=[entry], env=env)
    trainer.run()
    return load_weights(tmp_path / "best" / "policy.npz", PROBLEM)  # the iterate ES keeps: best on validation


def test_es_reaches_the_optimum_and_not_with_the_sign_flipped(synthetic, tmp_path):
    entry, _, heuristic, optimum, _, start, _ = synthetic
    assert _cost(entry, start, tmp_path) == heuristic  # the start decides as the heuristic
    reached = _cost(entry, _es(synthetic, tmp_path / "up"), tmp_path)
    assert reached == optimum, (reached, optimum, heuristic)
    flipped = _cost(entry, _es(synthetic, tmp_path / "down", _Flipped(heuristic)), tmp_path)
    assert flipped > optimum + 0.5 * (heuristic - optimum)

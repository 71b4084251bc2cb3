"""A synthetic problem with a known optimum, for trainer tests without a
compiler: each "module" has call sites with two features (x0, x1 in
[0, 100)); taking action 1 at a site changes the module's cost by
``x0 - 50`` bytes, action 0 by nothing. The optimum takes 1 exactly where
x0 < 50; the "heuristic" takes 1 where x1 < 50 (unrelated to the gain), so
its cost is the baseline. Implements mlopt.training.environment.Environment
with the same sampling policy (mlopt.policy.sampled) the compiler runs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlopt.log import TensorSpec
from mlopt.policy import MLPPolicy, Vocab
from mlopt.policy.sampled import sampled_policy
from mlopt.problems.base import Problem
from mlopt.training.environment import OwnCompile, Trajectory
from mlopt.training.mlp_train import fit

PROBLEM = Problem("synthetic", (TensorSpec("x0", "int64_t", [1]), TensorSpec("x1", "int64_t", [1])),
                  TensorSpec("decision", "int64_t", [1]), 2,
                  default_decision=TensorSpec("default_decision", "int64_t", [1]))


@dataclass(frozen=True)
class Module:
    name: str
    x: np.ndarray  # int64 [sites, 2]
    base: float

    def batch(self) -> dict:
        return {"x0": self.x[:, :1], "x1": self.x[:, 1:]}

    def cost(self, decisions: np.ndarray) -> float:
        return self.base + float((decisions.reshape(-1) * (self.x[:, 0] - 50)).sum())

    def heuristic(self) -> np.ndarray:
        return (self.x[:, 1] < 50).astype(np.int64)

    def optimum(self) -> np.ndarray:
        return (self.x[:, 0] < 50).astype(np.int64)


def modules(count: int, seed: int, prefix: str = "m") -> list[Module]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        sites = int(rng.integers(5, 80))
        x = rng.integers(0, 100, (sites, 2)).astype(np.int64)
        out.append(Module(f"{prefix}{i}", x, 2000.0 + 40.0 * sites))
    return out


def baseline(mods: list[Module]) -> dict[str, float]:
    return {m.name: m.cost(m.heuristic()) for m in mods}


def optimum_delta_percent(mods: list[Module]) -> float:
    base = sum(m.cost(m.heuristic()) for m in mods)
    return 100.0 * (sum(m.cost(m.optimum()) for m in mods) - base) / base


def policy_delta_percent(policy: MLPPolicy, mods: list[Module]) -> float:
    base = sum(m.cost(m.heuristic()) for m in mods)
    return 100.0 * (sum(m.cost(policy.decide(m.batch())) for m in mods) - base) / base


def warm_start(mods: list[Module], hidden=(16,), seed: int = 0, epochs: int = 30) -> MLPPolicy:
    """A small MLP cloned from the heuristic (BC, as the real pipeline starts)."""
    x = np.concatenate([m.x for m in mods])
    vocab = Vocab.from_columns({"x0": [x[:, :1]], "x1": [x[:, 1:]]}, 100)
    policy = MLPPolicy.random(vocab, hidden=hidden, seed=seed, problem=PROBLEM)
    layers = [(w.copy(), b.copy()) for w, b in policy.layers]
    inputs = policy.vocab.normalize(x, policy.widths)
    labels = np.concatenate([m.heuristic() for m in mods])
    fit(layers, inputs, labels, epochs=epochs, batch_size=64, lr=1e-2, seed=seed)
    return MLPPolicy(vocab, layers, problem=PROBLEM)


class SyntheticEnvironment:
    problem = PROBLEM

    def __init__(self, reward_sign: float = 1.0):
        self.reward_sign = reward_sign  # -1: the cost's sign flipped (a trainer that must then fail)
        self.rollouts = 0

    def _cost(self, m: Module, decisions) -> float:
        c = m.cost(np.asarray(decisions))
        return c if self.reward_sign > 0 else 2 * m.cost(m.heuristic()) - c

    def costs(self, policies, items, work):
        self.rollouts += len(items)
        return [self._cost(m, policies[i].decide(m.batch())) for i, m in items]

    def trajectories(self, policy, items, work):
        out = []
        for m, seed in items:
            d = sampled_policy(policy, seed).decide(m.batch())
            out.append(Trajectory(self._cost(m, d), {**m.batch(), "decision": d.reshape(-1, 1)}))
        self.rollouts += len(items)
        return out

    def own_compiles(self, policy, entries, work):
        self.rollouts += len(entries)
        out = []
        for m in entries:
            d = policy.decide(m.batch())
            out.append(OwnCompile(self._cost(m, d), "".join(map(str, d.tolist())), m.batch()))
        return out

    def forced_costs(self, policy, items, work):
        """The first len(forced) decisions as forced, the policy's after (sites do not depend on earlier
        decisions here, so position k is always site k)."""
        self.rollouts += len(items)
        out = []
        for m, forced in items:
            d = policy.decide(m.batch()).copy()
            d[:len(forced)] = [int(c) for c in forced]
            out.append(self._cost(m, d))
        return out

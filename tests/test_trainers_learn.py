"""Trainers must learn: on a synthetic problem with a known optimum
(tests/support/synthetic.py: action 1 at a site changes the cost by
x0 - 50, the heuristic decides by x1), ES and PPO started from a policy
cloned from the heuristic must reach most of the optimal saving on modules
they never trained on, within a bounded number of iterations. The same run
with the reward's sign flipped must not (so a trainer that ascends the
wrong way, or does not move, fails). Plus the real compiler: one iteration
of each trainer is deterministic per seed on 1 and 2 workers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest

from mlopt.errors import MloptError
from mlopt.policy import MLPPolicy
from mlopt.training.environment import Trajectory, rollout_seed
from mlopt.training.es import (
    ESConfig,
    ESTrainer,
    default_pairs,
    flatten,
    module_ranks,
    partial_module_ranks,
    shape_values,
    top_directions,
)
from mlopt.training.flip_gradient import FlipGradientConfig, FlipGradientTrainer, balanced_sites, nearest_sites
from mlopt.training.ppo import PPOConfig, PPOTrainer
from tests.support import synthetic

TRAIN = synthetic.modules(48, seed=1, prefix="t")
HELD = synthetic.modules(24, seed=2, prefix="h")  # never trained on
VALIDATION = synthetic.modules(12, seed=3, prefix="v")
REACH = 0.75  # of the optimal saving, on the held-out modules


def _baseline():
    return synthetic.baseline(TRAIN + VALIDATION)


def _run_es(tmp_path, sign: float, iterations: int, objective: str = "total", average: float = 0.0,
            train_layers: int = 0, lr: float = 0.1, lr_end: float = 0.0, lr_horizon: int = 0, guide: int = 0,
            project: bool = False, hidden=(16,), line_search=(), hold: float = 0.0, top_pairs: int = 0,
            large_pairs: int = 0, large_extra: int = 0):
    env = synthetic.SyntheticEnvironment(sign)
    start = synthetic.warm_start(TRAIN, hidden=hidden, epochs=3)
    cfg = ESConfig(iterations=iterations, modules_per_perturbation=16, sigma=0.1, lr=lr, seed=0, objective=objective,
                   average=average, train_layers=train_layers, lr_end=lr_end, lr_horizon=lr_horizon, guide=guide,
                   project=project, line_search=line_search, hold_flip_share=hold, hold_rows=1000,
                   top_pairs=top_pairs, large_pairs=large_pairs, large_share=0.25, large_extra=large_extra)
    trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env,
                        sites={m.name: m.batch() for m in TRAIN} if project or hold else None)
    trainer.run()
    return start, trainer


def _run_es_pairs(tmp_path, sign: float, iterations: int):
    """ml-compiler-opt's sampling: every pair on its own draw of modules."""
    env = synthetic.SyntheticEnvironment(sign)
    start = synthetic.warm_start(TRAIN, epochs=3)
    cfg = ESConfig(iterations=iterations, perturbations=32, modules_per_pair=4, sigma=0.1, lr=0.1, seed=0)
    trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env)
    trainer.run()
    return start, trainer


def _run_flip_gradient(tmp_path, sign: float, iterations: int, average: float = 0.0, rollback: float = 0.0):
    env = synthetic.SyntheticEnvironment(sign)
    start = synthetic.warm_start(TRAIN, epochs=3)
    cfg = FlipGradientConfig(iterations=iterations, modules=16, flips=64, per_module=8, credit=20.0,
                             probe_rows=1000, seed=0, average=average, rollback=rollback)
    trainer = FlipGradientTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env,
                                  sites={m.name: m.batch() for m in TRAIN})
    trainer.run()
    return start, trainer


def _run_ppo(tmp_path, sign: float, iterations: int, samples: int = 1):
    env = synthetic.SyntheticEnvironment(sign)
    start = synthetic.warm_start(TRAIN, epochs=3)
    cfg = PPOConfig(iterations=iterations, modules=16 // samples, lr=1e-2, epochs=4, batch_size=256, seed=0,
                    samples=samples)
    trainer = PPOTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env)
    trainer.run()
    return start, trainer


@pytest.mark.parametrize("run,iterations", [(_run_es, 30), (_run_es_pairs, 30),
                                            (partial(_run_es, objective="module-rank"), 30),
                                            (partial(_run_es, average=0.8), 30),
                                            # 8 pairs for the output layer's 34 weights, 9 for all 114: 60
                                            # iterations are about the evaluations of 30 of the others
                                            (partial(_run_es, train_layers=1), 60),
                                            # from twice the step to half of it (geometric mean: the constant's)
                                            (partial(_run_es, lr=0.2, lr_end=0.05, lr_horizon=30), 30),
                                            (partial(_run_es, guide=4), 30),
                                            (partial(_run_es, objective="module-rank", project=True), 30),
                                            (partial(_run_es, objective="module-rank", line_search=(0, 0.5, 1, 2)),
                                             30),
                                            (partial(_run_es, objective="module-rank", hold=0.3), 30),
                                            (partial(_run_es, objective="module-rank", top_pairs=4), 30),
                                            # the largest quarter compiled by 3 of the 9 pairs, 2 more per draw
                                            (partial(_run_es, objective="module-rank", large_pairs=3,
                                                     large_extra=2), 30),
                                            (_run_flip_gradient, 30), (partial(_run_flip_gradient, average=0.7), 30),
                                            # a draw more than 1% above the heuristic undoes the step before it
                                            (partial(_run_flip_gradient, rollback=1.0), 30),
                                            (_run_ppo, 80),
                                            # 4 draws of 4 modules: the same 16 rollouts an iteration
                                            (partial(_run_ppo, samples=4), 80)],
                         ids=["es", "es-pairs", "es-module-rank", "es-averaged", "es-output-layer", "es-lr-schedule",
                              "es-guided", "es-projected", "es-line-search", "es-hold-flip-share", "es-top-pairs",
                              "es-large-pairs",
                              "flip-gradient", "flip-gradient-averaged", "flip-gradient-rollback", "ppo",
                              "ppo-group-baseline"])
def test_trainer_reaches_the_known_optimum_and_not_with_the_reward_flipped(tmp_path, run, iterations):
    optimum = synthetic.optimum_delta_percent(HELD)
    assert optimum < -10  # the problem leaves much to gain over the heuristic
    start, trainer = run(tmp_path / "up", 1.0, iterations)
    assert abs(synthetic.policy_delta_percent(start, HELD)) < 0.2 * abs(optimum)  # starts near the heuristic
    reached = synthetic.policy_delta_percent(trainer.current_policy(), HELD)
    assert reached <= REACH * optimum, (reached, optimum)
    assert trainer.best is not None and trainer.best <= REACH * synthetic.optimum_delta_percent(VALIDATION)
    _, flipped = run(tmp_path / "down", -1.0, iterations)
    assert synthetic.policy_delta_percent(flipped.current_policy(), HELD) > 0.5 * optimum


class _FailingEnvironment(synthetic.SyntheticEnvironment):
    """Records what each candidate compiled; ``failing`` modules fail."""

    def __init__(self, failing: set[str]):
        super().__init__(1.0)
        self.failing = failing
        self.items: list[tuple[int, str]] = []

    def costs(self, policies, items, work):
        self.items += [(i, m.name) for i, m in items]
        return [None if m.name in self.failing else c for (_, m), c in zip(items, super().costs(policies, items, work))]


def test_es_per_pair_draws_share_modules_within_a_pair_and_drop_only_a_failed_pair(tmp_path):
    start = synthetic.warm_start(TRAIN, epochs=3)
    env = _FailingEnvironment(set())
    cfg = ESConfig(iterations=1, perturbations=6, modules_per_pair=1, sigma=0.1, lr=0.1, seed=0)
    ESTrainer(start, TRAIN, _baseline(), tmp_path / "a", cfg, env=env).run()
    drawn = {}
    for i, name in env.items:
        drawn.setdefault(i, []).append(name)
    assert sorted(drawn) == list(range(12))
    assert all(drawn[2 * p] == drawn[2 * p + 1] for p in range(6))  # a pair's candidates: the same module
    pair_modules = [drawn[2 * p][0] for p in range(6)]
    assert len(set(pair_modules)) > 1  # pairs draw their own
    failing = _FailingEnvironment({pair_modules[0]} - set(pair_modules[1:]))
    ESTrainer(start, TRAIN, _baseline(), tmp_path / "b", cfg, env=failing).run()
    m = json.loads((tmp_path / "b" / "metrics.jsonl").read_text().splitlines()[-1])
    dropped = sum(name in failing.failing for name in pair_modules)
    assert m["pairs_dropped"] == dropped >= 1 and m["failed_modules"] == dropped and m["modules"] == 6 - dropped
    everything = _FailingEnvironment({e.name for e in TRAIN})
    with pytest.raises(MloptError, match="no module compiled"):
        ESTrainer(start, TRAIN, _baseline(), tmp_path / "c", cfg, env=everything).run()


def test_module_ranks_give_every_module_the_same_say():
    from mlopt.training.es import module_ranks

    # 4 candidates x 3 modules: module 0 is large and prefers candidate 3 by 1,000 bytes; modules 1 and 2
    # are small and prefer candidate 0 by a few bytes; by total bytes candidate 3 is best, by module ranks 0.
    costs = np.array([[11_000, 100, 100], [10_500, 101, 101], [10_200, 102, 102], [10_000, 103, 103]], float)
    assert np.argmin(costs.sum(axis=1)) == 3
    ranks = module_ranks(costs)
    assert np.argmax(ranks) == 0 and np.argmin(ranks) == 3
    np.testing.assert_allclose(ranks, [(-0.5 + 0.5 + 0.5) / 3, (-1 / 6 + 1 / 6 + 1 / 6) / 3,
                                       (1 / 6 - 1 / 6 - 1 / 6) / 3, (0.5 - 0.5 - 0.5) / 3])
    assert np.all(module_ranks(np.full((4, 2), 7.0)) == 0)  # no module tells the candidates apart
    with pytest.raises(MloptError, match="candidates x modules"):
        module_ranks(np.zeros((4, 0)))
    start, env = synthetic.warm_start(TRAIN, epochs=1), synthetic.SyntheticEnvironment(1.0)
    with pytest.raises(MloptError, match="one draw"):
        ESTrainer(start, TRAIN, _baseline(), "unused", ESConfig(modules_per_pair=2, objective="module-rank"), env=env)
    with pytest.raises(MloptError, match="unknown objective"):
        ESTrainer(start, TRAIN, _baseline(), "unused", ESConfig(objective="mean"), env=env)


def test_the_module_rank_objective_changes_the_step_and_nothing_else(tmp_path):
    start = synthetic.warm_start(TRAIN, epochs=3)
    runs = {}
    for objective in ("total", "module-rank"):
        cfg = ESConfig(iterations=1, modules_per_perturbation=16, sigma=0.1, lr=0.1, seed=0, objective=objective)
        env = synthetic.SyntheticEnvironment(1.0)
        trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path / objective, cfg, env=env)
        trainer.run()
        metrics = json.loads((tmp_path / objective / "metrics.jsonl").read_text().splitlines()[-1])
        runs[objective] = trainer.theta.copy(), metrics
    (theta_total, m_total), (theta_rank, m_rank) = runs["total"], runs["module-rank"]
    assert not np.array_equal(theta_total, theta_rank)  # the gradient ascended something else
    for key in ("train_delta_percent", "candidate_delta_min", "candidate_delta_max", "evaluations"):
        assert m_total[key] == m_rank[key]  # the same candidates, compiled and reported on total bytes


def test_es_metrics_log_the_step_control(tmp_path):
    _, trainer = _run_es(tmp_path, 1.0, 2)
    import json

    lines = [json.loads(s) for s in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == [0, 1, 2]
    m = lines[1]
    pairs = default_pairs(trainer.theta.size)  # 114 weights: half of 4 + floor(3 ln 114) = 9 pairs
    assert trainer.theta.size == 114 and pairs == 9
    assert m["pairs"] == pairs and m["modules"] == 16 and m["evaluations"] == 2 * pairs * 16
    radius = trainer.config.sigma * np.sqrt(trainer.theta.size)
    assert m["update_norm"] == pytest.approx(m["step_ratio"] * radius, rel=1e-6)
    assert m["candidate_delta_min"] <= m["train_delta_percent"] <= m["candidate_delta_max"]


class _CountingEnvironment(synthetic.SyntheticEnvironment):
    """Reports as cache hits every compile of a call, as CompilerEnvironment counts them per call."""

    def costs(self, policies, items, work):
        self.cache_hits = len(items)
        return super().costs(policies, items, work)


def test_es_cache_hit_share_counts_the_iterations_compiles_not_validations(tmp_path):
    start = synthetic.warm_start(TRAIN, epochs=3)
    cfg = ESConfig(iterations=2, modules_per_perturbation=4, sigma=0.1, lr=0.1, seed=0, validate_every=1)
    trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=_CountingEnvironment())
    shares = []
    trainer.run(on_iteration=lambda m: shares.append(m["cache_hit_share"]))
    assert shares == [1.0, 1.0]  # validation's 12 compiles are not this iteration's hits


@pytest.mark.parametrize("kind", ["es", "ppo", "flip-gradient"])
def test_validate_every_k_validates_only_those_iterations(tmp_path, kind):
    """--validate-every 2: validation (and so best/) only after iterations
    2 and 4; the counted validations are the synthetic environment's calls;
    keep_validated saves exactly those policies."""
    env = synthetic.SyntheticEnvironment(1.0)
    start = synthetic.warm_start(TRAIN, epochs=3)
    if kind == "es":
        cfg = ESConfig(iterations=5, modules_per_perturbation=8, sigma=0.1, lr=0.1, seed=0, validate_every=2,
                       keep_validated=True)
        trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env)
    elif kind == "flip-gradient":
        cfg = FlipGradientConfig(iterations=5, modules=8, flips=16, probe_rows=500, seed=0, validate_every=2,
                                 keep_validated=True)
        trainer = FlipGradientTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env,
                                      sites={m.name: m.batch() for m in TRAIN})
    else:
        cfg = PPOConfig(iterations=5, modules=8, lr=1e-2, epochs=1, batch_size=256, seed=0, validate_every=2,
                        keep_validated=True)
        trainer = PPOTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env)
    calls = []
    validate = trainer.validate_current
    trainer.validate_current = lambda *a: calls.append(trainer.iteration) or validate(*a)
    trainer.run()
    lines = [json.loads(s) for s in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == [0, 1, 2, 3, 4, 5]
    assert [m["validation_delta_percent"] is not None for m in lines] == [True, False, True, False, True, False]
    assert calls == [0, 2, 4]
    assert sorted(p.name for p in (tmp_path / "validated").iterdir()) == ["0002.npz", "0004.npz"]


@dataclass(frozen=True)
class _HeuristicOptimal(synthetic.Module):
    """A site costs 30 when decided against a heuristic that inlines 15% of
    sites: the start (cloned from the heuristic) is the optimum, and every
    sampled deviation is worse, so every rollout's cost is above the
    heuristic's, as the real sampled rollouts are (stop 78)."""

    def heuristic(self) -> np.ndarray:
        return (self.x[:, 1] < 15).astype(np.int64)

    def cost(self, decisions: np.ndarray) -> float:
        return self.base + 30.0 * float((np.asarray(decisions).reshape(-1) != self.heuristic()).sum())


def test_ppo_group_baseline_keeps_an_optimal_start_where_the_moving_average_drifts(tmp_path):
    train = [_HeuristicOptimal(m.name, m.x, m.base) for m in synthetic.modules(400, seed=1, prefix="t")]
    held = [_HeuristicOptimal(m.name, m.x, m.base) for m in synthetic.modules(24, seed=2, prefix="h")]
    baseline = {m.name: m.cost(m.heuristic()) for m in train + held}
    start = synthetic.warm_start(train, epochs=3)

    def delta(policy) -> float:
        base = sum(baseline[m.name] for m in held)
        return 100.0 * (sum(m.cost(policy.decide(m.batch())) for m in held) - base) / base

    assert delta(start) == 0.0
    reached = {}
    for samples in (1, 4):  # the same 16 rollouts an iteration, sampled at temperature 2
        cfg = PPOConfig(iterations=80, modules=16 // samples, lr=1e-2, epochs=4, batch_size=256, seed=0,
                        temperature=2.0, samples=samples)
        trainer = PPOTrainer(start, train, baseline, tmp_path / f"k{samples}", cfg,
                             env=synthetic.SyntheticEnvironment(1.0))
        trainer.run()
        reached[samples] = delta(trainer.current_policy())
    # with 400 modules one is drawn again every 25 iterations, so its moving average stays near the
    # heuristic's cost, every sampled rollout scores below it, and the update drifts off the optimum
    assert reached[1] > 5.0, reached
    assert reached[4] < 1.0, reached


def test_group_rewards_are_relative_to_the_modules_other_rollouts(tmp_path):
    trainer = PPOTrainer(synthetic.warm_start(TRAIN, epochs=1), TRAIN, _baseline(), tmp_path,
                         PPOConfig(samples=3, delta=0.0), env=synthetic.SyntheticEnvironment(1.0))
    T = Trajectory
    got = trainer._group_rewards([T(100.0, None), T(100.0, None), T(100.0, None),   # all alike: no push
                                  T(90.0, None), None, T(110.0, None),              # one failed: the other two
                                  T(50.0, None), None, None], 3)                    # one compiled: no reward
    assert got == {0: 0.0, 1: 0.0, 2: 0.0, 3: 1.0 - 90.0 / 110.0, 5: 1.0 - 110.0 / 90.0}


def test_a_modules_samples_have_their_own_seeds_and_the_first_keeps_a_single_samples_seed():
    seeds = [rollout_seed(7, 3, 2, s) for s in range(4)]
    assert len(set(seeds)) == 4
    # sample 0 is the seed a run of one sample per module always had (its runs unchanged)
    assert seeds[0] == rollout_seed(7, 3, 2) == int(
        np.random.SeedSequence([7, 3, 2]).generate_state(1, np.uint64)[0] >> 1)


def test_ppo_target_kl_stops_the_epochs_of_an_iteration(tmp_path):
    """With a KL target the policy cannot reach in one epoch, every epoch
    runs; with one it passes after the first, the iteration stops there and
    moves the policy less."""
    start = synthetic.warm_start(TRAIN, epochs=3)
    runs = {}
    for name, target in (("free", None), ("loose", 1e3), ("tight", 1e-12)):
        cfg = PPOConfig(iterations=2, modules=16, lr=1e-2, epochs=4, batch_size=64, seed=0, target_kl=target)
        trainer = PPOTrainer(start, TRAIN, _baseline(), tmp_path / name, cfg, validation=VALIDATION,
                             env=synthetic.SyntheticEnvironment(1.0))
        trainer.run()
        runs[name] = [json.loads(s) for s in (tmp_path / name / "metrics.jsonl").read_text().splitlines()][1:]
    assert [m["epochs_run"] for m in runs["free"]] == [4, 4] and runs["free"][0]["kl_after"] is None
    assert [m["epochs_run"] for m in runs["loose"]] == [4, 4]
    assert [m["update_norm"] for m in runs["loose"]] == [m["update_norm"] for m in runs["free"]]
    assert [m["epochs_run"] for m in runs["tight"]] == [1, 1]
    assert all(m["kl_after"] > 1.5e-12 for m in runs["tight"])
    assert runs["tight"][0]["update_norm"] < runs["free"][0]["update_norm"]


def test_default_pairs_grow_with_the_network_and_ranks_share_ties():
    assert [default_pairs(n) for n in (100, 1538, 9218, 100_000)] == [9, 13, 16, 19]
    assert shape_values(np.array([3.0, 1.0, 1.0, 7.0]), "rank") == pytest.approx([1 / 6, -1 / 3, -1 / 3, 0.5])
    # one huge outlier moves its own rank only
    assert shape_values(np.array([0.0, 1.0, 2.0, 1e9]), "rank") == pytest.approx([-0.5, -1 / 6, 1 / 6, 0.5])


@pytest.fixture(scope="module")
def real_setup(mini_corpus):
    from mlopt.corpus import corpus_entries
    from mlopt.problems import inlining
    from mlopt.rollouts import trace_corpus
    from mlopt.training import train_bc

    ds = trace_corpus(mini_corpus, use_cache=False, workers=2, quiet=True)
    bc = train_bc(ds, inlining.PROBLEM, epochs=3, hidden=(8,), heldout_fraction=0.0)
    baseline = {m: int(s) for m, s in zip(ds.modules, ds.text_size)}
    entries = [e for e in corpus_entries(mini_corpus) if e.name in baseline]
    return bc.policy, entries[:3], entries[3:5], baseline, ds.batches()


@pytest.mark.llvm
@pytest.mark.parametrize("kind", ["es", "ppo", "ppo-group", "flip-gradient"])
def test_one_real_iteration_is_identical_on_1_and_2_workers(real_setup, tmp_path, kind):
    from mlopt.workers import make_pool

    policy, train, validation, baseline, sites = real_setup
    out = {}
    for workers in (1, 2):
        run = tmp_path / f"w{workers}"
        run.mkdir()
        with make_pool(workers) as pool:
            if kind == "es":
                cfg = ESConfig(iterations=1, perturbations=3, modules_per_perturbation=3, sigma=2.0, seed=5)
                trainer = ESTrainer(policy, train, baseline, run, cfg, validation=validation, pool=pool)
            elif kind == "flip-gradient":
                cfg = FlipGradientConfig(iterations=1, modules=3, flips=6, per_module=2, seed=5)
                trainer = FlipGradientTrainer(policy, train, baseline, run, cfg, sites=sites, validation=validation,
                                              pool=pool)
            else:  # ppo-group: 2 samples of each of 2 modules, each against the other
                cfg = PPOConfig(iterations=1, modules=3 if kind == "ppo" else 2, lr=1e-2, temperature=3.0, seed=5,
                                samples=1 if kind == "ppo" else 2)
                trainer = PPOTrainer(policy, train, baseline, run, cfg, validation=validation, pool=pool)
            trainer.run()
        lines = [json.loads(s) for s in (run / "metrics.jsonl").read_text().splitlines()]
        # Speed and how many rollouts the workers' caches answered depend on scheduling, not on the run.
        timing = {"evaluations_per_s", "cache_hit_share", "seconds"} if "ppo" not in kind else {"rollouts_per_s"}
        out[workers] = (trainer.theta.tobytes(), [{k: v for k, v in m.items() if k not in timing} for m in lines])
    assert out[1] == out[2]
    m = out[1][1][1]
    if kind == "flip-gradient":
        # every flip compiled; the step moves exactly when some flip changed its module's size
        assert m["flips"] == 6 and m["failed_flips"] == 0 and m["failed_modules"] == 0
        moved = out[1][0] != flatten(policy).tobytes()
        assert moved == (m["flips_helping"] + m["flips_hurting"] > 0 and m["update_norm"] > 0)
        assert m["validation_delta_percent"] is not None
        return
    moved = out[1][0] != ESTrainer(policy, train, baseline, tmp_path, ESConfig()).theta.tobytes()
    # ES moves exactly when its candidates differ (all tied: every rank equal, no gradient); PPO always
    assert moved == ("ppo" in kind or m["candidate_delta_std"] > 0)
    assert m["failed_modules"] == 0 and m["validation_delta_percent"] is not None
    if "ppo" in kind:
        assert m["rows"] > 0 and m["modules"] == (3 if kind == "ppo" else 4)


@pytest.mark.parametrize("kind", ["es", "es-averaged", "es-scheduled", "es-guided", "ppo", "flip-gradient",
                                  "flip-gradient-averaged", "flip-gradient-rollback"])
def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, kind):
    def run(path, iterations, resume):
        path.mkdir(exist_ok=True)
        env = synthetic.SyntheticEnvironment()
        start = synthetic.warm_start(TRAIN, epochs=3)
        if kind.startswith("es"):
            schedule = {"lr_end": 0.01, "lr_horizon": 3} if kind == "es-scheduled" else {}
            cfg = ESConfig(iterations=iterations, seed=4, average=0.5 if kind == "es-averaged" else 0.0,
                           guide=2 if kind == "es-guided" else 0, **schedule)
            t = ESTrainer(start, TRAIN, _baseline(), path, cfg, validation=VALIDATION, env=env)
        elif kind.startswith("flip-gradient"):
            cfg = FlipGradientConfig(iterations=iterations, modules=8, flips=16, probe_rows=500, seed=4,
                                     average=0.5 if kind == "flip-gradient-averaged" else 0.0,
                                     rollback=3.0 if kind == "flip-gradient-rollback" else 0.0)
            if kind == "flip-gradient-rollback":  # draws 3 and 4 blow up: 3 is rolled back, across the resume
                env = _BlownEnvironment({2, 3})
            t = FlipGradientTrainer(start, TRAIN, _baseline(), path, cfg, validation=VALIDATION, env=env,
                                    sites={m.name: m.batch() for m in TRAIN})
        else:
            t = PPOTrainer(start, TRAIN, _baseline(), path, PPOConfig(iterations=iterations, modules=8, seed=4),
                           validation=VALIDATION, env=env)
        if resume:
            assert t.resume()
            env.draw = t.iteration  # _BlownEnvironment counts draws from the iteration the run resumes at
        t.run()
        return t

    straight = run(tmp_path / "a", 4, False)
    run(tmp_path / "b", 2, False)
    resumed = run(tmp_path / "b", 4, True)
    assert resumed.theta.tobytes() == straight.theta.tobytes() and resumed.best == straight.best
    if kind == "flip-gradient-rollback":
        lines = [json.loads(line) for side in "ab"
                 for line in (tmp_path / side / "metrics.jsonl").read_text().splitlines()]
        assert [m.get("rolled_back") for m in lines if m["iteration"] == 3] == [True, True]
    assert flatten(resumed.current_policy()).tobytes() == flatten(straight.current_policy()).tobytes()
    best = [(tmp_path / side / "best" / "policy.npz").read_bytes() for side in "ab"]
    assert best[0] == best[1]


class _BlownEnvironment(synthetic.SyntheticEnvironment):
    """The synthetic problem, but the own compiles of the iterations in ``blown`` (their draws) cost 10%
    more: what a step that blew up looks like to the next iteration."""

    def __init__(self, blown: set[int]):
        super().__init__(1.0)
        self.blown = blown
        self.draw = 0

    def own_compiles(self, policy, entries, work):
        out = super().own_compiles(policy, entries, work)
        factor = 1.1 if self.draw in self.blown else 1.0
        self.draw += 1
        return [type(o)(o.cost * factor, o.decisions, o.columns) for o in out]


@pytest.mark.parametrize("average", [0.0, 0.5])
def test_rollback_undoes_the_step_before_a_blown_draw_once(tmp_path, average):
    """rollback=5: iteration 3's draw comes out 10% larger than the heuristic, so it restores the
    iterate (and average) from before iteration 2's step and flips nothing; iteration 4's draw blows up
    too, but the restored iterate is stepped from (one step is undone, not two); below the threshold (20)
    nothing is undone: the steps are those of the same draws without rollback."""
    start = synthetic.warm_start(TRAIN, epochs=3)

    def run(path, rollback, blown):
        cfg = FlipGradientConfig(iterations=0, modules=8, flips=16, probe_rows=500, seed=1, average=average,
                                 rollback=rollback)
        t = FlipGradientTrainer(start, TRAIN, _baseline(), path, cfg, validation=VALIDATION,
                                env=_BlownEnvironment(blown), sites={m.name: m.batch() for m in TRAIN})
        states, metrics = [], []
        for _ in range(5):
            t.config.iterations += 1
            t.run(on_iteration=metrics.append)
            states.append((t.theta.tobytes(), flatten(t.current_policy()).tobytes()))
        return states, metrics

    plain, plain_m = run(tmp_path / "plain", 0.0, set())
    states, m = run(tmp_path / "rolled", 5.0, {2, 3})
    assert [x["rolled_back"] for x in m] == [False, False, True, False, False]
    assert m[2]["train_delta_percent"] > 5.0 and m[3]["train_delta_percent"] > 5.0
    assert m[2]["flips"] == 0 and m[2]["update_norm"] == 0.0 and m[2]["evaluations"] == 8
    assert states[:2] == plain[:2]  # the same steps until the blow-up
    assert states[2] == states[0]  # iterate and average as before iteration 2's step
    assert states[3] != states[2] and m[3]["update_norm"] > 0  # stepped from there though its draw blew up
    assert m[3]["flips"] == 16
    high, high_m = run(tmp_path / "high", 20.0, {2, 3})
    off, _ = run(tmp_path / "off", 0.0, {2, 3})
    assert not any(x["rolled_back"] for x in high_m) and high == off  # below the threshold: no rollback
    assert off != states and [x["rolled_back"] for x in plain_m] == [False] * 5


@pytest.mark.parametrize("kind", ["es", "flip-gradient"])
def test_averaging_changes_what_a_run_produces_and_not_its_steps(tmp_path, kind):
    """average=d: the same steps as without it; what is validated, kept as best and returned is the
    moving average of the iterates, d per iteration, from the starting policy."""
    start = synthetic.warm_start(TRAIN, epochs=3)

    def trainer(path, average):
        if kind == "es":
            cfg = ESConfig(iterations=0, modules_per_perturbation=8, sigma=0.1, lr=0.1, seed=2, average=average,
                           keep_validated=True)
            return ESTrainer(start, TRAIN, _baseline(), path, cfg, validation=VALIDATION,
                             env=synthetic.SyntheticEnvironment())
        cfg = FlipGradientConfig(iterations=0, modules=8, flips=16, probe_rows=500, seed=2, average=average,
                                 keep_validated=True)
        return FlipGradientTrainer(start, TRAIN, _baseline(), path, cfg, validation=VALIDATION,
                                   env=synthetic.SyntheticEnvironment(), sites={m.name: m.batch() for m in TRAIN})

    runs = {}
    for d in (0.0, 0.7):
        t = trainer(tmp_path / str(d), d)
        iterates, validated = [flatten(start).astype(np.float64)], []
        for _ in range(4):
            t.config.iterations += 1
            t.run(on_iteration=lambda m, out=validated: out.append(m["validation_delta_percent"]))
            iterates.append(t.theta.astype(np.float64))
        runs[d] = (t, iterates, validated)
    plain, averaged = runs[0.0][0], runs[0.7][0]
    assert [a.tobytes() for a in runs[0.0][1]] == [a.tobytes() for a in runs[0.7][1]]  # the same steps
    expected = runs[0.7][1][0]
    for theta in runs[0.7][1][1:]:
        expected = 0.7 * expected + (1.0 - 0.7) * theta
    produced = flatten(averaged.current_policy())
    assert produced.tobytes() == expected.astype(np.float32).tobytes()
    assert produced.tobytes() != flatten(plain.current_policy()).tobytes()
    assert flatten(plain.current_policy()).tobytes() == plain.theta.tobytes()
    last = MLPPolicy.load(tmp_path / "0.7" / "validated" / "0004.npz", problem=start.problem)
    assert flatten(last).tobytes() == produced.tobytes()  # the average is what validation measured
    assert runs[0.7][2][-1] == pytest.approx(synthetic.policy_delta_percent(averaged.current_policy(), VALIDATION))
    assert runs[0.7][2] != runs[0.0][2]
    with pytest.raises(MloptError, match="average must be in|average in"):
        trainer(tmp_path / "x", 1.0)


def test_the_lr_schedule_steps_geometrically_then_holds_and_a_flat_one_is_the_constant(tmp_path):
    """lr_end/lr_horizon: iteration i steps with lr * (lr_end / lr) ** min(i / horizon, 1), logged as "lr"; the
    first step is the constant-lr run's; a schedule from lr to lr is that run bit for bit; half a schedule is a
    typed error."""
    start = synthetic.warm_start(TRAIN, epochs=3)

    def run(name, iterations, **schedule):
        cfg = ESConfig(iterations=iterations, modules_per_perturbation=8, sigma=0.1, lr=0.2, seed=5, **schedule)
        t = ESTrainer(start, TRAIN, _baseline(), tmp_path / name, cfg, env=synthetic.SyntheticEnvironment())
        logged = []
        t.run(on_iteration=logged.append)
        return t, logged

    scheduled, metrics = run("scheduled", 6, lr_end=0.05, lr_horizon=4)
    assert [m["lr"] for m in metrics] == pytest.approx([0.2, 0.2 * 0.25 ** 0.25, 0.1, 0.2 * 0.25 ** 0.75,
                                                        0.05, 0.05], rel=1e-12)
    constant, plain = run("constant", 6)
    assert [m["lr"] for m in plain] == [0.2] * 6
    first, _ = run("first", 1, lr_end=0.05, lr_horizon=4)
    one, _ = run("one", 1)
    assert first.theta.tobytes() == one.theta.tobytes()  # iteration 0 steps with lr itself
    assert scheduled.theta.tobytes() != constant.theta.tobytes()
    # iteration 3 of the schedule is a constant-lr step of its logged lr from the schedule's iterate 3
    three, _ = run("three", 3, lr_end=0.05, lr_horizon=4)
    cfg = ESConfig(iterations=4, modules_per_perturbation=8, sigma=0.1, lr=metrics[3]["lr"], seed=5)
    alone = ESTrainer(start, TRAIN, _baseline(), tmp_path / "alone", cfg, env=synthetic.SyntheticEnvironment())
    alone.theta, alone.iteration = three.theta.copy(), 3
    alone.step()
    four, _ = run("four", 4, lr_end=0.05, lr_horizon=4)
    assert alone.theta.tobytes() == four.theta.tobytes()
    flat, _ = run("flat", 6, lr_end=0.2, lr_horizon=4)
    assert flat.theta.tobytes() == constant.theta.tobytes()
    for bad in ({"lr_end": 0.05}, {"lr_horizon": 4}, {"lr_end": -0.1, "lr_horizon": 4}):
        with pytest.raises(MloptError, match="step-size schedule needs both"):
            ESTrainer(start, TRAIN, _baseline(), tmp_path / "x", ESConfig(**bad), env=synthetic.SyntheticEnvironment())


def test_train_layers_steps_only_the_last_layers_and_all_is_unchanged(tmp_path):
    """train_layers=1: the earlier layers keep the starting weights bit for bit, the output layer moves, and
    the pair count follows its dimensions; naming every layer steps exactly as 0 (all) does."""
    start = synthetic.warm_start(TRAIN, epochs=3)
    runs = {}
    for k in (0, 1, len(start.layers)):
        cfg = ESConfig(iterations=3, modules_per_perturbation=8, sigma=0.1, lr=0.1, seed=4, train_layers=k)
        t = ESTrainer(start, TRAIN, _baseline(), tmp_path / str(k), cfg, env=synthetic.SyntheticEnvironment())
        t.run()
        runs[k] = t
    *frozen, (w, b) = start.layers
    out = runs[1].current_policy().layers
    for (w0, b0), (w1, b1) in zip(frozen, out[:-1]):
        assert w0.tobytes() == w1.tobytes() and b0.tobytes() == b1.tobytes()
    assert out[-1][0].tobytes() != w.tobytes()
    assert runs[1].pairs == default_pairs(w.size + b.size) < runs[0].pairs == default_pairs(flatten(start).size)
    assert runs[0].theta.tobytes() == runs[len(start.layers)].theta.tobytes()  # every layer = all of them
    for bad in (-1, len(start.layers) + 1):
        with pytest.raises(MloptError, match="train_layers must be 0"):
            ESTrainer(start, TRAIN, _baseline(), tmp_path / "x", ESConfig(train_layers=bad),
                      env=synthetic.SyntheticEnvironment())


def test_guided_perturbations_keep_the_radius_and_put_their_share_in_the_subspace():
    from mlopt.training.es import guided_perturbations, orthonormal_rows

    rng = np.random.default_rng(0)
    n, rows = 400, rng.standard_normal((3, 400))
    basis = orthonormal_rows(np.concatenate([rows, rows[:1] * 2.0 + rows[1:2]]))  # a dependent row adds nothing
    assert basis.shape == (3, n)
    np.testing.assert_allclose(basis @ basis.T, np.eye(3), atol=1e-12)
    residual = rows - (rows @ basis.T) @ basis  # the basis spans the rows
    assert np.abs(residual).max() < 1e-9
    assert orthonormal_rows(np.zeros((2, n))).shape == (0, n)
    z, w = rng.standard_normal((4000, n)), rng.standard_normal((4000, 3))
    e = guided_perturbations(z, w, basis, 0.5).astype(np.float64)
    squared = (e * e).sum(axis=1)
    inside = ((e @ basis.T) ** 2).sum(axis=1)
    assert abs(squared.mean() / n - 1.0) < 0.02  # the radius sigma * sqrt(n) stays
    assert abs(inside.mean() / squared.mean() - (0.5 + 0.5 * 3 / n)) < 0.02  # half the variance, in 3 dims of 400
    assert guided_perturbations(z, w[:, :0], basis[:0], 0.5) is z  # no estimates yet: isotropic


def test_guided_es_starts_as_plain_es_then_perturbs_along_its_estimates(tmp_path):
    """Its first iteration has no estimate to follow and steps exactly as plain ES; the next ones differ;
    the metrics say how many directions guided and how far the estimate turned."""
    start = synthetic.warm_start(TRAIN, epochs=3)
    runs = {}
    for guide in (0, 3):
        for iterations in (1, 3):
            cfg = ESConfig(iterations=iterations, modules_per_perturbation=8, sigma=0.1, lr=0.1, seed=7, guide=guide)
            t = ESTrainer(start, TRAIN, _baseline(), tmp_path / f"{guide}-{iterations}", cfg,
                          env=synthetic.SyntheticEnvironment())
            t.run()
            runs[guide, iterations] = t
    assert runs[0, 1].theta.tobytes() == runs[3, 1].theta.tobytes()
    assert runs[0, 3].theta.tobytes() != runs[3, 3].theta.tobytes()
    assert len(runs[3, 3].guide_history) == 3 and len(runs[0, 3].guide_history) == 0
    metrics = [json.loads(line) for line in (tmp_path / "3-3" / "metrics.jsonl").read_text().splitlines()]
    assert [m["guide_dimensions"] for m in metrics] == [0, 1, 2]
    assert "gradient_cosine_previous" not in metrics[0] and -1 <= metrics[2]["gradient_cosine_previous"] <= 1
    for bad in ({"guide": -1}, {"guide": 2, "guide_alpha": 0.0}, {"guide": 2, "guide_alpha": 1.5}):
        with pytest.raises(MloptError, match="guide must be"):
            ESTrainer(start, TRAIN, _baseline(), tmp_path / "x", ESConfig(**bad), env=synthetic.SyntheticEnvironment())


def test_distilled_smaller_network_decides_like_its_teacher():
    from mlopt.training.distill import distill

    teacher = synthetic.warm_start(TRAIN, hidden=(16,), epochs=30)
    columns = {k: np.concatenate([m.batch()[k] for m in TRAIN]) for k in ("x0", "x1")}
    small, agreement = distill(teacher, columns, (4,), epochs=40, batch_size=64, lr=1e-2)
    assert [w.shape[0] for w, _ in small.layers] == [4, 2]
    held = {k: np.concatenate([m.batch()[k] for m in HELD]) for k in ("x0", "x1")}
    assert agreement > 0.95 and (small.decide(held) == teacher.decide(held)).mean() > 0.95


def test_size_stratified_sampler_covers_every_stratum_round_robin():
    from mlopt.rollouts.sampler import SizeStratifiedSampler

    sizes = np.arange(100)[::-1] * 10.0  # module i has size 990 - 10 i
    s = SizeStratifiedSampler(sizes, buckets=4, seed=7)
    picked = s.sample(3, 8)
    assert picked == s.sample(3, 8) and picked != s.sample(4, 8) and len(set(picked)) == 8
    quartile = [int(3 - sizes[i] // 250) for i in picked]  # 0: the smallest sizes
    assert sorted(quartile) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert s.counts(0, 6) == [2, 2, 1, 1] and s.counts(1, 6) == [1, 2, 2, 1]  # the remainder rotates
    assert s.sample(0, 500) == list(range(100))


def test_the_sampler_never_draws_the_largest_share_it_skips_and_is_unchanged_without(tmp_path):
    from mlopt.rollouts.sampler import SizeStratifiedSampler

    sizes = np.arange(100)[::-1] * 10.0  # module i has size 990 - 10 i: 0-4 are the 5 largest
    s = SizeStratifiedSampler(sizes, buckets=4, seed=7, skip_largest=0.05)
    assert sorted(s.skipped) == [0, 1, 2, 3, 4]
    drawn = set().union(*(s.sample(i, 40) for i in range(50)))
    assert drawn == set(range(5, 100))  # every other module is drawn, the skipped ones never
    assert s.sample(0, 500) == list(range(5, 100))
    plain = SizeStratifiedSampler(sizes, buckets=4, seed=7)
    assert plain.skipped == [] and [plain.sample(i, 8) for i in range(6)] == \
        [SizeStratifiedSampler(sizes, buckets=4, seed=7, skip_largest=0.0).sample(i, 8) for i in range(6)]
    assert SizeStratifiedSampler(sizes, skip_largest=0.009).skipped == []  # floor(0.9) modules
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="skip_largest"):
            SizeStratifiedSampler(sizes, skip_largest=bad)
    start = synthetic.warm_start(TRAIN, epochs=1)
    trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path, ESConfig(skip_largest=0.25), validation=VALIDATION,
                        env=synthetic.SyntheticEnvironment(1.0))
    sizes = [_baseline()[e.name] for e in TRAIN]
    assert sorted(trainer.sampler.skipped) == sorted(np.argsort(sizes, kind="stable")[-12:].tolist())
    with pytest.raises(MloptError, match="ES module sampler: skip_largest"):
        ESTrainer(start, TRAIN, _baseline(), tmp_path, ESConfig(skip_largest=1.5), validation=VALIDATION,
                  env=synthetic.SyntheticEnvironment(1.0))



def test_the_sampler_weighs_packages_by_their_module_count_to_the_power_asked(tmp_path):
    from collections import Counter

    from mlopt.rollouts.sampler import SizeStratifiedSampler

    sizes = np.arange(200, dtype=np.float64)
    # package "big" holds 180 modules, "mid" 16, "one" 4 (spread over the size buckets)
    groups = ["mid" if i % 12 == 5 and i < 192 else "one" if i % 50 == 7 else "big" for i in range(200)]
    n = Counter(groups)
    assert n == {"big": 180, "mid": 16, "one": 4}

    def shares(power: float) -> dict[str, float]:
        s = SizeStratifiedSampler(sizes, buckets=4, seed=3, groups=groups, group_power=power)
        # one module per bucket and iteration: the shares are exact in expectation (with more, a draw without
        # replacement gives a package of few modules somewhat less)
        drawn = Counter(groups[i] for it in range(800) for i in s.sample(it, 4))
        total = sum(drawn.values())
        return {g: drawn[g] / total for g in n}

    uniform = shares(1.0)
    assert abs(uniform["big"] - 0.9) < 0.02 and abs(uniform["one"] - 0.02) < 0.01
    alike = shares(0.0)  # every package alike: a third each (within sampling noise over 3,200 draws)
    assert all(abs(v - 1 / 3) < 0.04 for v in alike.values()), alike
    root = shares(0.5)  # as the square root: 180 ** .5 : 16 ** .5 : 4 ** .5 = 13.4 : 4 : 2
    expect = {g: c ** 0.5 / sum(k ** 0.5 for k in n.values()) for g, c in n.items()}
    assert all(abs(root[g] - expect[g]) < 0.04 for g in n), (root, expect)
    # power 1, or no groups: the draws made before packages were known, draw for draw
    plain = SizeStratifiedSampler(sizes, buckets=4, seed=3)
    same = SizeStratifiedSampler(sizes, buckets=4, seed=3, groups=groups, group_power=1.0)
    assert [plain.sample(i, 8) for i in range(20)] == [same.sample(i, 8) for i in range(20)]
    weighed = SizeStratifiedSampler(sizes, buckets=4, seed=3, groups=groups, group_power=0.5)
    picked = weighed.sample(5, 8)
    assert picked == weighed.sample(5, 8) and len(set(picked)) == 8  # deterministic, without replacement
    assert weighed.sample(0, 500) == list(range(200))
    for bad in (-0.5, 1.5):
        with pytest.raises(ValueError, match="group_power"):
            SizeStratifiedSampler(sizes, groups=groups, group_power=bad)
    with pytest.raises(ValueError, match="groups names 3 modules"):
        SizeStratifiedSampler(sizes, groups=["a", "b", "c"], group_power=0.5)
    # ES draws by its modules' packages (the first component of a module's name)
    start = synthetic.warm_start(TRAIN, epochs=1)
    trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path, ESConfig(package_power=0.0), validation=VALIDATION,
                        env=synthetic.SyntheticEnvironment(1.0))
    packages = Counter(e.name.split("/", 1)[0] for e in TRAIN)
    assert set(trainer.sampler.weights.values()) == {1.0 / c for c in packages.values()}
    with pytest.raises(MloptError, match="ES module sampler: group_power"):
        ESTrainer(start, TRAIN, _baseline(), tmp_path, ESConfig(package_power=2.0), validation=VALIDATION,
                  env=synthetic.SyntheticEnvironment(1.0))

@pytest.mark.llvm
@pytest.mark.parametrize("kind", ["ppo", "flip-gradient"])
def test_cli_train_runs_resumes_and_refuses_a_silent_restart(real_setup, mini_corpus, tmp_path, capsys, kind):
    from mlopt.cli import main

    policy = real_setup[0]
    policy.save(tmp_path / "bc.npz")
    run = tmp_path / kind
    args = ["train", kind, str(mini_corpus), "--init", str(tmp_path / "bc.npz"), "-o", str(run),
            "--validation", str(mini_corpus), "--modules", "2", "--workers", "2", "--no-compile", "--quiet", "--json"]
    if kind == "flip-gradient":
        args += ["--flips", "3"]
    assert main([*args, "--iterations", "1"]) == 0
    capsys.readouterr()
    assert main([*args, "--iterations", "1"]) == 2  # an existing run: --resume or --force
    assert "--resume to continue it, --force to start over" in capsys.readouterr().err
    assert main([*args, "--iterations", "2", "--resume"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["iterations"] == 2 and summary["best_validation_delta_percent"] is not None
    metrics = [json.loads(s) for s in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [0, 1, 2] and all(m["modules"] == 2 for m in metrics[1:])
    if kind == "flip-gradient":
        assert all(m["flips"] == 3 and m["failed_flips"] == 0 for m in metrics[1:])
    assert main([*args, "--iterations", "1", "--force"]) == 0  # starts over
    assert [json.loads(s)["iteration"] for s in (run / "metrics.jsonl").read_text().splitlines()] == [0, 1]


def test_line_search_takes_the_multiple_best_on_a_fresh_draw_and_steps_exactly_by_it(tmp_path):
    from mlopt.training.es import LINE_SEARCH_STREAM, line_search_choice

    # the choice: module ranks (every module the same say) or totals; ties to the multiple nearest 1
    costs = np.array([[100, 10, 10], [90, 11, 11], [80, 12, 12]], float)  # multiples 0, 1, 2
    assert line_search_choice(costs, (0, 1, 2), "module-rank") == 0
    assert line_search_choice(costs, (0, 1, 2), "total") == 2
    assert line_search_choice(np.full((3, 2), 5.0), (0, 2, 1), "module-rank") == 2  # all tie: 1
    assert line_search_choice(np.full((2, 2), 5.0), (0, 2), "total") == 0  # 0 and 2 tie: the smaller
    # one iteration: the iterate is the plain run's start + the chosen multiple x its step, the multiples
    # compiled on one draw of their own
    start = synthetic.warm_start(TRAIN, epochs=3)
    theta0 = flatten(start)

    def one(sub, line_search, sign=1.0):
        env = _FailingEnvironment(set())
        env.reward_sign = sign
        cfg = ESConfig(iterations=1, modules_per_perturbation=8, sigma=0.1, lr=0.1, seed=0, objective="module-rank",
                       line_search=line_search)
        trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path / sub, cfg, env=env)
        trainer.run()
        return trainer, json.loads((tmp_path / sub / "metrics.jsonl").read_text().splitlines()[-1]), env

    chosen = set()
    for sign in (1.0, -1.0):
        plain, _, plain_env = one(f"plain{sign}", (), sign)
        step = plain.theta - theta0
        assert np.abs(step).max() > 0
        for line_search in [(0, 1), (0, 0.5, 1, 2)]:
            trainer, m, env = one(f"ls{len(line_search)}{sign}", line_search, sign)
            t = m["line_search_multiple"]
            chosen.add(t)
            assert t in line_search and m["line_search_modules"] == 8
            np.testing.assert_allclose(trainer.theta - theta0, t * step, rtol=0, atol=1e-6)
            assert env.items[:len(plain_env.items)] == plain_env.items  # the estimate's compiles: the plain run's
            drawn = [name for _, name in env.items[len(plain_env.items):]]
            expected = [TRAIN[j].name for j in trainer.sampler.sample(0, 8, stream=LINE_SEARCH_STREAM)]
            assert drawn == expected * len(line_search)
            assert not set(expected) <= {name for _, name in plain_env.items}  # a draw the estimate did not see
    assert len(chosen) > 1  # the choice depends on what the multiples do
    for bad in [(1,), (1, 1), (-1, 1)]:
        with pytest.raises(MloptError, match="line search"):
            ESTrainer(start, TRAIN, _baseline(), tmp_path / "bad",
                      ESConfig(iterations=1, line_search=bad), env=synthetic.SyntheticEnvironment(1.0))


def test_flip_sites_are_the_nearest_the_boundary_per_module_cap_and_balance():
    """nearest_sites: smallest |margin| first, at most per_module a module; balanced_sites: half among the
    sites decided 1, half among those decided 0, the other side filling in where one runs short."""
    margins = [np.array([0.5, -3.0, 2.0, -0.1]), np.array([-1.0, 4.0])]
    assert nearest_sites(margins, 3, 8) == [(0, 0), (0, 3), (1, 0)]
    assert nearest_sites(margins, 3, 1) == [(0, 3), (1, 0)]  # one a module: module 0's nearest, module 1's
    assert balanced_sites(margins, ["1010", "01"], 4, 8) == [(0, 0), (0, 2), (0, 3), (1, 0)]
    assert balanced_sites(margins, ["1111", "11"], 3, 8) == [(0, 0), (0, 3), (1, 0)]  # no site decided 0


def test_top_directions_keep_the_pairs_whose_better_candidate_ranks_highest():
    shaped = np.array([[0.1, -0.1], [-0.5, 0.4], [0.0, 0.0], [0.3, 0.2], [0.4, -0.3]])
    assert top_directions(shaped, 2).tolist() == [1, 4]  # max 0.4 twice: both, by value not sign
    assert top_directions(shaped, 3).tolist() == [1, 3, 4]
    assert top_directions(shaped, 0).tolist() == [0, 1, 2, 3, 4]
    assert top_directions(shaped, 9).tolist() == [0, 1, 2, 3, 4]
    assert top_directions(np.array([[0.2, 0.0], [0.0, 0.2], [0.2, 0.1]]), 2).tolist() == [0, 1]  # ties: lower index


def test_top_pairs_change_the_step_and_all_pairs_are_plain_es(tmp_path):
    def run(sub, top):
        env = synthetic.SyntheticEnvironment(1.0)
        start = synthetic.warm_start(TRAIN, epochs=3)
        cfg = ESConfig(iterations=3, modules_per_perturbation=16, sigma=0.1, lr=0.1, seed=0, perturbations=8,
                       objective="module-rank", top_pairs=top)
        trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path / sub, cfg, validation=VALIDATION, env=env)
        metrics = []
        trainer.run(metrics.append)
        return trainer.theta, metrics
    plain, _ = run("plain", 0)
    every, _ = run("every", 8)  # as many as there are pairs: the plain estimate, bit for bit
    assert np.array_equal(plain, every)
    top, metrics = run("top", 3)
    assert not np.array_equal(plain, top)
    assert [m["pairs_estimated"] for m in metrics] == [3, 3, 3]
    with pytest.raises(MloptError, match="top_pairs"):
        ESTrainer(synthetic.warm_start(TRAIN, epochs=1), TRAIN, _baseline(), tmp_path / "bad",
                  ESConfig(top_pairs=-1), env=synthetic.SyntheticEnvironment(1.0))


def test_partial_module_ranks_rank_each_module_among_its_candidates_and_all_is_module_ranks():
    costs = np.array([[1.0, 5.0, 3.0], [2.0, 4.0, np.nan], [3.0, 6.0, 1.0], [4.0, 7.0, 2.0]])
    everyone = np.ones(costs.shape, bool)
    ok = costs[:, :2]  # the failed module (column 2) is left out either way
    assert np.array_equal(partial_module_ranks(costs, everyone), module_ranks(ok))
    some = everyone.copy()
    some[[0, 1], 1] = False  # module 1: candidates 2 and 3 only (2 is smaller: +0.5, 3: -0.5)
    some[1, 2] = False  # module 2: without the failed candidate, so it counts
    expected = np.array([[0.5, 1 / 6, -1 / 6, -0.5], [0.0, 0.0, 0.5, -0.5], [-0.5, 0.0, 0.5, 0.0]]).mean(axis=0)
    assert np.allclose(partial_module_ranks(costs, some), expected)
    with pytest.raises(MloptError, match="partial_module_ranks"):
        partial_module_ranks(costs, some[:, :2])


class _RecordingEnvironment(synthetic.SyntheticEnvironment):
    def __init__(self):
        super().__init__(1.0)
        self.calls = []

    def costs(self, policies, items, work):
        self.calls.append([(i, m.name) for i, m in items])
        return super().costs(policies, items, work)


def test_large_pairs_compile_each_large_module_by_that_many_whole_pairs_and_all_pairs_is_plain_es(tmp_path):
    def run(sub, large_pairs, extra=0):
        env = _RecordingEnvironment()
        cfg = ESConfig(iterations=3, modules_per_perturbation=16, sigma=0.1, lr=0.1, seed=0, perturbations=6,
                       objective="module-rank", large_pairs=large_pairs, large_share=0.25, large_extra=extra)
        trainer = ESTrainer(synthetic.warm_start(TRAIN, epochs=3), TRAIN, _baseline(), tmp_path / sub, cfg,
                            env=env)
        metrics = []
        trainer.run(metrics.append)
        return trainer, env, metrics
    plain, plain_env, _ = run("plain", 0)
    every, _, _ = run("every", 6)  # as many as there are pairs: plain ES bit for bit
    assert np.array_equal(plain.theta, every.theta)
    fewer, env, metrics = run("fewer", 2, extra=3)
    base = _baseline()
    large = {m.name for m in sorted(TRAIN, key=lambda m: base[m.name])[-12:]}  # the largest quarter of 48
    assert {TRAIN[j].name for j in fewer.large} == large
    for it, (call, plain_call) in enumerate(zip(env.calls, plain_env.calls)):
        by_module = {}
        for i, name in call:
            by_module.setdefault(name, set()).add(i)
        drawn = {name for _, name in plain_call}
        assert set(by_module) - drawn <= large and len(set(by_module) - drawn) == 3  # the extra ones are large
        for name, candidates in by_module.items():
            if name in large:
                assert len(candidates) == 4 and all(c ^ 1 in candidates for c in candidates)  # 2 whole pairs
            else:
                assert candidates == set(range(12))
        assert metrics[it]["large_modules"] == sum(1 for name in by_module if name in large)
        assert metrics[it]["evaluations"] == len(call) < len(plain_call) + 3 * 12
    assert not np.array_equal(plain.theta, fewer.theta)
    for bad in (ESConfig(large_pairs=-1), ESConfig(large_pairs=2, large_share=1.0),
                ESConfig(large_pairs=2, objective="total")):
        with pytest.raises(MloptError, match="large"):
            ESTrainer(synthetic.warm_start(TRAIN, epochs=1), TRAIN, _baseline(), tmp_path / "bad", bad,
                      env=synthetic.SyntheticEnvironment(1.0))

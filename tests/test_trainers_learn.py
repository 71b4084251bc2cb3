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
from mlopt.training.environment import Trajectory, rollout_seed
from mlopt.training.es import ESConfig, ESTrainer, default_pairs, flatten, module_ranks, shape_values
from mlopt.training.ppo import PPOConfig, PPOTrainer
from tests.support import synthetic

TRAIN = synthetic.modules(48, seed=1, prefix="t")
HELD = synthetic.modules(24, seed=2, prefix="h")  # never trained on
VALIDATION = synthetic.modules(12, seed=3, prefix="v")
REACH = 0.75  # of the optimal saving, on the held-out modules


def _baseline():
    return synthetic.baseline(TRAIN + VALIDATION)


def _run_es(tmp_path, sign: float, iterations: int, objective: str = "total", lr: float = 0.1, hidden=(16,)):
    env = synthetic.SyntheticEnvironment(sign)
    start = synthetic.warm_start(TRAIN, hidden=hidden, epochs=3)
    cfg = ESConfig(iterations=iterations, modules_per_perturbation=16, sigma=0.1, lr=lr, seed=0, objective=objective)
    trainer = ESTrainer(start, TRAIN, _baseline(), tmp_path, cfg, validation=VALIDATION, env=env)
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
                                            (_run_ppo, 80),
                                            # 4 draws of 4 modules: the same 16 rollouts an iteration
                                            (partial(_run_ppo, samples=4), 80)],
                         ids=["es", "es-pairs", "es-module-rank", "ppo", "ppo-group-baseline"])
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


@pytest.mark.parametrize("kind", ["es", "ppo"])
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
    heuristic's, as the real sampled rollouts are (benchmarks/README.md, "PPO with a
    group baseline")."""

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
@pytest.mark.parametrize("kind", ["es", "ppo", "ppo-group"])
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
    moved = out[1][0] != ESTrainer(policy, train, baseline, tmp_path, ESConfig()).theta.tobytes()
    # ES moves exactly when its candidates differ (all tied: every rank equal, no gradient); PPO always
    assert moved == ("ppo" in kind or m["candidate_delta_std"] > 0)
    assert m["failed_modules"] == 0 and m["validation_delta_percent"] is not None
    if "ppo" in kind:
        assert m["rows"] > 0 and m["modules"] == (3 if kind == "ppo" else 4)


@pytest.mark.parametrize("kind", ["es", "es-momentum", "ppo"])
def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, kind):
    def run(path, iterations, resume):
        path.mkdir(exist_ok=True)
        env = synthetic.SyntheticEnvironment()
        start = synthetic.warm_start(TRAIN, epochs=3)
        if kind.startswith("es"):
            cfg = ESConfig(iterations=iterations, seed=4, momentum=0.5 if kind == "es-momentum" else 0.0)
            t = ESTrainer(start, TRAIN, _baseline(), path, cfg, validation=VALIDATION, env=env)
        else:
            t = PPOTrainer(start, TRAIN, _baseline(), path, PPOConfig(iterations=iterations, modules=8, seed=4),
                           validation=VALIDATION, env=env)
        if resume:
            assert t.resume()
        t.run()
        return t

    straight = run(tmp_path / "a", 4, False)
    run(tmp_path / "b", 2, False)
    resumed = run(tmp_path / "b", 4, True)
    assert resumed.theta.tobytes() == straight.theta.tobytes() and resumed.best == straight.best
    assert flatten(resumed.current_policy()).tobytes() == flatten(straight.current_policy()).tobytes()
    best = [(tmp_path / side / "best" / "policy.npz").read_bytes() for side in "ab"]
    assert best[0] == best[1]


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


@pytest.mark.llvm
@pytest.mark.parametrize("kind", ["ppo"])
def test_cli_train_runs_resumes_and_refuses_a_silent_restart(real_setup, mini_corpus, tmp_path, capsys, kind):
    from mlopt.cli import main

    policy = real_setup[0]
    policy.save(tmp_path / "bc.npz")
    run = tmp_path / kind
    args = ["train", kind, str(mini_corpus), "--init", str(tmp_path / "bc.npz"), "-o", str(run),
            "--validation", str(mini_corpus), "--modules", "2", "--workers", "2", "--no-compile", "--quiet", "--json"]
    assert main([*args, "--iterations", "1"]) == 0
    capsys.readouterr()
    assert main([*args, "--iterations", "1"]) == 2  # an existing run: --resume or --force
    assert "--resume to continue it, --force to start over" in capsys.readouterr().err
    assert main([*args, "--iterations", "2", "--resume"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["iterations"] == 2 and summary["best_validation_delta_percent"] is not None
    metrics = [json.loads(s) for s in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [0, 1, 2] and all(m["modules"] == 2 for m in metrics[1:])
    assert main([*args, "--iterations", "1", "--force"]) == 0  # starts over
    assert [json.loads(s)["iteration"] for s in (run / "metrics.jsonl").read_text().splitlines()] == [0, 1]

"""Holding ES's flip share (mlopt.training.flip_hold, ESConfig.hold_flip_share):
the controller's arithmetic, the probe, the measured share against a
brute-force count, and an ES run that moves sigma toward the target from
what it measures, keeps its step's length, and resumes to the same bits.
Learning (and not learning with the reward flipped) is
tests/test_trainers_learn.py's."""

from __future__ import annotations

import numpy as np
import pytest

from mlopt.errors import MloptError
from mlopt.training.es import ESConfig, ESTrainer, flatten, unflatten
from mlopt.training.flip_hold import GAIN, MAX_FACTOR, changed_share, held_sigma, measuring_perturbations, site_probe
from tests.support import synthetic

TRAIN = synthetic.modules(32, seed=21, prefix="t")
SITES = {m.name: m.batch() for m in TRAIN}


def _start():
    return synthetic.warm_start(TRAIN, epochs=2)


def test_held_sigma_moves_by_the_share_ratio_within_a_factor():
    assert held_sigma(0.1, 0.06, 0.06) == 0.1
    assert held_sigma(0.1, 0.24, 0.06) == pytest.approx(0.1 * 0.25 ** GAIN, rel=1e-12)  # too many: smaller
    assert held_sigma(0.1, 0.03, 0.06) == pytest.approx(0.1 * 2.0 ** GAIN, rel=1e-12)  # too few: larger
    assert held_sigma(0.1, 0.0, 0.06) == pytest.approx(0.1 * MAX_FACTOR)  # nothing changed: the most
    assert held_sigma(0.1, 1e-9, 0.06) == pytest.approx(0.1 * MAX_FACTOR)
    assert held_sigma(0.1, 1.0, 1e-9) == pytest.approx(0.1 / MAX_FACTOR)


def test_the_probe_takes_seeded_modules_of_the_names_given_until_the_rows():
    start = _start()
    names = [m.name for m in TRAIN[:20]]
    probe = site_probe(start, SITES, names, rows=200, seed=3)
    again = site_probe(start, SITES, names, rows=200, seed=3)
    assert np.array_equal(probe.x, again.x) and np.array_equal(probe.owner, again.owner)
    assert len(probe.x) >= 200 and probe.modules < 20
    assert np.array_equal(np.unique(probe.owner), np.arange(probe.modules))
    # the rows are exactly those of the modules taken, in the drawn order, each its own owner
    taken = {m.name: start.training_inputs(SITES[m.name])[0] for m in TRAIN[:20]}
    for k in range(probe.modules):
        rows = probe.x[probe.owner == k]
        assert sum(len(x) == len(rows) and np.array_equal(x, rows) for x in taken.values()) == 1
    assert np.all(np.diff(probe.owner) >= 0)  # module by module
    everything = site_probe(start, SITES, names, rows=10**9, seed=3)
    assert everything.modules == 20  # names outside the list never enter
    with pytest.raises(MloptError, match="call-site features"):
        site_probe(start, SITES, ["nowhere"], rows=10, seed=0)


def test_changed_share_counts_modules_with_a_changed_decision():
    center = _start()
    probe = site_probe(center, SITES, [m.name for m in TRAIN], rows=10**9, seed=0)
    assert changed_share(probe, center, [center, center]) == 0.0
    w, b = center.layers[-1]
    swapped = unflatten(center, flatten(center))
    swapped.layers[-1] = (w[::-1].copy(), b[::-1].copy())  # the two logits swapped: every decision flips
    assert changed_share(probe, center, [swapped]) == 1.0
    theta = flatten(center)
    rng = np.random.default_rng(5)
    candidates = [unflatten(center, theta + 0.4 * np.abs(theta).mean() * rng.standard_normal(theta.size)
                            .astype(np.float32)) for _ in range(4)]
    base = center.decide_inputs(probe.x)
    expected = np.mean([len({int(o) for o in probe.owner[c.decide_inputs(probe.x) != base]}) / probe.modules
                        for c in candidates])
    assert 0.0 < expected < 1.0
    assert changed_share(probe, center, candidates) == pytest.approx(expected, abs=0)
    assert changed_share(probe, center, candidates + [center]) == pytest.approx(expected * 4 / 5)


def _trainer(tmp_path, target: float, iterations: int, sigma: float = 0.1):
    cfg = ESConfig(iterations=iterations, modules_per_perturbation=8, sigma=sigma, lr=0.1, seed=2,
                   objective="module-rank", hold_flip_share=target, hold_rows=2000, hold_samples=4)
    return ESTrainer(_start(), TRAIN, synthetic.baseline(TRAIN), tmp_path, cfg,
                     env=synthetic.SyntheticEnvironment(), sites=SITES)


def test_es_moves_sigma_from_what_it_measures_and_keeps_the_step_length(tmp_path):
    trainer = _trainer(tmp_path / "low", 0.02, 4)
    probe = trainer.hold_probe
    sigma = trainer.config.sigma
    thetas, rows = [trainer.theta.copy()], []
    for _ in range(4):
        rows.append(trainer.step())
        thetas.append(trainer.theta.copy())
    for i, m in enumerate(rows):
        # the share the run recorded is the share its own perturbations change around the iterate
        eps = measuring_perturbations(2, i, 4, trainer.trained)
        center = unflatten(trainer.template, thetas[i])
        share = changed_share(probe, center, [unflatten(trainer.template, (thetas[i] + sigma * trainer.scale * e)
                                                        .astype(np.float32)) for e in eps])
        assert m["hold_sigma_measured"] == sigma and m["hold_share_measured"] == share
        sigma = held_sigma(sigma, share, 0.02)
        assert m["sigma"] == sigma
        assert m["lr"] == pytest.approx(0.1 * sigma / 0.1, rel=1e-12)  # the step keeps its length
    assert rows[0]["hold_share_measured"] > 0.02 * 2 and rows[-1]["sigma"] < 0.1 / 2  # it shrank toward 2%
    high = _trainer(tmp_path / "high", 0.9, 3)
    high.run()
    assert high.sigma > 0.1  # too few modules changed: larger


def test_a_held_run_resumes_to_the_same_bits(tmp_path):
    whole = _trainer(tmp_path / "whole", 0.05, 4)
    whole.run()
    part = _trainer(tmp_path / "part", 0.05, 2)
    part.run()
    resumed = ESTrainer(_start(), TRAIN, synthetic.baseline(TRAIN), tmp_path / "part",
                        ESConfig(**{**part.config.__dict__, "iterations": 4}),
                        env=synthetic.SyntheticEnvironment(), sites=SITES)
    assert resumed.resume() and resumed.sigma == part.sigma != 0.1
    resumed.run()
    assert np.array_equal(resumed.theta, whole.theta) and resumed.sigma == whole.sigma


def test_holding_needs_sites_and_a_share_in_range(tmp_path):
    start, env = _start(), synthetic.SyntheticEnvironment()
    with pytest.raises(MloptError, match="call-site features"):
        ESTrainer(start, TRAIN, synthetic.baseline(TRAIN), tmp_path, ESConfig(hold_flip_share=0.06), env=env)
    for bad in ({"hold_flip_share": 1.5}, {"hold_flip_share": 0.06, "hold_samples": 0},
                {"hold_flip_share": 0.06, "hold_rows": 0}):
        with pytest.raises(MloptError, match="holding the flip share"):
            ESTrainer(start, TRAIN, synthetic.baseline(TRAIN), tmp_path, ESConfig(**bad), env=env, sites=SITES)

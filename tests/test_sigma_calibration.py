"""ES's sigma calibrated to a share of modules changed (mlopt.training.sigma_calibration),
on the synthetic problem (tests/support/synthetic.py): the calibrated sigma reaches the
target and the sigma just below it does not, the result is the same bits every time,
perturbing fewer layers needs a larger sigma, and bad targets are refused."""

from __future__ import annotations

import numpy as np
import pytest

from mlopt.errors import MloptError
from mlopt.training.sigma_calibration import calibrate_sigma, flip_probe, module_flip_share
from tests.support import synthetic

MODULES = synthetic.modules(120, seed=7)


def _trace(mods):
    columns = {"x0": np.concatenate([m.x[:, :1] for m in mods]), "x1": np.concatenate([m.x[:, 1:] for m in mods])}
    rows = np.concatenate([[0], np.cumsum([len(m.x) for m in mods])]).astype(np.int64)
    return columns, rows


@pytest.fixture(scope="module")
def policy():
    return synthetic.warm_start(MODULES[:40], hidden=(16,), epochs=3)


@pytest.fixture(scope="module")
def probe(policy):
    columns, rows = _trace(MODULES)
    return flip_probe(policy, columns, rows, rows=2000, seed=0)


def test_probe_takes_whole_modules_up_to_the_row_budget(policy):
    columns, rows = _trace(MODULES)
    probe = flip_probe(policy, columns, rows, rows=2000, seed=0)
    sizes = np.bincount(probe.owner)
    assert len(sizes) == probe.modules and sizes.min() >= 5  # whole synthetic modules (5-79 sites)
    assert 2000 <= len(probe.owner) < 2000 + sizes.max() + 1
    assert np.array_equal(probe.decided, policy.decide(probe.batch))
    other = flip_probe(policy, columns, rows, rows=2000, seed=1)
    assert not np.array_equal(other.batch["x0"], probe.batch["x0"])  # the subset follows the seed


def test_flip_share_is_zero_without_noise_and_grows_with_sigma(policy, probe):
    assert module_flip_share(policy, probe, 0.0) == 0.0
    small, large = module_flip_share(policy, probe, 0.01), module_flip_share(policy, probe, 1.0)
    assert 0.0 <= small < large <= 1.0 and large > 0.2


@pytest.mark.parametrize("target", [0.05, 0.3])
def test_calibrated_sigma_reaches_the_target_and_just_below_does_not(policy, probe, target):
    cal = calibrate_sigma(policy, probe, target, samples=8, steps=10)
    assert cal.share >= target and cal.share == module_flip_share(policy, probe, cal.sigma, samples=8)
    assert cal.below is not None and module_flip_share(policy, probe, cal.below, samples=8) < target
    assert 1.0 < cal.sigma / cal.below <= 2.0 ** (1 / 2 ** 10) * (1 + 1e-12)
    again = calibrate_sigma(policy, probe, target, samples=8, steps=10)
    assert again == cal  # the same bits: the same perturbations, the same decision pass


def test_bad_targets_are_refused(policy, probe):
    for target in (0.0, 1.0, -0.1):
        with pytest.raises(MloptError, match="target share"):
            calibrate_sigma(policy, probe, target)
    with pytest.raises(MloptError, match="short of the target"):
        calibrate_sigma(policy, probe, 0.999, bounds=(1e-4, 0.1))
    with pytest.raises(MloptError, match="no decision"):
        flip_probe(policy, {"x0": np.zeros((0, 1), np.int64), "x1": np.zeros((0, 1), np.int64)},
                   np.zeros(3, np.int64))


def test_fast_decisions_equal_the_decision_pass_on_perturbed_policies(policy, probe):
    from mlopt.training.es import flatten, layer_scale, unflatten
    from mlopt.training.sigma_calibration import decisions

    theta, scale = flatten(policy), layer_scale(policy)
    rng = np.random.default_rng(5)
    for sigma in (0.05, 0.5, 2.0):
        p = unflatten(policy, (theta + sigma * scale * rng.standard_normal(theta.size)).astype(np.float32))
        exact = np.argmax(p.logits(probe.batch), axis=1)
        assert np.array_equal(decisions(p, probe.batch), exact)
    # a tie: every logit equal, so every row is decided by the pass (argmax: the first action)
    tied = unflatten(policy, np.zeros_like(theta))
    assert np.array_equal(decisions(tied, probe.batch), np.zeros(len(probe.owner), np.int64))


def test_the_probe_takes_only_the_modules_it_is_given(policy):
    columns, rows = _trace(MODULES)
    among = list(range(0, len(MODULES), 3))
    probe = flip_probe(policy, columns, rows, rows=10**6, among=among)  # a budget above every row: all of them
    assert probe.modules == len(among) and len(probe.owner) == sum(len(MODULES[i].x) for i in among)
    assert np.array_equal(probe.batch["x0"], np.concatenate([MODULES[i].x[:, :1] for i in among]))

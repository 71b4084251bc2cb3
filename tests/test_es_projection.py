"""The projected ES estimate (mlopt.training.es_projection, ESConfig.project):
exact margin gradients, the flipped sites, the projection, and that an
iteration's step lies in the span of its drawn modules' flipped-site
gradients and nowhere else. Learning (and not learning with the reward
flipped) is tests/test_trainers_learn.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlopt.errors import MloptError
from mlopt.rollouts.dataset import TraceDataset
from mlopt.training.es import ESConfig, ESTrainer, flatten, unflatten
from mlopt.training.es_projection import flipped_sites, margin_gradients, orthonormal_rows, project
from tests.support import synthetic

TRAIN = synthetic.modules(32, seed=11, prefix="t")
SITES = {m.name: m.batch() for m in TRAIN}


def _start(hidden=(16,)):
    return synthetic.warm_start(TRAIN, hidden=hidden, epochs=2)


def _margin(policy, x):
    return np.diff(policy.logits_of_inputs(x.copy()), axis=1)[:, 0].astype(np.float64)


@pytest.mark.parametrize("hidden", [(), (16,), (8, 8)], ids=["linear", "one-hidden", "two-hidden"])
def test_margin_gradients_are_the_derivatives_of_the_logit_difference(hidden):
    policy = _start(hidden)
    x = policy.training_inputs(TRAIN[0].batch())[0][:12]
    jac = margin_gradients(policy, x)
    theta = flatten(policy).astype(np.float64)
    assert jac.shape == (12, theta.size)
    for k in range(3):
        d = np.random.default_rng(k).standard_normal(theta.size)
        h = 1e-3 / np.linalg.norm(d)
        plus, minus = (unflatten(policy, (theta + s * h * d).astype(np.float32)) for s in (1, -1))
        numeric = (_margin(plus, x) - _margin(minus, x)) / (2 * h)
        # float32 logits: the difference quotient is good to ~1e-2 of the gradient's scale
        assert np.allclose(jac @ d, numeric, rtol=0, atol=2e-2 * np.abs(jac @ d).max() + 1e-3)
    assert margin_gradients(policy, x[:0]).shape == (0, theta.size)


def test_flipped_sites_are_the_rows_some_candidate_decides_differently():
    center = _start()
    theta = flatten(center)
    rng = np.random.default_rng(3)
    candidates = [unflatten(center, theta + 0.3 * np.abs(theta).mean() * rng.standard_normal(theta.size)
                            .astype(np.float32)) for _ in range(6)]
    batch = {k: np.concatenate([m.batch()[k] for m in TRAIN[:8]]) for k in ("x0", "x1")}
    x = center.training_inputs(batch)[0]
    base = center.decide(batch)
    expected = np.flatnonzero(np.any([c.decide(batch) != base for c in candidates], axis=0))
    assert len(expected) > 4  # the perturbations do flip sites
    assert np.array_equal(flipped_sites(center, candidates, x), expected)
    nearest = flipped_sites(center, candidates, x, max_sites=4)
    margin = np.abs(_margin(center, x))
    assert len(nearest) == 4 and np.all(np.diff(nearest) > 0)
    assert margin[nearest].max() <= np.sort(margin[expected])[3] + 1e-6  # the 4 nearest the boundary
    assert len(flipped_sites(center, [center], x)) == 0


def test_project_is_the_orthogonal_projection_onto_the_span():
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((5, 40))
    basis = orthonormal_rows(rows)
    v = rng.standard_normal(40)
    p = project(v, basis)
    assert np.allclose(project(p, basis), p)  # idempotent
    assert np.allclose(rows @ (v - p), 0)  # the residual is orthogonal to every row
    assert np.allclose(project(rows[2] * 3.0, basis), rows[2] * 3.0)  # the span is kept
    assert np.array_equal(project(v, basis[:0]), np.zeros(40))


def _trainer(tmp_path, project_on: bool, iterations: int = 1, **kw):
    cfg = ESConfig(iterations=iterations, modules_per_perturbation=8, sigma=0.1, lr=0.1, seed=4,
                   objective="module-rank", project=project_on, **kw)
    return ESTrainer(_start(), TRAIN, synthetic.baseline(TRAIN), tmp_path, cfg,
                     env=synthetic.SyntheticEnvironment(), sites=SITES if project_on else None)


def test_the_projected_step_lies_in_the_span_of_the_drawn_modules_flipped_site_gradients(tmp_path):
    plain, projected = _trainer(tmp_path / "plain", False), _trainer(tmp_path / "projected", True)
    start = plain.theta.copy()
    # what the iteration will draw and perturb, recomputed from the same seeds
    i, cfg = 0, projected.config
    rng = np.random.default_rng([cfg.seed, i])
    eps = rng.standard_normal((projected.pairs, start.size)).astype(np.float32)
    step = cfg.sigma * projected.scale
    candidates = [unflatten(projected.template, start + s * step * eps[p]) for p in range(projected.pairs)
                  for s in (1, -1)]
    center = unflatten(projected.template, start)
    rows = []
    for j in projected.sampler.sample(i, cfg.modules_per_perturbation):
        x = center.training_inputs(SITES[TRAIN[j].name])[0]
        sites = flipped_sites(center, candidates, x)
        rows.append(margin_gradients(center, x[sites]) * projected.scale)
    span = orthonormal_rows(np.concatenate(rows))
    plain.run()
    projected.run()
    u_plain = (plain.theta - start) / plain.scale
    u_proj = ((projected.theta - start) / projected.scale).astype(np.float64)
    assert 0 < len(span) < start.size / 2
    outside = u_proj - project(u_proj, span)
    assert np.linalg.norm(outside) < 1e-4 * np.linalg.norm(u_proj)  # nothing outside the span
    outside_plain = u_plain - project(u_plain.astype(np.float64), span)
    assert np.linalg.norm(outside_plain) > 0.5 * np.linalg.norm(u_plain)  # where plain ES's noise goes
    m = json.loads((tmp_path / "projected" / "metrics.jsonl").read_text().splitlines()[-1])
    assert m["projected_dimensions"] >= len(span)  # per module; modules may share directions
    assert m["projected_sites"] > 0 and m["projected_modules_unseen"] == 0 and m["projection_kappa"] > 0


def test_projected_es_needs_sites_and_the_module_rank_objective(tmp_path):
    start, env = _start(), synthetic.SyntheticEnvironment()
    with pytest.raises(MloptError, match="call-site features"):
        ESTrainer(start, TRAIN, synthetic.baseline(TRAIN), tmp_path,
                  ESConfig(objective="module-rank", project=True), env=env)
    for bad in ({"objective": "total"}, {"objective": "module-rank", "guide": 2}):
        with pytest.raises(MloptError, match="needs objective module-rank"):
            ESTrainer(start, TRAIN, synthetic.baseline(TRAIN), tmp_path, ESConfig(project=True, **bad), env=env,
                      sites=SITES)


def test_a_module_without_recorded_sites_adds_nothing_and_is_counted(tmp_path):
    trainer = _trainer(tmp_path, True)
    trainer.sites = {}  # no module has features
    start = trainer.theta.copy()
    trainer.run()
    m = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert m["projected_modules_unseen"] > 0 and m["projected_dimensions"] == 0
    assert np.array_equal(trainer.theta, start)


def test_trace_batches_are_each_modules_rows():
    ds = TraceDataset(["a", "b", "c"], np.array([10, 20, 30]), np.array([0, 2, 2, 5]),
                      {"x0": np.arange(5).reshape(5, 1)})
    batches = ds.batches()
    assert list(batches) == ["a", "c"]  # b has no rows
    assert batches["a"]["x0"].ravel().tolist() == [0, 1] and batches["c"]["x0"].ravel().tolist() == [2, 3, 4]

"""with_hinge_basis: a policy grown by piecewise-linear terms of each
feature decides as the original until its output layer weighs them, and
each hinge unit is exactly relu(p_j - k / knots) of its feature's bucket
position, on call sites the compiler logged (the mini corpus)."""

from __future__ import annotations

import numpy as np
import pytest

from mlopt.policy.hinge_basis import hinge_columns, with_hinge_basis
from mlopt.policy.mlp import sure_decisions
from mlopt.problems import get

PROBLEM = get("inlining-default")


def _networks(vocab):
    from mlopt.problems.inlining import InlinePolicy
    from mlopt.problems.inlining_default.prior import with_default_prior

    return [InlinePolicy.random(vocab, hidden=(16,), seed=1), InlinePolicy.random(vocab, hidden=(16, 8), seed=2),
            with_default_prior(InlinePolicy.random(vocab, hidden=(16, 8, 8), seed=3), 20.0)]


def test_grown_policy_decides_as_the_original(mini_default_sites):
    _, batch, vocab = mini_default_sites
    for net in _networks(vocab):
        logits, slack = net.logits_with_slack(batch)
        lead, unsure = sure_decisions(logits, slack)
        for knots in (1, 5):
            grown = with_hinge_basis(net, knots)
            assert type(grown) is type(net) and len(grown.layers) == len(net.layers)
            m = len(hinge_columns(net))
            assert grown.layers[-1][0].shape == (2, net.layers[-1][0].shape[1] + m * knots)
            assert not grown.layers[-1][0][:, net.layers[-1][0].shape[1]:].any()  # the new terms start at 0
            np.testing.assert_allclose(grown.logits(batch), net.logits(batch), rtol=0, atol=1e-4)
            same = grown.decide(batch) == lead
            assert same[~unsure].all()


def test_each_hinge_is_its_features_bucket_position_past_the_knot(mini_default_sites):
    """One output weight c on hinge (j, k) moves the "yes" logit by exactly
    c * relu(p_j - k / knots): p_j from the vocab's own normalization."""
    _, batch, vocab = mini_default_sites
    net = _networks(vocab)[2]
    knots = 4
    grown = with_hinge_basis(net, knots)
    cols = hinge_columns(net)
    names = PROBLEM.feature_names
    raw = np.concatenate([np.asarray(batch[n]).reshape(len(batch[n]), -1) for n in names], axis=1)
    p = net.vocab.subset(names).normalize(raw)[:, :raw.shape[1]]
    base = grown.logits(batch)
    wide = net.layers[-1][0].shape[1]
    checked = 0
    for j in (0, len(cols) // 2, len(cols) - 1):
        for k in (0, knots - 1):
            w, b = (a.copy() for a in grown.layers[-1])
            w[1, wide + j * knots + k] = 3.0
            moved = type(grown)(grown.vocab, [*grown.layers[:-1], (w, b)]).logits(batch)
            expect = 3.0 * np.maximum(p[:, cols[j]] - np.float32(k / knots), 0)
            np.testing.assert_allclose(moved[:, 1] - base[:, 1], expect, rtol=0, atol=1e-4)
            np.testing.assert_array_equal(moved[:, 0], base[:, 0])
            checked += int((expect > 0).sum())
    assert checked > 0  # some call site sits past a knot: the check can fail


def test_hinge_basis_errors(mini_default_sites):
    from mlopt.problems.inlining import InlinePolicy

    _, _, vocab = mini_default_sites
    with pytest.raises(ValueError, match="knots must be an integer >= 1"):
        with_hinge_basis(_networks(vocab)[0], 0)
    with pytest.raises(ValueError, match="needs a hidden layer"):
        with_hinge_basis(InlinePolicy.random(vocab, hidden=(), seed=4), 3)

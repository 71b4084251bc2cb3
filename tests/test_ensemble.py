"""logit_mean: a committee of policies is one MLP whose logits are the
mean of its members' on call sites the compiler logged (the mini corpus),
whose compiled form decides as its numpy form, and which refuses members
that cannot be combined."""

from __future__ import annotations

import numpy as np
import pytest

import mlopt
from mlopt.policy.ensemble import logit_mean
from mlopt.problems import get

PROBLEM = get("inlining-default")


def _priors(vocab, hidden, seeds):
    from mlopt.problems.inlining import InlinePolicy
    from mlopt.problems.inlining_default.prior import with_default_prior

    return [with_default_prior(InlinePolicy.random(vocab, hidden=hidden, seed=s), 2.0) for s in seeds]


def test_committee_logits_are_the_members_mean(mini_default_sites):
    _, batch, vocab = mini_default_sites
    for hidden in ((16,), (16, 8), (8, 8, 4)):
        members = _priors(vocab, hidden, (1, 2, 3))
        committee = logit_mean(members)
        assert type(committee) is type(members[0])
        want = np.mean([m.logits(batch) for m in members], axis=0)
        np.testing.assert_allclose(committee.logits(batch), want, rtol=0, atol=1e-4)
        decisions = [m.decide(batch) for m in members]
        assert any((d != decisions[0]).any() for d in decisions[1:])  # the members disagree somewhere
    one = _priors(vocab, (16, 8), (5,))[0]
    np.testing.assert_allclose(logit_mean([one]).logits(batch), one.logits(batch), rtol=0, atol=1e-5)


def test_compiled_committee_decides_as_numpy(mini_default_sites, tmp_path):
    modules, _, vocab = mini_default_sites
    committee = logit_mean(_priors(vocab, (16, 8), (1, 2, 3)))
    committee.export(tmp_path / "model")
    so = mlopt.compile_policy(tmp_path / "model", tmp_path / "committee.so")
    loaded = mlopt.load_policy(so)
    compared = 0
    for m in modules:
        r = mlopt.compile(m, loaded)
        if r.log is None:
            continue
        want = committee.decide({n: r.log[n] for n in PROBLEM.feature_names})
        np.testing.assert_array_equal(np.asarray(r.log["inlining_decision"]).reshape(-1), want)
        compared += len(want)
    assert compared > 0


def test_committee_errors(mini_default_sites):
    from mlopt.problems.inlining import InlinePolicy

    _, _, vocab = mini_default_sites
    a, b = _priors(vocab, (16, 8), (1, 2))
    with pytest.raises(ValueError, match="at least one policy"):
        logit_mean([])
    with pytest.raises(ValueError, match="policy 1 has 2 layers"):
        logit_mean([a, _priors(vocab, (16,), (3,))[0]])
    with pytest.raises(ValueError, match="is for 'inlining'"):
        logit_mean([a, InlinePolicy.random(vocab, hidden=(16, 8), seed=4)])
    other = mlopt.Vocab({f: np.asarray(vocab.boundaries[f]) + 1 for f in vocab.features})
    with pytest.raises(ValueError, match="vocab differs"):
        logit_mean([a, type(b)(other, b.layers)])

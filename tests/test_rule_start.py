"""SiteRule (a fixed rule over the inlining-linkage inputs) and the rule
start (training/rule_start.py: a prior fine-tuned to decide as the rule).

A hand-built module (tests/test_inlining_linkage.py's) calls one function
of each linkage class twice, at sites the -Oz heuristic declines. The rule
``linkonce:2:M`` with a margin above every site's cost must inline exactly
the linkonce sites besides the heuristic's, in process; its labels over
the compile's log must be the decisions it took. The taught start, exported
and run in the engine, must decide as the rule on that module, where the
start it was taught from declines the linkonce sites -- a teacher that does
not teach (or teaches the wrong class) fails."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlopt
from mlopt.problems import get
from mlopt.problems.inlining_linkage.site_rule import SiteRule
from tests.test_inlining_linkage import CALLEES, IR

MARGIN = 10**6  # above every site's cost_estimate - threshold here (the linkonce callee has 3 users)


def test_parse_and_labels_are_the_rule():
    rule = SiteRule.parse("linkonce,local:2:100")
    assert rule == SiteRule(frozenset({1, 2}), 2, 100) == SiteRule.parse("2,1:2:100")
    assert str(rule) == "local,linkonce:2:100"
    for bad, says in (("linkonce:2", "expected LINKAGES"), ("static:2:100", "not one of"),
                      ("linkonce:x:100", "integers"), ("9:2:100", "not one of")):
        with pytest.raises(ValueError, match=says):
            SiteRule.parse(bad)
    columns = {  # rows: heuristic yes; linkonce in range; too many users; cost too high; local; external
        "inlining_default": np.array([1, 0, 0, 0, 0, 0]),
        "callee_linkage": np.array([0, 2, 2, 2, 1, 0]),
        "callee_users": np.array([9, 2, 3, 1, 1, 1]),
        "cost_estimate": np.array([0, 104, 0, 105, 0, 0]),
        "threshold": np.array([5, 5, 5, 5, 5, 5]),
    }
    assert rule.labels(columns).tolist() == [1, 1, 0, 0, 1, 0]
    assert SiteRule.parse("linkonce:2:100").labels(columns).tolist() == [1, 1, 0, 0, 0, 0]
    with pytest.raises(KeyError, match="callee_linkage"):
        rule.labels({k: v for k, v in columns.items() if k != "callee_linkage"})


@pytest.fixture(scope="module")
def module():
    return mlopt.Module(IR.encode(), opt_level="Oz", reloc_model="static")


def _linkonce_declined(module):
    """(heuristic compile, mask of the linkonce sites it declines), checking the module is what the test needs."""
    heuristic = mlopt.compile(module, log_callee_linkage=True, call_sites=True)
    callees = [callee for _, callee in heuristic.call_sites]
    lo = np.array([CALLEES[c][1] == 2 for c in callees])
    declined = lo & (heuristic.default_decisions == 0)
    assert declined.sum() >= 1, "the heuristic inlines the linkonce callee: the module no longer tests the rule"
    return heuristic, declined


def test_rule_as_a_policy_inlines_the_linkonce_sites_and_labels_its_log(module):
    heuristic, declined = _linkonce_declined(module)
    rule = SiteRule.parse(f"linkonce:3:{MARGIN}")
    r = mlopt.compile(module, rule, log_callee_linkage=True)
    expected = np.where(declined, 1, heuristic.default_decisions)
    assert r.decisions.tolist() == expected.tolist()
    assert rule.labels(r.log).tolist() == r.decisions.tolist()
    assert r.text_size != heuristic.text_size
    local = mlopt.compile(module, SiteRule.parse(f"local:3:{MARGIN}"))  # another class moves other sites
    assert local.decisions.tolist() != r.decisions.tolist()


def _dataset(module, mini_corpus):
    from mlopt.rollouts import TraceDataset

    """The mini corpus' heuristic logs with the linkage, and the hand-built module's 16 times (its rows,
    unlike anything in the mini corpus, must weigh enough to be learnt by a small network)."""
    compiles = [(f"mini{i}", mlopt.compile(m, log_callee_linkage=True))
                for i, m in enumerate(mlopt.load_corpus(mini_corpus))]
    handmade = mlopt.compile(module, log_callee_linkage=True)
    compiles += [(f"handmade{i}", handmade) for i in range(16)]
    return TraceDataset.from_logs([n for n, _ in compiles], [c.text_size for _, c in compiles],
                                  [c.log_bytes for _, c in compiles])


def _prior(mini_default_sites):
    from mlopt.problems.inlining import InlinePolicy
    from mlopt.problems.inlining_default.prior import with_default_prior

    _, _, vocab = mini_default_sites
    return with_default_prior(InlinePolicy.random(vocab.subset(get("inlining").feature_names), hidden=(32, 16),
                                                  seed=3), 20.0)


def test_taught_start_decides_as_the_rule_in_the_engine(module, mini_corpus, mini_default_sites, tmp_path):
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.training.rule_start import taught_start

    heuristic, declined = _linkonce_declined(module)
    rule = SiteRule.parse(f"linkonce:3:{MARGIN}")
    prior = _prior(mini_default_sites)
    dataset = _dataset(module, mini_corpus)
    columns = set(dataset.columns)
    result = taught_start(prior, dataset, rule, epochs=300, lr=1e-2, heldout_fraction=0.0)
    assert set(dataset.columns) == columns  # the labels' column is not left behind
    assert result.added >= declined.sum() and result.added_recall > 0.95 and result.agreement > 0.98
    assert result.bc.policy.problem.name == "inlining-linkage"
    expected = np.where(declined, 1, heuristic.default_decisions)
    taught = mlopt.compile(module, mlopt.load_policy(result.bc.policy.export(tmp_path / "taught")))
    assert taught.decisions.tolist() == expected.tolist()
    before = mlopt.compile(module, mlopt.load_policy(with_linkage_input(prior).export(tmp_path / "before")))
    assert before.decisions[declined].tolist() == [0] * int(declined.sum())  # the start itself does not


def test_cli_rule_start_writes_a_start_and_says_what_is_missing(module, mini_corpus, mini_default_sites, tmp_path,
                                                                capsys):
    from mlopt.cli import main
    from mlopt.problems import load_weights

    _prior(mini_default_sites).save(tmp_path / "prior.npz")
    dataset = _dataset(module, mini_corpus)
    dataset.save(tmp_path / "trace.npz")
    out = tmp_path / "start.npz"
    assert main(["policy", "rule-start", str(tmp_path / "prior.npz"), str(tmp_path / "trace.npz"),
                 "--rule", "linkonce:2:100", "--epochs", "2", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rule"] == "linkonce:2:100" and report["rows"] == len(dataset)
    assert load_weights(out).problem.name == "inlining-linkage"
    # an existing output is kept; a bad rule and a trace without the linkage are usage errors naming the cause
    assert main(["policy", "rule-start", str(tmp_path / "prior.npz"), str(tmp_path / "trace.npz"),
                 "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["policy", "rule-start", str(tmp_path / "prior.npz"), str(tmp_path / "trace.npz"),
                 "--rule", "static:2:100", "-o", str(tmp_path / "x.npz")]) == 2
    assert "not one of" in capsys.readouterr().err
    del dataset.columns["callee_linkage"]
    dataset.save(tmp_path / "plain.npz")
    assert main(["policy", "rule-start", str(tmp_path / "prior.npz"), str(tmp_path / "plain.npz"),
                 "-o", str(tmp_path / "y.npz")]) == 2
    assert "--callee-linkage" in capsys.readouterr().err

"""The inlining-default problem: a policy whose 39th input is the -Oz
heuristic's decision (inlining_default), fed by mlopt's advisor in the
in-process engine (model and Python callable) and in stock clang with the
plugin. Two hand-built linear policies make the check exact: one answers
the heuristic's decision, the other its opposite -- a runner that fed 0 (or
nothing) instead of the decision fails both."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import mlopt
from mlopt.corpus import corpus_entries
from mlopt.evaluation import clang_command
from mlopt.problems import get
from tests.support.llvm import llvm_size_text

PROBLEM = get("inlining-default")


def _linear(vocab: mlopt.Vocab, flip: bool):
    """A one-layer policy of the inlining-default problem deciding
    inlining_default (flip: 1 - inlining_default) and ignoring the rest."""
    from mlopt.problems.inlining_default import DefaultInformedPolicy

    names = PROBLEM.feature_names
    col = names.index("inlining_default")
    rows = np.zeros((2, len(names)), np.int64)
    rows[1, col] = 1
    p0, p1 = vocab.subset(names).normalize(rows)[:, col]
    assert p1 > p0  # the vocab tells the two decisions apart
    w = np.zeros((2, 2 * len(names)))
    b = np.zeros(2)
    w[1, col] = -1.0 if flip else 1.0
    b[1] = (p0 + p1) / 2 * (1.0 if flip else -1.0)
    return DefaultInformedPolicy(vocab, [(w, b)])


@pytest.fixture(scope="module")
def modules_and_vocab(mini_default_sites):
    modules, _, vocab = mini_default_sites
    return modules, vocab


@pytest.fixture(scope="module")
def exported(modules_and_vocab, tmp_path_factory):
    _, vocab = modules_and_vocab
    d = tmp_path_factory.mktemp("default-policies")
    out = {}
    for flip in (False, True):
        policy = _linear(vocab, flip)
        policy.export(d / f"model-{flip}")
        out[flip] = (policy, d / f"model-{flip}" / "model.tflite",
                     mlopt.compile_policy(d / f"model-{flip}", d / f"policy-{flip}.so"))
    return out


@pytest.mark.parametrize("flip", [False, True], ids=["copy", "opposite"])
def test_policy_sees_the_heuristics_decision_in_process(modules_and_vocab, exported, flip):
    """Python callable, .tflite and compiled .so: every decision is the
    heuristic's (or its opposite) at the same call site; the copying
    policy's sizes are -Oz's to the byte."""
    modules, _ = modules_and_vocab
    policy, tflite, so = exported[flip]
    asked = 0
    for m in modules:
        stock = mlopt.compile(m)
        for runner in (policy, mlopt.load_policy(tflite), mlopt.load_policy(so)):
            r = mlopt.compile(m, runner)
            assert len(r.decisions) == len(r.default_decisions), m.name
            expected = 1 - r.default_decisions if flip else r.default_decisions
            assert np.array_equal(r.decisions, expected), (m.name, runner)
            if not flip:
                assert r.text_size == stock.text_size and np.array_equal(r.decisions, stock.decisions), m.name
            asked += len(r.decisions)
    assert asked > 0


def test_loaded_without_a_problem_is_the_inlining_default_problem(exported):
    _, tflite, so = exported[False]
    for path in (tflite, so):
        assert mlopt.load_policy(path).problem.name == "inlining-default"


def test_stock_clang_with_the_plugin_feeds_the_decision(llvm_tools, plugin, mini_corpus, exported, tmp_path,
                                                        monkeypatch):
    """clang-19/22 -fpass-plugin with the compiled opposite policy: the same
    .text as the in-process compile of that major (which decides 1 -
    heuristic everywhere), and different code from -Oz."""
    major = llvm_tools["major"]
    monkeypatch.setenv("MLOPT_LLVM", str(major))  # clang_command: that major's clang and plugin
    _, _, so = exported[True]
    loaded = mlopt.load_policy(so)
    differs = 0
    for e, m in zip(corpus_entries(mini_corpus), mlopt.load_corpus(mini_corpus, llvm=major)):
        subprocess.run(clang_command(e, tmp_path / "c.o", str(so)), check=True)
        r = mlopt.compile(m, loaded)
        assert llvm_size_text(llvm_tools, tmp_path / "c.o") == r.text_size, (major, e.name)
        differs += r.text_size != mlopt.compile(m).text_size
    assert differs > 0  # the opposite decisions change code: the comparison can fail


def test_default_prior_adds_exactly_the_heuristics_vote(modules_and_vocab):
    """with_default_prior: logit difference = the original's + margin *
    (inlining_default - 1/2) on real call sites, so the heuristic decides
    where the original's margin is below margin/2."""
    from mlopt.problems.inlining import InlinePolicy
    from mlopt.problems.inlining_default.prior import with_default_prior

    modules, vocab = modules_and_vocab
    original = InlinePolicy.random(vocab, hidden=(16, 8), seed=3)
    logs = [mlopt.compile(m, original).log for m in modules]
    batch = {name: np.concatenate([lg[name] for lg in logs if lg is not None]) for name in PROBLEM.feature_names}
    default = batch["inlining_default"].reshape(-1)
    assert 0 < default.sum() < len(default)  # both answers occur
    linear = InlinePolicy.random(vocab, hidden=(), seed=4)
    for net in (original, linear):
        before = net.logits(batch)
        for margin in (0.5, 4.0):
            prior = with_default_prior(net, margin)
            after = prior.logits(batch)
            np.testing.assert_allclose((after[:, 1] - after[:, 0]) - (before[:, 1] - before[:, 0]),
                                       margin * (default - 0.5), rtol=0, atol=1e-4)
    big = with_default_prior(original, 1e4)
    assert np.array_equal(big.decide(batch), default)
    with pytest.raises(ValueError, match="needs an 'inlining' policy"):
        with_default_prior(big, 1.0)


def test_cli_default_prior(modules_and_vocab, tmp_path, capsys):
    """mlopt policy default-prior: an inlining run -> an inlining-default
    .npz; not an inlining policy -> exit 2 naming it; an existing output is
    kept without --force."""
    from mlopt.cli import main
    from mlopt.problems import load_weights
    from mlopt.problems.inlining import InlinePolicy

    _, vocab = modules_and_vocab
    InlinePolicy.random(vocab, hidden=(8,), seed=1).save(tmp_path / "bc.npz")
    assert main(["policy", "default-prior", str(tmp_path / "bc.npz"), "--margin", "6", "-o",
                 str(tmp_path / "prior.npz")]) == 0
    prior = load_weights(tmp_path / "prior.npz")
    assert prior.problem.name == "inlining-default" and [w.shape[0] for w, _ in prior.layers] == [9, 2]
    before = (tmp_path / "prior.npz").read_bytes()
    assert main(["policy", "default-prior", str(tmp_path / "bc.npz"), "-o", str(tmp_path / "prior.npz")]) == 1
    assert (tmp_path / "prior.npz").read_bytes() == before
    assert "exists" in capsys.readouterr().err
    assert main(["policy", "default-prior", str(tmp_path / "prior.npz"), "-o", str(tmp_path / "p2.npz")]) == 2
    assert "needs an 'inlining' policy, not 'inlining-default'" in capsys.readouterr().err
    assert main(["policy", "default-prior", str(tmp_path / "missing"), "-o", str(tmp_path / "p3.npz")]) == 2


def test_cli_export_of_es_weights(modules_and_vocab, tmp_path, capsys):
    """mlopt policy export --weights takes what ES writes (best/policy.npz:
    an inlining-default policy) and writes the model the API writes, byte
    for byte; an eviction policy's weights are exit 2 naming the file."""
    from mlopt.cli import main
    from mlopt.problems.inlining import InlinePolicy
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.regalloc import EvictionPolicy, generic_vocab

    _, vocab = modules_and_vocab
    prior = with_default_prior(InlinePolicy.random(vocab, hidden=(8,), seed=2), 6.0)
    prior.save(tmp_path / "best.npz")
    assert main(["policy", "export", "--weights", str(tmp_path / "best.npz"), "-o", str(tmp_path / "cli")]) == 0
    prior.export(tmp_path / "api")
    for name in ("model.tflite", "output_spec.json"):
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "api" / name).read_bytes()
    EvictionPolicy.random(generic_vocab(), seed=1).save(tmp_path / "evict.npz")
    capsys.readouterr()
    assert main(["policy", "export", "--weights", str(tmp_path / "evict.npz"), "-o", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert "evict.npz holds a regalloc policy, not an inlining one" in err and not (tmp_path / "e").exists()

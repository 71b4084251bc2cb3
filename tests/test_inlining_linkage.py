"""The inlining-linkage problem: a policy whose 40th input is the callee's
linkage class (callee_linkage), fed by mlopt's advisor to an exported policy
in the in-process engine and in stock opt with the plugin. A hand-built
module calls one function of each linkage class; a policy that inlines
everything except, by the rule of ``with_linkage_rule``, the sites of one
class the heuristic declines must decline exactly those sites -- a runner
that fed another class (or nothing: 0, "external") fails."""

from __future__ import annotations

import numpy as np
import pytest

import mlopt
from mlopt.errors import ProblemError
from mlopt.problems import get
from tests.support.llvm import opt

PROBLEM = get("inlining-linkage")

# A body the -Oz heuristic declines to inline at a site (a loop of calls it cannot fold).
_BODY = """  %p = alloca [16 x i32]
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %n, %loop ]
  %q = getelementptr [16 x i32], ptr %p, i32 0, i32 %i
  store volatile i32 %i, ptr %q
  %v = load volatile i32, ptr %q
  %w = mul i32 %v, %x
  %n = add i32 %i, %w
  %c = icmp slt i32 %n, 16
  br i1 %c, label %loop, label %done
done:
  %r = load volatile i32, ptr %p
  ret i32 %r
"""
# callee -> (its linkage in IR, its class: 0 external, 1 local, 2 linkonce, 3 available_externally)
CALLEES = {"ext": ("", 0), "loc": ("internal ", 1), "lo": ("linkonce_odr ", 2), "ae": ("available_externally ", 3)}
IR = "".join(f"define {linkage}i32 @{name}(i32 %x) {{\nentry:\n{_BODY}}}\n\n"
             for name, (linkage, _) in CALLEES.items()) + \
    "define i32 @caller(i32 %x) {\nentry:\n" + "".join(
        f"  %{name}1 = call i32 @{name}(i32 %x)\n  %{name}2 = call i32 @{name}(i32 %{name}1)\n" for name in CALLEES) + \
    "  %s1 = add i32 %ext2, %loc2\n  %s2 = add i32 %lo2, %ae2\n  %s3 = add i32 %s1, %s2\n  ret i32 %s3\n}\n"


def _always_inline(vocab: mlopt.Vocab):
    """An inlining-default network with two hidden layers that answers "inline" at every site."""
    from mlopt.problems.inlining_default import PROBLEM as DEFAULT_INFORMED
    from mlopt.problems.inlining_default import DefaultInformedPolicy

    inputs = 2 * len(DEFAULT_INFORMED.feature_names)
    return DefaultInformedPolicy(vocab, [(np.zeros((4, inputs)), np.zeros(4)), (np.zeros((4, 4)), np.zeros(4)),
                                         (np.zeros((2, 4)), np.array([0.0, 50.0]))])


@pytest.fixture(scope="module")
def module():
    return mlopt.Module(IR.encode(), opt_level="Oz", reloc_model="static")


@pytest.fixture(scope="module")
def ruled(mini_default_sites, tmp_path_factory):
    """k -> (numpy policy, .tflite, compiled .so) declining the heuristic's declined sites of class k."""
    from mlopt.problems.inlining_linkage.rule import with_linkage_rule

    _, _, vocab = mini_default_sites
    d = tmp_path_factory.mktemp("linkage-policies")
    out = {}
    for k in range(4):
        policy = with_linkage_rule(_always_inline(vocab), k, 100.0)
        policy.export(d / f"model-{k}")
        out[k] = (policy, d / f"model-{k}" / "model.tflite", mlopt.compile_policy(d / f"model-{k}", d / f"p{k}.so"))
    return out


def _expected(sites, defaults, k):
    return np.array([0 if CALLEES[callee][1] == k and not d else 1 for (_, callee), d in zip(sites, defaults)])


def test_policy_sees_the_callees_linkage_in_process(module, ruled):
    """.tflite and compiled .so: at every site the decision is "no" exactly where the callee is of class k
    and the heuristic says no; the heuristic declines some site of every class, so each k is tested."""
    stock = mlopt.compile(module, call_sites=True)
    declined = {CALLEES[callee][1] for (_, callee), d in zip(stock.call_sites, stock.default_decisions) if not d}
    assert declined == {0, 1, 2, 3}  # the module can tell a runner that feeds the wrong class
    for k, (_, tflite, so) in ruled.items():
        loaded = [mlopt.load_policy(tflite), mlopt.load_policy(so)]
        assert {p.problem.name for p in loaded} == {"inlining-linkage"}  # found without naming the problem
        for policy in loaded:
            r = mlopt.compile(module, policy, call_sites=True)
            assert np.array_equal(r.decisions, _expected(r.call_sites, r.default_decisions, k)), (k, policy)
            assert (r.decisions == 0).any() and (r.decisions == 1).any()


def test_log_has_the_linkage_on_request_and_a_numpy_policy_decides_as_its_export(module, ruled):
    """log_callee_linkage: LLVM's columns unchanged, callee_linkage inserted before inlining_default with each
    site's callee's class; the default log is LLVM's layout. A numpy policy of the problem (given the class by
    the engine) decides as its .tflite, logs the column itself, and its decisions on that log are the log's."""
    plain = mlopt.compile(module, call_sites=True)
    linked = mlopt.compile(module, call_sites=True, log_callee_linkage=True)
    assert "callee_linkage" not in plain.log.feature_names
    names = plain.log.feature_names
    assert linked.log.feature_names == [*names[:-2], "callee_linkage", *names[-2:]]
    for name in names:
        assert np.array_equal(linked.log[name], plain.log[name]), name
    assert linked.log["callee_linkage"].reshape(-1).tolist() == [CALLEES[c][1] for _, c in linked.call_sites]
    for k, (policy, tflite, _) in ruled.items():
        mine = mlopt.compile(module, policy, call_sites=True)
        theirs = mlopt.compile(module, mlopt.load_policy(tflite), call_sites=True)
        assert np.array_equal(mine.decisions, _expected(mine.call_sites, mine.default_decisions, k)), k
        assert np.array_equal(mine.decisions, theirs.decisions) and mine.log_bytes == theirs.log_bytes
        assert np.array_equal(policy.decide({s.name: mine.log[s.name] for s in PROBLEM.features}), mine.decisions)
        assert mlopt.compile_many([module], tflite, threads=1)[0].log_bytes == theirs.log_bytes  # a path too


def test_trajectory_replay_keeps_the_two_log_layouts_apart(module, ruled):
    """Trajectory replay: a linkage policy's compile logs the column and is replayed from it; a compile
    asked without the column never gets a log with it (the layouts are kept apart)."""
    from mlopt.compiler import TextSizeCache

    policy = mlopt.load_policy(ruled[0][1])
    cache = TextSizeCache()
    plain = mlopt.compile(module, cache=cache)
    assert not cache.knows(module, callee_linkage=True) and cache.knows(module)
    assert "callee_linkage" not in mlopt.compile(module, cache=cache, log_callee_linkage=False).log.feature_names
    before = cache.replays
    first = mlopt.compile(module, policy, cache=cache)
    again = mlopt.compile(module, policy, cache=cache)
    assert not first.cache_hit and again.cache_hit and again.log_bytes == first.log_bytes
    assert cache.knows(module, callee_linkage=True) and cache.replays == before + 1
    assert "callee_linkage" in first.log.feature_names
    assert mlopt.compile(module, cache=cache).log_bytes == plain.log_bytes


def test_stock_opt_with_the_plugin_feeds_the_linkage(llvm_tools, plugin, module, ruled, tmp_path):
    """opt -load-pass-plugin with the compiled policy for class k: the calls left in @caller are those of
    class k (which the heuristic declines at both sites), and the in-process compile leaves the same."""
    from mlopt.compiler.plugin import opt_flags

    src = tmp_path / "m.ll"
    src.write_text(IR)
    for k, (_, _, so) in ruled.items():
        opt(llvm_tools, src, tmp_path / "o.ll", "-S", *opt_flags(model=so, llvm=llvm_tools["major"]))
        text = (tmp_path / "o.ll").read_text()
        body = text[text.index("define i32 @caller"):]
        body = body[:body.index("\n}")]
        left = {name for name in CALLEES if f"@{name}(" in body}
        assert left == {name for name, (_, c) in CALLEES.items() if c == k}, (k, left)
        r = mlopt.compile(module, mlopt.load_policy(so), call_sites=True)
        declined = {callee for (_, callee), d in zip(r.call_sites, r.decisions) if not d}
        assert declined == left
    # -mlopt-inline-log-callee-linkage: the log the engine writes with log_callee_linkage, byte for byte
    from mlopt.compiler.plugin import opt_flags as flags

    _, _, so = ruled[2]
    log = tmp_path / "linked.log"
    opt(llvm_tools, src, tmp_path / "o.ll", "-S", *flags(model=so, training_log=log, log_callee_linkage=True,
                                                         llvm=llvm_tools["major"]))
    engine = mlopt.compile(module, mlopt.load_policy(so))
    assert "callee_linkage" in engine.log.feature_names and log.read_bytes() == engine.log_bytes


def test_linkage_input_keeps_the_decisions_and_the_rule_only_moves_its_sites(mini_default_sites):
    """with_linkage_input decides as the original; with_linkage_rule moves the logit difference by -vote
    exactly where callee_linkage == k and inlining_default == 0, by 0 elsewhere."""
    from mlopt.problems.inlining import InlinePolicy
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input, with_linkage_rule

    _, batch, vocab = mini_default_sites
    prior = with_default_prior(InlinePolicy.random(vocab.subset(get("inlining").feature_names), hidden=(16, 8),
                                                   seed=3), 20.0)
    n = len(batch["inlining_default"])
    before = prior.logits(batch)
    default = batch["inlining_default"].reshape(-1)
    for k in range(5):
        b = dict(batch, callee_linkage=np.full((n, 1), k, np.int64))
        assert np.array_equal(with_linkage_input(prior).decide(b), prior.decide(batch))
        for rule_k in (0, 3):
            after = with_linkage_rule(prior, rule_k, 7.0).logits(b)
            shift = (after[:, 1] - after[:, 0]) - (before[:, 1] - before[:, 0])
            np.testing.assert_allclose(shift, np.where((default == 0) & (k == rule_k), -7.0, 0.0), atol=1e-4)
    with pytest.raises(ValueError, match="not one of"):
        with_linkage_rule(prior, "static", 1.0)
    with pytest.raises(ValueError, match="needs an 'inlining-default' policy"):
        with_linkage_input(with_linkage_input(prior))


def test_cli_default_prior_with_linkage_is_the_prior_given_the_input(mini_default_sites, tmp_path, capsys):
    """mlopt policy default-prior --with-linkage: the prior's weights with the linkage input at zero
    weights (with_linkage_input), an inlining-linkage policy that decides as the prior."""
    from mlopt.cli import main
    from mlopt.problems import load_weights
    from mlopt.problems.inlining import InlinePolicy
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input

    _, batch, vocab = mini_default_sites
    inlining = InlinePolicy.random(vocab.subset(get("inlining").feature_names), hidden=(8, 4), seed=1)
    inlining.save(tmp_path / "bc.npz")
    assert main(["policy", "default-prior", str(tmp_path / "bc.npz"), "--margin", "20", "--with-linkage",
                 "-o", str(tmp_path / "start.npz")]) == 0
    start = load_weights(tmp_path / "start.npz")
    expected = with_linkage_input(with_default_prior(inlining, 20.0))
    assert start.problem.name == "inlining-linkage"
    for (w, b), (we, be) in zip(start.layers, expected.layers):
        assert np.array_equal(w, we) and np.array_equal(b, be)
    assert "inlining-linkage" in capsys.readouterr().out


def test_policy_check_finds_the_problem_from_the_models_inputs(module, ruled, mini_default_sites, tmp_path,
                                                              capsys):
    """mlopt policy check without --problem: an inlining-default and an inlining-linkage model load as what
    their inputs say; the first is checked on a training log (the heuristic's decision once, though it is
    also an input); the second, on logs without the linkage, is exit 2 naming the column."""
    from mlopt.cli import main

    _, _, vocab = mini_default_sites
    _always_inline(vocab).export(tmp_path / "default-model")
    (tmp_path / "m.log").write_bytes(mlopt.compile(module).log_bytes)
    assert main(["policy", "check", str(tmp_path / "default-model"), "--log", str(tmp_path / "m.log")]) == 0
    out = capsys.readouterr().out
    assert "policy for inlining-default; 39 features bound" in out and len(out.splitlines()) > 3  # a report
    _, tflite, _ = ruled[0]
    assert main(["policy", "check", str(tflite)]) == 0
    assert "policy for inlining-linkage; 40 features bound" in capsys.readouterr().out
    assert main(["policy", "check", str(tflite), "--log", str(tmp_path / "m.log")]) == 2
    assert "no callee_linkage column for this inlining-linkage policy" in capsys.readouterr().err


def test_trace_with_the_linkage_answers_for_linkage_policies(mini_corpus, tmp_path, monkeypatch):
    """trace_corpus(callee_linkage=True): the heuristic's logs with the column (its own cache entries; the
    plain trace unchanged), meta problem inlining-linkage. HeuristicAnswers answers a linkage policy only
    from that trace, with the size a real rollout of the policy gives."""
    from mlopt.corpus import corpus_entries
    from mlopt.problems.inlining import FEATURES
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.rollouts import RolloutTask, trace_corpus
    from mlopt.rollouts.heuristic_answers import HeuristicAnswers
    from mlopt.rollouts.tasks import run_rollout

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    entries = corpus_entries(mini_corpus)
    plain = trace_corpus(mini_corpus, quiet=True)
    logs = [mlopt.compile(m).log for m in mlopt.load_corpus(mini_corpus)]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=50, features=FEATURES)
    policy = with_linkage_input(with_default_prior(mlopt.InlinePolicy.random(vocab, hidden=(8,), seed=3), 20.0))
    items = [(0, e) for e in entries]
    assert HeuristicAnswers().costs([policy], items) == [None] * len(items)  # the plain trace lacks the column
    linked = trace_corpus(mini_corpus, quiet=True, callee_linkage=True)
    assert linked.meta["problem"] == "inlining-linkage" and linked.meta["compiled"] == len(entries)
    assert "callee_linkage" in linked.columns and "callee_linkage" not in plain.columns
    assert np.array_equal(linked.text_size, plain.text_size)
    assert set(np.unique(linked.columns["callee_linkage"])) <= {0, 1, 2, 3, 4}
    assert trace_corpus(mini_corpus, quiet=True).meta["compiled"] == 0  # the plain entries are still there
    with pytest.raises(ProblemError, match="inlining-linkage takes no embeddings"):
        trace_corpus(mini_corpus, quiet=True, callee_linkage=True, ir2vec_vocab=tmp_path / "vocab.json")
    got = HeuristicAnswers().costs([policy], items)
    assert None not in got
    path = policy.export(tmp_path / "p")
    for (_, e), v in zip(items, got):
        assert v == run_rollout(RolloutTask(e, str(path), cache=False)).text_size, e.name


def test_the_cli_traces_and_trains_on_the_linkage(mini_corpus, tmp_path, capsys, monkeypatch):
    """mlopt trace --callee-linkage -> train bc (the problem from the trace: inlining-linkage) -> train es
    with --flip-share (calibrated on the linkage trace) -> the exported .so runs, fed the linkage."""
    import json

    from mlopt.cli import main
    from mlopt.problems import load_weights
    from mlopt.rollouts import TraceDataset

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    assert main(["trace", str(mini_corpus), "-o", str(tmp_path / "t.npz"), "--workers", "1", "--quiet",
                 "--callee-linkage"]) == 0
    capsys.readouterr()
    ds = TraceDataset.load(tmp_path / "t.npz")
    assert ds.meta["problem"] == "inlining-linkage" and "callee_linkage" in ds.columns
    assert main(["train", "bc", str(tmp_path / "t.npz"), "-o", str(tmp_path / "bc"), "--epochs", "2",
                 "--hidden", "8", "--quiet"]) == 0
    capsys.readouterr()
    assert load_weights(tmp_path / "bc" / "policy.npz").problem.name == "inlining-linkage"
    assert main(["train", "es", str(mini_corpus), "--init", str(tmp_path / "bc"), "-o", str(tmp_path / "es"),
                 "--iterations", "1", "--perturbations", "1", "--modules", "2", "--workers", "2", "--quiet",
                 "--flip-share", "0.06", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    policy = mlopt.load_policy(summary["files"]["policy_so"])
    assert policy.problem.name == "inlining-linkage"
    module = mlopt.load_corpus(mini_corpus)[0]
    assert "callee_linkage" in mlopt.compile(module, policy).log.feature_names



def test_the_rule_everywhere_declines_every_site_of_the_class(module, mini_default_sites):
    """with_linkage_rule(everywhere=True): "no" at every site whose callee is of class k, also where the
    heuristic says "yes"; without it such a site keeps the policy's "yes". The module's sites, their logged
    inputs with the heuristic's decision set to "yes" everywhere, decided by the numpy policies and, for
    the module as compiled, by the engine."""
    from mlopt.problems.inlining_linkage.rule import with_linkage_rule

    _, _, vocab = mini_default_sites
    logged = mlopt.compile(module, call_sites=True, log_callee_linkage=True)
    batch = {s.name: logged.log[s.name].copy() for s in PROBLEM.features}
    batch["inlining_default"][:] = 1
    classes = np.array([CALLEES[c][1] for _, c in logged.call_sites])
    for k in range(4):
        everywhere = with_linkage_rule(_always_inline(vocab), k, 100.0, everywhere=True)
        assert np.array_equal(everywhere.decide(batch), (classes != k).astype(int)), k
        assert (with_linkage_rule(_always_inline(vocab), k, 100.0).decide(batch) == 1).all(), k
        r = mlopt.compile(module, everywhere, call_sites=True)
        assert np.array_equal(r.decisions, [int(CALLEES[c][1] != k) for _, c in r.call_sites]), k

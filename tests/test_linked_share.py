"""The linked_share objective (problems/inlining_linked): the engine's
grouped (COMDAT) code sections, the packages' table, each module's charge.

Two hand-built modules of one package each define the same ``linkonce_odr``
function in a COMDAT and call it twice at sites the -Oz heuristic declines.
The engine's grouped code must be exactly the object's SHF_GROUP text
sections (names hashed, sizes), from a full compile, the cache and replay
alike. Under -Oz the two charges sum to the package-linked estimate
(evaluation/linked.py). A policy that inlines both calls in one module drops
its copy: the per-module sum credits the whole body, the linked share half
of it -- exactly, so a charge that counted the copy in full (or not at all)
fails."""

from __future__ import annotations

import contextlib
import shutil
import subprocess

import pytest

import mlopt
from mlopt.compiler import TextSizeCache
from mlopt.compiler.compile import section_name_hash
from mlopt.corpus import CorpusEntry
from mlopt.corpus.elf import text_sections
from mlopt.errors import TraceError
from mlopt.evaluation.linked import linked_text
from mlopt.problems import get
from mlopt.problems.inlining_linked import LINKED_SHARES_ENV, LinkedShares
from mlopt.rollouts import RolloutTask, build_linked_shares, run_rollout
from tests.test_inlining_linkage import _BODY

pytestmark = pytest.mark.llvm

TRIPLE = "x86_64-pc-linux-gnu"


def _ir(caller: str) -> str:
    return (f'target triple = "{TRIPLE}"\n$lo = comdat any\n'
            f"define linkonce_odr i32 @lo(i32 %x) comdat {{\nentry:\n{_BODY}}}\n\n"
            f"define i32 @{caller}(i32 %x) {{\nentry:\n  %a = call i32 @lo(i32 %x)\n"
            f"  %b = call i32 @lo(i32 %a)\n  ret i32 %b\n}}\n")


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """Two corpus entries of package ``pkg`` (bitcode by llvm-as), each with the COMDAT function ``lo``."""
    from mlopt._native import default_llvm

    major = default_llvm()
    tool = shutil.which(f"llvm-as-{major}")
    if tool is None:
        pytest.skip(f"llvm-as-{major} not installed")
    d = tmp_path_factory.mktemp("linked")
    entries = []
    for caller in ("a", "b"):
        bc = d / f"{caller}.bc"
        subprocess.run([tool, "-o", str(bc), "-"], input=_ir(caller).encode(), check=True)
        entries.append(CorpusEntry(f"pkg/{caller}.o", bc, ("-Oz", "-c", f"{caller}.c")))
    return entries


def _sections(entry, policy=None):
    r = mlopt.compile(entry.load(), policy, keep_object=True, grouped_code=True)
    return r, text_sections(r.object, entry.name)


def test_grouped_code_is_the_objects_grouped_text_sections(package):
    for entry in package:
        r, sections = _sections(entry)
        grouped = [(section_name_hash(s.name), s.size) for s in sections if s.comdat]
        assert len(grouped) == 1 and grouped[0][0] == section_name_hash(".text.lo"), sections
        assert r.grouped_code == grouped
        assert r.text_size == sum(s.size for s in sections)
        assert mlopt.compile(entry.load()).grouped_code is None  # only on request


def test_the_cache_and_replay_keep_grouped_code(package):
    entry = package[0]
    full, _ = _sections(entry)
    cache = TextSizeCache(llvm=entry.load().llvm)
    plain = mlopt.compile(entry.load(), cache=cache)  # the same decisions, no grouped code asked
    assert plain.grouped_code is None
    first = mlopt.compile(entry.load(), cache=cache, grouped_code=True)  # not the plain compile's entry
    again = mlopt.compile(entry.load(), cache=cache, grouped_code=True)
    assert first.grouped_code == again.grouped_code == full.grouped_code
    assert again.cache_hit and first.text_size == again.text_size == full.text_size
    inline_all = lambda ints: 1  # noqa: E731
    no_replay = TextSizeCache(llvm=entry.load().llvm, replay=False)  # the engine's decision-level cache
    for _ in range(2):
        r = mlopt.compile(entry.load(), inline_all, cache=no_replay, grouped_code=True)
        assert r.grouped_code == [] and r.text_size == _sections(entry, inline_all)[0].text_size
    assert no_replay.hits >= 1


def test_charges_sum_to_the_linked_estimate_and_credit_a_dropped_copy_its_share(package, monkeypatch, tmp_path):
    shares, costs = build_linked_shares(package, workers=1)
    assert shares.counts == {"pkg": {section_name_hash(".text.lo"): 2}}
    heuristic = {e.name: _sections(e)[1] for e in package}
    assert sum(costs.values()) == linked_text(heuristic)["pkg"]  # one copy of lo, both callers
    path = tmp_path / "shares.npz"
    shares.save(path)
    assert LinkedShares.load(path) == shares
    monkeypatch.setenv(LINKED_SHARES_ENV, str(path))
    inline_all = lambda ints: 1  # noqa: E731
    a = package[0]
    r, sections = _sections(a, inline_all)
    assert not any(s.comdat for s in sections)  # the copy is gone, the caller grew
    lo = next(s.size for s in heuristic[a.name] if s.comdat)
    per_module_delta = r.text_size - sum(s.size for s in heuristic[a.name])
    rollout = run_rollout(RolloutTask(a, None, problem="inlining-linked", cache=False))
    assert rollout.cost == costs[a.name]  # the heuristic, charged through the objective
    assert get("inlining-linked").objective == "linked_share"
    charged = shares.charged(a.name, r.text_size, r.grouped_code)
    assert charged - costs[a.name] == per_module_delta + lo / 2  # half of lo is still linked from b


def test_table_errors_are_typed(package, monkeypatch, tmp_path):
    monkeypatch.delenv(LINKED_SHARES_ENV, raising=False)
    with pytest.raises(TraceError, match="--linked-shares"):
        run_rollout(RolloutTask(package[0], None, problem="inlining-linked", cache=False))
    with pytest.raises(TraceError, match="no package 'other'"):
        LinkedShares({"pkg": {1: 2}}).charged("other/x.o", 10, [])
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a table")
    with pytest.raises(TraceError, match="bad.npz"):
        LinkedShares.load(bad)


def _linked_prior(mini_corpus, tmp_path):
    """An inlining-linked network deciding as -Oz (the default prior given the linkage input), saved and
    loaded for that problem."""
    from mlopt.problems import load_weights
    from mlopt.problems.inlining import FEATURES
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input

    logs = [mlopt.compile(m).log for m in mlopt.load_corpus(mini_corpus)]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=50, features=FEATURES)
    prior = with_linkage_input(with_default_prior(mlopt.InlinePolicy.random(vocab, hidden=(8,), seed=3), 20.0))
    prior.save(tmp_path / "prior.npz")
    return load_weights(tmp_path / "prior.npz", "inlining-linked")


def test_heuristic_answers_give_the_linked_charge(mini_corpus, tmp_path, monkeypatch):
    """A linked-share policy deciding as -Oz is answered in process with the module's -Oz charge -- the
    cost a real rollout of it measures -- and only when the charges are given."""
    from mlopt.corpus import corpus_entries
    from mlopt.rollouts import HeuristicAnswers, trace_corpus

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    entries = corpus_entries(mini_corpus)
    shares, costs = build_linked_shares(entries, workers=1)
    shares.save(tmp_path / "shares.npz")
    monkeypatch.setenv(LINKED_SHARES_ENV, str(tmp_path / "shares.npz"))
    trace_corpus(mini_corpus, quiet=True, callee_linkage=True, workers=1)
    policy = _linked_prior(mini_corpus, tmp_path)
    assert policy.problem.name == "inlining-linked"
    items = [(0, e) for e in entries]
    assert HeuristicAnswers().costs([policy], items) == [None] * len(items)
    got = HeuristicAnswers(heuristic_costs=costs).costs([policy], items)
    assert got == [costs[e.name] for e in entries]
    path = policy.export(tmp_path / "p")
    for e in entries:
        r = run_rollout(RolloutTask(e, str(path), problem="inlining-linked", cache=False))
        assert r.cost == costs[e.name] and r.cost <= r.text_size, e.name


def test_cli_trains_es_on_the_linked_share(mini_corpus, tmp_path, capsys, monkeypatch):
    """mlopt train es --problem inlining-linked: without --linked-shares a usage error; with a new FILE the
    table is built there (the one build_linked_shares makes) and one iteration runs; an existing table is
    read, not rewritten; one that lacks a corpus package is refused, naming it."""
    import json

    from mlopt.cli import main
    from mlopt.corpus import corpus_entries

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(LINKED_SHARES_ENV, raising=False)
    _linked_prior(mini_corpus, tmp_path)
    es = ["train", "es", str(mini_corpus), "--init", str(tmp_path / "prior.npz"), "--problem", "inlining-linked",
          "--iterations", "1", "--perturbations", "1", "--modules", "2", "--workers", "1", "--quiet", "--no-compile"]
    assert main([*es, "-o", str(tmp_path / "es0")]) == 2
    assert "--linked-shares" in capsys.readouterr().err
    table = tmp_path / "shares.npz"
    assert main([*es, "-o", str(tmp_path / "es1"), "--linked-shares", str(table), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["iterations"] == 1
    assert LinkedShares.load(table) == build_linked_shares(corpus_entries(mini_corpus), workers=1)[0]
    stamp = table.stat().st_mtime_ns
    assert main([*es, "-o", str(tmp_path / "es2"), "--linked-shares", str(table)]) == 0
    assert table.stat().st_mtime_ns == stamp
    capsys.readouterr()
    LinkedShares({"other": {1: 1}}).save(tmp_path / "other.npz")
    assert main([*es, "-o", str(tmp_path / "es3"), "--linked-shares", str(tmp_path / "other.npz")]) == 2
    assert "no package" in capsys.readouterr().err


def _single_call_package(tmp_path):
    """pkg/a.o and pkg/b.o each define ``lo`` (linkonce_odr, COMDAT) and call it once, at a site -Oz declines;
    solo/c.o is the same code alone in its package. Inlining the call drops the module's copy and shrinks the
    module, but pkg still links ``lo`` from its other module."""
    from mlopt._native import default_llvm

    tool = shutil.which(f"llvm-as-{default_llvm()}")
    if tool is None:
        pytest.skip(f"llvm-as-{default_llvm()} not installed")
    entries = []
    for name in ("pkg/a.o", "pkg/b.o", "solo/c.o"):
        caller = name[-3]
        ir = (f'target triple = "{TRIPLE}"\n$lo = comdat any\n'
              f"define linkonce_odr i32 @lo(i32 %x) comdat {{\nentry:\n{_BODY}}}\n\n"
              f"define i32 @{caller}(i32 %x) {{\nentry:\n  %a = call i32 @lo(i32 %x)\n  ret i32 %a\n}}\n")
        bc = tmp_path / f"{caller}.bc"
        subprocess.run([tool, "-o", str(bc), "-"], input=ir.encode(), check=True)
        entries.append(CorpusEntry(name, bc, ("-Oz", "-c", f"{caller}.c")))
    return entries


def test_callee_search_on_the_linked_share_keeps_copies_the_package_still_links(tmp_path, monkeypatch):
    """The callee search costs moves by the problem's objective. Inlining ``lo`` makes each module's ``.text``
    smaller, so searched by bytes (inlining-linkage) every module takes that move; by the linked share
    (inlining-linked) only solo/c.o does -- in pkg the copy is still linked from the other module and the
    module is charged more, not less. Each recorded cost is the table's charge of a real compile."""
    from mlopt.problems import load_weights
    from mlopt.problems.inlining import FEATURES
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.rollouts import TraceDataset
    from mlopt.training.callee_search import CalleeSearch
    from mlopt.training.local_search import SearchConfig
    from mlopt.workers import make_pool

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    entries = _single_call_package(tmp_path)
    heuristic = [mlopt.compile(e.load(), log_callee_linkage=True) for e in entries]
    trace = TraceDataset.from_logs([e.name for e in entries], [r.text_size for r in heuristic],
                                   [r.log_bytes for r in heuristic])
    vocab = mlopt.Vocab.from_logs([r.log for r in heuristic], num_buckets=50, features=FEATURES)
    prior = with_linkage_input(with_default_prior(mlopt.InlinePolicy.random(vocab, hidden=(8,), seed=3), 20.0))
    prior.save(tmp_path / "prior.npz")
    shares, costs = build_linked_shares(entries, workers=1)
    shares.save(tmp_path / "shares.npz")
    monkeypatch.setenv(LINKED_SHARES_ENV, str(tmp_path / "shares.npz"))
    config = SearchConfig(evaluations_per_module=4, batch=2)
    inlined = {e.name: mlopt.compile(e.load(), lambda ints: 1, grouped_code=True) for e in entries}
    runs = {}
    with make_pool(1) as pool:
        for problem in ("inlining-linkage", "inlining-linked"):
            policy = load_weights(tmp_path / "prior.npz", problem)
            with pytest.raises(mlopt.MloptError, match="baseline") if problem == "inlining-linked" else \
                    contextlib.nullcontext():
                CalleeSearch(policy, trace, entries, config, work=tmp_path / "w0", pool=pool)
            search = CalleeSearch(policy, trace, entries, config, work=tmp_path / problem, pool=pool,
                                  baseline=costs if problem == "inlining-linked" else None)
            search.run()
            runs[problem] = {r["module"]: r for r in search.report()}
    for e, h in zip(entries, heuristic):
        by_bytes, by_share = runs["inlining-linkage"][e.name], runs["inlining-linked"][e.name]
        smaller = inlined[e.name].text_size
        assert smaller < h.text_size  # inlining lo shrinks every module
        assert by_bytes["flips"] == [{"callee": "lo", "decision": 1, "size": smaller, "parent_size": h.text_size,
                                      "cost": float(smaller), "parent_cost": float(h.text_size)}]
        assert by_bytes["best_text"] == by_bytes["best_cost"] == smaller
        charge = shares.charged(e.name, smaller, inlined[e.name].grouped_code)
        assert by_share["heuristic_cost"] == by_share["start_cost"] == costs[e.name]
        assert by_share["start_text"] == by_share["heuristic_text"] == h.text_size
        if e.name.startswith("pkg/"):
            assert charge > costs[e.name] and by_share["flips"] == [] and by_share["best_text"] == h.text_size
        else:
            assert charge == smaller < costs[e.name] == h.text_size
            assert [(f["callee"], f["cost"], f["parent_cost"]) for f in by_share["flips"]] == \
                [("lo", charge, costs[e.name])]
            assert by_share["best_cost"] == charge


def test_cli_searches_a_draw_of_modules_on_the_linked_share(mini_corpus, tmp_path, capsys, monkeypatch):
    """mlopt train search --problem inlining-linked: without --linked-shares a usage error; with one, a
    size-stratified draw of --modules N modules is searched from a policy deciding as -Oz, whose start is
    charged exactly the heuristic's charges (0% against the baseline), and the search only goes down."""
    import json

    from mlopt.cli import main

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(LINKED_SHARES_ENV, raising=False)
    _linked_prior(mini_corpus, tmp_path)
    search = ["train", "search", str(mini_corpus), "--init", str(tmp_path / "prior.npz"), "--problem",
              "inlining-linked", "--moves", "callee", "--evaluations", "3", "--modules", "3", "--flip-weights", "4",
              "--epochs", "1", "--workers", "1", "--quiet", "--no-compile", "--json"]
    assert main([*search, "-o", str(tmp_path / "s0")]) == 2
    assert "--linked-shares" in capsys.readouterr().err
    assert main([*search, "-o", str(tmp_path / "s1"), "--linked-shares", str(tmp_path / "shares.npz")]) == 0
    report = json.loads(capsys.readouterr().out)
    searched = json.loads((tmp_path / "s1" / "search.json").read_text())
    assert report["modules"] == len(searched) == 3
    assert report["start_delta_percent"] == 0.0 and report["train_delta_percent"] <= 0.0
    assert all(r["start_cost"] == r["heuristic_cost"] <= r["start_text"] for r in searched)
    assert json.loads((tmp_path / "s1" / "config.json").read_text())["modules"] == 3

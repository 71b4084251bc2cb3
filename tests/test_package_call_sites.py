"""The one-site-linkonce rule (problems/inlining_linked/call_sites.py): the
packages' table of -Oz call sites, the rule's decisions, and rollouts that
apply it to a policy's compiles (never to the heuristic's, the baseline).

A hand-built package of two modules: ``a`` calls the ``linkonce_odr``
function ``one`` once (nowhere else in the package) and ``lo`` once, ``b``
calls ``lo`` twice; -Oz declines every site. Only ``one`` at its single
site in ``a`` qualifies: inlined there, its body leaves the linked package.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import mlopt
from mlopt.corpus import CorpusEntry
from mlopt.errors import TraceError
from mlopt.problems.inlining_linked.call_sites import MAX_MARGIN, PACKAGE_CALL_SITES_ENV, PackageCallSites
from tests.test_inlining_linkage import _BODY

TRIPLE = "x86_64-pc-linux-gnu"


def _table(rows):
    return PackageCallSites.from_compiles(rows)


def test_the_rule_takes_only_a_declined_linkonce_callees_single_call_in_its_package():
    rows = {
        "p/a.o": [("one", 2, 0, 40), ("lo", 2, 0, 10), ("ext", 0, 0, 40), ("inl", 2, 1, -20), ("big", 2, 0, 5000),
                  ("two", 2, 0, 10), ("two", 2, 0, 12)],
        "p/b.o": [("lo", 2, 0, 10)],
        "q/c.o": [("lo", 2, 0, 10)],  # another package: its own count
    }
    t = _table(rows)
    assert t.counts["p"] == {"one": (1, 0, "p/a.o", 40), "lo": (2, 0, "", 10), "inl": (1, 1, "p/a.o", -20),
                             "big": (1, 0, "p/a.o", 5000), "two": (2, 0, "p/a.o", 12)}  # no external callee
    assert t.decisions("p/a.o") == {"one": 1}  # not lo (2 sites), inl (-Oz inlines it), big (margin), two
    assert t.decisions("p/b.o") == {}
    assert t.decisions("q/c.o") == {"lo": 1}  # lo's only call in package q
    assert MAX_MARGIN < 5000
    with pytest.raises(TraceError, match="no package 'r'"):
        t.decisions("r/d.o")


def test_the_table_round_trips_and_bad_files_are_typed_errors(tmp_path):
    t = _table({"p/a.o": [("one", 2, 0, 40), ("_ZN1a1bEv", 2, 1, -3)], "q/b.o": [("lo", 2, 0, 7)]})
    path = tmp_path / "sites.npz"
    t.save(path)
    assert PackageCallSites.load(path) == t
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a table")
    with pytest.raises(TraceError, match="bad.npz"):
        PackageCallSites.load(bad)
    with pytest.raises(TraceError, match="missing.npz"):
        PackageCallSites.load(tmp_path / "missing.npz")


def test_a_worker_reads_the_table_once_per_file_version_and_none_when_unset(tmp_path, monkeypatch):
    from mlopt.rollouts import tasks

    monkeypatch.delenv(PACKAGE_CALL_SITES_ENV, raising=False)
    assert tasks._package_call_sites() is None
    path = tmp_path / "sites.npz"
    _table({"p/a.o": [("one", 2, 0, 40)]}).save(path)
    monkeypatch.setenv(PACKAGE_CALL_SITES_ENV, str(path))
    first = tasks._package_call_sites()
    assert first.decisions("p/a.o") == {"one": 1} and tasks._package_call_sites() is first  # read once
    _table({"p/a.o": [("one", 2, 0, 40), ("two", 2, 0, 5)]}).save(path)  # a new version of the file
    assert tasks._package_call_sites().decisions("p/a.o") == {"one": 1, "two": 1}
    monkeypatch.setenv(PACKAGE_CALL_SITES_ENV, str(tmp_path / "gone.npz"))
    with pytest.raises(TraceError, match="gone.npz"):
        tasks._package_call_sites()


def _ir(calls: dict[str, int]) -> str:
    out = [f'target triple = "{TRIPLE}"']
    for f in calls:
        out.append(f"${f} = comdat any\ndefine linkonce_odr i32 @{f}(i32 %x) comdat {{\nentry:\n{_BODY}}}\n")
    body, v = [], "%x"
    for i, f in enumerate(f for f, n in calls.items() for _ in range(n)):
        body.append(f"  %c{i} = call i32 @{f}(i32 {v})")
        v = f"%c{i}"
    out.append(f"define i32 @main_{len(body)}(i32 %x) {{\nentry:\n" + "\n".join(body) + f"\n  ret i32 {v}\n}}\n")
    return "\n".join(out)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    from mlopt._native import default_llvm

    tool = shutil.which(f"llvm-as-{default_llvm()}")
    if tool is None:
        pytest.skip(f"llvm-as-{default_llvm()} not installed")
    d = tmp_path_factory.mktemp("callsites")
    entries = []
    for name, calls in (("a", {"one": 1, "lo": 1}), ("b", {"lo": 2})):
        bc = d / f"{name}.bc"
        subprocess.run([tool, "-o", str(bc), "-"], input=_ir(calls).encode(), check=True)
        entries.append(CorpusEntry(f"pkg/{name}.o", bc, ("-Oz", "-c", f"{name}.c")))
    return entries


def _oz_policy(entries, path):
    """A network that decides as -Oz does (the default prior), as a .tflite file."""
    from mlopt.problems.inlining import FEATURES
    from mlopt.problems.inlining_default.prior import with_default_prior

    vocab = mlopt.Vocab.from_logs([mlopt.compile(e.load()).log for e in entries], num_buckets=8, features=FEATURES)
    policy = with_default_prior(mlopt.InlinePolicy.random(vocab, hidden=(4,), seed=1), 20.0)
    path.write_bytes(policy.to_tflite())
    return str(path)


@pytest.mark.llvm
def test_rollouts_apply_the_rule_to_a_policy_and_never_to_the_heuristic(package, tmp_path, monkeypatch):
    from mlopt.rollouts import RolloutTask, build_package_call_sites, run_rollout

    t = build_package_call_sites(package, workers=1)
    assert {c: v[:3] for c, v in t.counts["pkg"].items()} == {"one": (1, 0, "pkg/a.o"), "lo": (3, 0, "")}
    assert t.decisions("pkg/a.o") == {"one": 1} and t.decisions("pkg/b.o") == {}
    path = tmp_path / "sites.npz"
    t.save(path)
    a = package[0]
    policy = _oz_policy(package, tmp_path / "oz.tflite")
    plain = run_rollout(RolloutTask(a, policy, call_sites=True, cache=False))
    heuristic = run_rollout(RolloutTask(a, None, call_sites=True, cache=False))
    assert plain.text_size == heuristic.text_size and not plain.policy_decisions.any()  # decides as -Oz
    monkeypatch.setenv(PACKAGE_CALL_SITES_ENV, str(path))
    ruled = run_rollout(RolloutTask(a, policy, call_sites=True, cache=False))
    forced = mlopt.compile(a.load(), policy, forced_callees={"one": 1})
    assert ruled.text_size == forced.text_size != plain.text_size
    assert [d for (_, callee), d in zip(ruled.call_sites, ruled.policy_decisions) if callee == "one"] == [1]
    assert not [d for (_, callee), d in zip(ruled.call_sites, ruled.policy_decisions) if callee == "lo" and d]
    assert run_rollout(RolloutTask(a, None, cache=False)).text_size == heuristic.text_size  # the baseline
    assert run_rollout(RolloutTask(package[1], policy, cache=False)).text_size == \
        run_rollout(RolloutTask(package[1], None, cache=False)).text_size  # nothing of b qualifies


@pytest.mark.llvm
def test_trajectory_replay_answers_compiles_with_decisions_forced_by_callee_exactly(mini_corpus, tmp_path):
    """A compile with forced callees (the rule's) is replayed from an earlier trajectory when the policy, with
    those callees' sites overridden, reproduces it -- and gives what an uncached compile gives, for the
    heuristic, a policy deciding as -Oz and a random one, whatever was kept before."""
    from mlopt.compiler import TextSizeCache
    from mlopt.corpus import corpus_entries

    entries = corpus_entries(mini_corpus)
    oz = mlopt.load_policy(_oz_policy(entries, tmp_path / "oz.tflite"))
    vocab = mlopt.Vocab.from_logs([mlopt.compile(e.load()).log for e in entries], num_buckets=8)
    rnd_path = tmp_path / "random.tflite"
    rnd_path.write_bytes(mlopt.InlinePolicy.random(vocab, hidden=(4,), seed=3).to_tflite())
    rnd = mlopt.load_policy(str(rnd_path))
    cache = TextSizeCache(llvm=entries[0].load().llvm)
    checked, modules = 0, 0
    for e in entries:
        module = e.load()
        sites = mlopt.compile(module, call_sites=True)
        callees = sorted({c for _, c in sites.call_sites})
        if not callees or modules == 3:
            continue
        modules += 1
        declined = sorted({c for (_, c), d in zip(sites.call_sites, sites.decisions) if not d})
        inlined = sorted({c for (_, c), d in zip(sites.call_sites, sites.decisions) if d})
        sets = [{}, dict.fromkeys(declined[:2], 1), dict.fromkeys(inlined[:2], 0), {callees[0]: 1}, {callees[0]: 0}]
        for policy in (None, oz, rnd):
            wanted = [mlopt.compile(module, policy, forced_callees=forced) for forced in sets]
            for forced, want in zip(sets * 2, wanted * 2):  # the second round can be answered by replay
                got = mlopt.compile(module, policy, forced_callees=forced, cache=cache)
                assert (got.text_size, got.log_bytes) == (want.text_size, want.log_bytes), (e.name, forced)
                assert np.array_equal(got.decisions, want.decisions)
                checked += 1
    assert checked == 90 and cache.replay.replays >= checked // 2  # every second round at least


@pytest.mark.llvm
def test_heuristic_answers_leave_the_modules_the_rule_forces_to_rollouts(mini_corpus, tmp_path, monkeypatch):
    """A policy deciding as -Oz is answered in process with the heuristic's cost -- except in a module where the
    rule forces a callee: its compile there is not the heuristic's, so only a rollout can say."""
    from mlopt.corpus import corpus_entries
    from mlopt.corpus.split import package_of
    from mlopt.problems.inlining_linked import LINKED_SHARES_ENV
    from mlopt.rollouts import HeuristicAnswers, build_linked_shares, trace_corpus
    from tests.test_linked_share import _linked_prior

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(PACKAGE_CALL_SITES_ENV, raising=False)
    entries = corpus_entries(mini_corpus)
    shares, costs = build_linked_shares(entries, workers=1)
    shares.save(tmp_path / "shares.npz")
    monkeypatch.setenv(LINKED_SHARES_ENV, str(tmp_path / "shares.npz"))
    trace_corpus(mini_corpus, quiet=True, callee_linkage=True, workers=1)
    policy = _linked_prior(mini_corpus, tmp_path)
    items = [(0, e) for e in entries]
    assert HeuristicAnswers(heuristic_costs=costs).costs([policy], items) == [costs[e.name] for e in entries]
    forced = next(e for e in entries if mlopt.compile(e.load(), call_sites=True).call_sites)
    callee = mlopt.compile(forced.load(), call_sites=True).call_sites[0][1]
    table = PackageCallSites({package_of(e.name): {} for e in entries})
    table.counts[package_of(forced.name)][callee] = (1, 0, forced.name, 0)
    table.save(tmp_path / "sites.npz")
    monkeypatch.setenv(PACKAGE_CALL_SITES_ENV, str(tmp_path / "sites.npz"))
    got = HeuristicAnswers(heuristic_costs=costs).costs([policy], items)
    assert got == [None if e is forced else costs[e.name] for e in entries]


def _text(obj: bytes) -> int:
    from mlopt.corpus.elf import text_sections

    return sum(s.size for s in text_sections(obj, "a.o"))


@pytest.mark.llvm
def test_stock_clang_with_the_plugin_follows_the_packages_callee_decision_file(package, plugin, llvm_tools,
                                                                               tmp_path):
    """The rule shipped: `mlopt corpus call-sites --callee-decisions`'s file of the package, given to stock clang
    with the plugin (no model: the heuristic decides the rest), compiles ``a`` to exactly the engine's -Oz with
    the rule's forced callee; a malformed file is a one-line error naming the line, not a crash."""
    from mlopt.compiler.plugin import clang_flags
    from mlopt.rollouts import build_package_call_sites

    rules = tmp_path / "pkg.txt"
    assert build_package_call_sites(package, workers=1).write_callee_decisions("pkg", rules) == 1
    assert [line for line in rules.read_text().splitlines() if not line.startswith("#")] == ["1 one"]
    a = package[0]

    def clang(*flags, check=True):
        out = tmp_path / "a.o"
        r = subprocess.run([llvm_tools["clang"], "-Oz", *flags, "-c", str(a.bitcode_path), "-o", str(out)],
                           capture_output=True, text=True, check=check)
        return r if not check else _text(out.read_bytes())

    stock = clang()
    assert stock == mlopt.compile(a.load()).text_size
    ruled = clang(*clang_flags(llvm=llvm_tools["major"], callee_decisions=rules))
    assert ruled == mlopt.compile(a.load(), None, forced_callees={"one": 1}).text_size != stock
    bad = tmp_path / "bad.txt"
    bad.write_text("# ok\n1 one\ninline lo\n")
    r = clang(*clang_flags(llvm=llvm_tools["major"], callee_decisions=bad), check=False)
    assert r.returncode != 0 and f"{bad}: line 3 (byte 11) is not" in r.stderr, r.stderr
    assert "Stack dump" not in r.stderr


@pytest.mark.llvm
def test_cli_writes_the_table_and_checks_callee_decision_files(package, tmp_path, capsys, monkeypatch):
    from mlopt.cli import main

    monkeypatch.setenv(PACKAGE_CALL_SITES_ENV, "")  # the CLI sets it for its workers; undone after the test
    from mlopt.corpus import CorpusEntry  # noqa: F401  (the corpus below is the package's bitcode)

    corpus = tmp_path / "corpus"
    for e in package:
        (corpus / "pkg").mkdir(parents=True, exist_ok=True)
        shutil.copy(e.bitcode_path, corpus / "pkg" / (e.name.split("/")[-1][:-2] + ".bc"))
    assert main(["corpus", "make", str(corpus), str(tmp_path / "c"), "--command=-Oz", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["corpus", "call-sites", str(tmp_path / "c"), "-o", str(tmp_path / "s.npz"), "--callee-decisions",
                 str(tmp_path / "rules"), "--workers", "1", "--quiet", "--json"]) == 0
    import json

    summary = json.loads(capsys.readouterr().out)
    assert summary["packages"] == 1 and sum(summary["one_site_callees"].values()) == 1
    (rule_file,) = summary["callee_decisions"].values()
    assert [line for line in open(rule_file).read().splitlines() if not line.startswith("#")] == ["1 one"]
    assert main(["corpus", "call-sites", str(tmp_path / "c"), "-o", str(tmp_path / "s.npz")]) == 1  # no overwrite
    assert "s.npz" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_text("1 one\n2 lo\n")
    assert main(["clang-flags", "--callee-decisions", str(tmp_path / "bad.txt")]) == 2
    assert "line 2 is not" in capsys.readouterr().err
    assert main(["clang-flags", "--callee-decisions", rule_file]) == 0
    assert "-mlopt-inline-callee-decisions=" in capsys.readouterr().out
    policy = _oz_policy(package, tmp_path / "oz.tflite")  # decides as -Oz: the rule is the only change
    assert main(["eval", policy, str(tmp_path / "c"), "-o", str(tmp_path / "ev"), "--package-call-sites",
                 str(tmp_path / "s.npz"), "--no-plots", "--workers", "1", "--quiet", "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["package_call_sites"] == str(tmp_path / "s.npz")
    assert ev["total"]["policy_text"] < ev["total"]["heuristic_text"]  # a.o's one-call callee inlined, b.o as -Oz


@pytest.mark.llvm
def test_cli_trains_es_with_the_rule_building_the_table_once(mini_corpus, tmp_path, capsys, monkeypatch):
    """mlopt train es --package-call-sites: a new FILE is built over the corpora (the table
    build_package_call_sites makes) and one iteration runs; an existing one is read, not rewritten; one that
    lacks a corpus package is refused, naming it."""
    from mlopt.cli import main
    from mlopt.corpus import corpus_entries
    from mlopt.problems.inlining_linked import LINKED_SHARES_ENV
    from mlopt.rollouts import build_package_call_sites
    from tests.test_linked_share import _linked_prior

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(LINKED_SHARES_ENV, "")  # the CLI sets both for its workers; undone after the test
    monkeypatch.setenv(PACKAGE_CALL_SITES_ENV, "")
    _linked_prior(mini_corpus, tmp_path)
    es = ["train", "es", str(mini_corpus), "--init", str(tmp_path / "prior.npz"), "--problem", "inlining-linked",
          "--iterations", "1", "--perturbations", "1", "--modules", "2", "--workers", "1", "--quiet", "--no-compile",
          "--linked-shares", str(tmp_path / "shares.npz")]
    table = tmp_path / "sites.npz"
    assert main([*es, "-o", str(tmp_path / "es1"), "--package-call-sites", str(table)]) == 0
    assert PackageCallSites.load(table) == build_package_call_sites(corpus_entries(mini_corpus), workers=1)
    stamp = table.stat().st_mtime_ns
    assert main([*es, "-o", str(tmp_path / "es2"), "--package-call-sites", str(table)]) == 0
    assert table.stat().st_mtime_ns == stamp
    capsys.readouterr()
    PackageCallSites({"other": {}}).save(tmp_path / "other.npz")
    assert main([*es, "-o", str(tmp_path / "es3"), "--package-call-sites", str(tmp_path / "other.npz")]) == 2
    assert "no package" in capsys.readouterr().err


def test_ppo_refuses_the_rule(tmp_path, capsys, monkeypatch):
    """PPO learns from logged decisions: the rule's forced ones would pass for the policy's, so it is refused."""
    from mlopt.cli import main

    monkeypatch.setenv(PACKAGE_CALL_SITES_ENV, "")  # the CLI sets it before the command runs; undone after the test

    assert main(["train", "ppo", str(tmp_path), "--init", str(tmp_path / "p.npz"), "-o", str(tmp_path / "o"),
                 "--package-call-sites", str(tmp_path / "s.npz")]) == 2
    assert "PPO learns from the logged decisions" in capsys.readouterr().err

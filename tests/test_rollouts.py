"""Traces, evaluation and workers against the real tools: opt-19, llc-19,
llvm-size-19, clang-19 with the plugin; the local pool against Ray."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import mlopt
from mlopt.compiler.plugin import opt_flags
from mlopt.corpus import corpus_entries, split_command_file
from mlopt.problems import inlining
from mlopt.rollouts import RolloutTask, TraceDataset, run_rollouts, trace_corpus
from mlopt.workers import LocalPool, make_pool
from tests.support import tasks
from tests.support.llvm import llvm_size_text


def _clang_pipeline(llvm_tools, entry) -> str:
    """The optimization pipeline clang-19 runs for this module's command line."""
    args = [a for a in split_command_file(entry.bitcode_path.with_suffix(".cmd").read_text("utf-8", "surrogateescape"))
            if a != "-fembed-bitcode=all"]
    r = subprocess.run([llvm_tools["clang"], *args, "-x", "ir", str(entry.bitcode_path), "-mllvm",
                        "-print-pipeline-passes", "-o", "/dev/null"], check=True, capture_output=True, text=True)
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def policy_so(mini_corpus, tmp_path_factory):
    """A random policy over the mini corpus' own vocab, compiled to a .so."""
    logs = [mlopt.compile(m).log for m in mlopt.load_corpus(mini_corpus)]
    policy = mlopt.InlinePolicy.random(mlopt.Vocab.from_logs(logs, num_buckets=50,
                                                             features=inlining.FEATURES), hidden=(16,), seed=7)
    d = tmp_path_factory.mktemp("pol")
    policy.export(d / "model")
    return mlopt.compile_policy(d / "model", d / "policy.so")


def test_trace_equals_opt_llc_llvm_size_and_the_plugin_log(llvm_tools, plugin, mini_corpus, tmp_path):
    """On every module: the trace's .text is what opt-19 (clang's pipeline
    for the module's command line, as clang-19 prints it) + llc-19 +
    llvm-size-19 give, and its rows are the plugin's
    -mlopt-inline-training-log from opt-19 -passes='default<Oz>' (the
    textual pipeline clang prints has no module inliner wrapper, so a
    plugin's advisor is not asked there)."""
    ds = trace_corpus(mini_corpus, workers=2, use_cache=False, quiet=True)
    ds.save(tmp_path / "t.npz")
    ds = TraceDataset.load(tmp_path / "t.npz")
    entries = corpus_entries(mini_corpus)
    assert ds.modules == [e.name for e in entries] and not ds.meta["failed"]
    for i, e in enumerate(entries):
        log = tmp_path / f"{i}.log"
        subprocess.run([llvm_tools["opt"], "-relocation-model=pic", f"-passes={_clang_pipeline(llvm_tools, e)}",
                        str(e.bitcode_path), "-o", str(tmp_path / "o.bc")], check=True)
        subprocess.run([llvm_tools["opt"], "-relocation-model=pic", *opt_flags(training_log=log),
                        "-passes=default<Oz>", str(e.bitcode_path), "-o", "/dev/null"], check=True)
        subprocess.run([llvm_tools["llc"], "-filetype=obj", "-relocation-model=pic", "-O2", str(tmp_path / "o.bc"),
                        "-o", str(tmp_path / "o.o")], check=True)
        assert ds.text_size[i] == llvm_size_text(llvm_tools, tmp_path / "o.o"), e.name
        plugin_log = mlopt.read_log(log)
        rows = ds.rows_of(i)
        assert rows.stop - rows.start == len(plugin_log) > 0
        for name in plugin_log.feature_names:
            assert np.array_equal(ds.columns[name][rows], plugin_log[name]), (e.name, name)


def test_trace_cache_and_cli(mini_corpus, tmp_path, capsys, monkeypatch):
    from mlopt.cli import main

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    assert main(["trace", str(mini_corpus), "-o", str(tmp_path / "a.npz"), "--quiet", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["cached"] == 0 and first["modules"] == len(corpus_entries(mini_corpus))
    assert main(["trace", str(mini_corpus), "-o", str(tmp_path / "b.npz"), "--quiet", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["cached"] == second["modules"] and second["rows"] == first["rows"]
    a, b = TraceDataset.load(tmp_path / "a.npz"), TraceDataset.load(tmp_path / "b.npz")
    assert np.array_equal(a.text_size, b.text_size)
    assert all(np.array_equal(a.columns[k], b.columns[k]) for k in a.columns)
    assert main(["trace", str(mini_corpus), "-o", str(tmp_path / "a.npz")]) == 1
    assert "a.npz exists (use --force" in capsys.readouterr().err


def test_eval_verified_with_stock_clang(llvm_tools, plugin, mini_corpus, policy_so, tmp_path, capsys):
    """mlopt eval: in-process sizes equal stock clang-19 + the plugin from
    each module's .cmd, and llvm-size-19 on clang's objects agrees."""
    from mlopt.cli import main
    from mlopt.evaluation import clang_command

    out = tmp_path / "eval"
    module = corpus_entries(mini_corpus)[0].name
    assert main(["eval", str(policy_so), str(mini_corpus), "-o", str(out), "--verify-with-clang", "--quiet",
                 "--call-sites", module, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["verify_with_clang"] == {"modules": len(corpus_entries(mini_corpus)), "mismatches": []}
    assert summary["llvm"] == llvm_tools["major"]  # the report names the LLVM that produced it
    rows = {r["module"]: r for r in _csv(out / "modules.csv")}
    for e in corpus_entries(mini_corpus):
        subprocess.run(clang_command(e, tmp_path / "c.o", str(policy_so)), check=True)
        assert int(rows[e.name]["policy_text"]) == llvm_size_text(llvm_tools, tmp_path / "c.o"), e.name
    total = summary["total"]
    assert total["policy_text"] == sum(int(r["policy_text"]) for r in rows.values())
    assert total["wins"] + total["losses"] + total["ties"] == len(rows)
    sites = _csv(out / "call_sites.csv")
    r = mlopt.compile(mlopt.load_corpus(mini_corpus)[0], mlopt.load_policy(policy_so), call_sites=True)
    assert [(s["caller"], s["callee"]) for s in sites] == r.call_sites
    assert [int(s["policy"]) for s in sites] == r.decisions.tolist()
    assert [int(s["heuristic"]) for s in sites] == r.default_decisions.tolist()
    assert summary["files"]["call_sites"]["differs"] == int((r.decisions != r.default_decisions).sum()) > 0
    assert {p.rsplit("/", 1)[1] for p in summary["files"]["plots"]} == {"delta_distribution.png",
                                                                         "cumulative_delta.png"}


def _csv(path):
    import csv

    with open(path, encoding="utf-8", errors="surrogateescape") as f:  # module names are file names
        return list(csv.DictReader(f))


def test_local_pool_and_ray_give_identical_rollouts(mini_corpus, policy_so):
    """The same rollouts on 1 and 2 local workers and on a local Ray
    instance (ray.init(num_cpus=2)): identical sizes, decisions and logs."""
    work = [RolloutTask(e, str(policy_so), log=True) for e in corpus_entries(mini_corpus)]
    runs = []
    for kwargs in ({"workers": 1}, {"workers": 2}, {"workers": 2, "ray": "local"}):
        with make_pool(**kwargs) as pool:
            results = run_rollouts(work, pool=pool, quiet=True)
        assert all(r.ok for r in results), [r.describe() for r in results]
        runs.append([(r.value.module, r.value.text_size, r.value.inlined, r.value.log_bytes) for r in results])
    assert runs[0] == runs[1] == runs[2]


def test_a_killed_worker_is_restarted_and_its_task_retried(tmp_path):
    with LocalPool(2, retries=1) as pool:
        results = pool.map(tasks.die_once, [(i, str(tmp_path)) for i in range(5)])
        assert [r.value for r in results] == [0, 1, 4, 9, 16]
        assert all(r.attempts == 2 for r in results) and pool.restarts == 5
        crashed = pool.map(tasks.always_die, [7])
    assert crashed[0].failure == "crash" and crashed[0].attempts == 2
    assert "worker exited" in crashed[0].describe()


def test_affinity_sends_a_key_back_to_the_worker_that_ran_it():
    """Items of one key meet one worker, within a call and in the next (so
    a module's rollouts meet the caches that know it)."""
    with LocalPool(2) as pool:
        first = pool.map(tasks.worker_pid, ["a", "a", "b", "b"], affinity=["a", "a", "b", "b"])
        again = pool.map(tasks.worker_pid, ["b", "a", "b", "a"], affinity=["b", "a", "b", "a"])
    pid = {"a": first[0].value, "b": first[2].value}
    assert pid["a"] != pid["b"]
    assert [r.value for r in first] == [pid[k] for k in "aabb"]
    assert [r.value for r in again] == [pid[k] for k in "baba"]


def test_a_task_past_the_timeout_is_reported_and_the_run_finishes():
    with LocalPool(2, timeout=3) as pool:
        results = pool.map(tasks.hang, [0, 1, 2, 3])
        assert [r.value for r in results if r.ok] == [0, 2, 3]
        assert results[1].failure == "timeout" and "still running after 3 s" in results[1].describe()
        # the pool is still usable, and a task's own error is reported, not retried
        errors = pool.map(tasks.fail, [1, 2])
    assert errors[0].value == 1 and errors[1].failure == "error"
    assert "ValueError: two is not allowed" in errors[1].message and errors[1].attempts == 1


def test_ray_pool_reports_timeouts_and_crashes():
    with make_pool(2, ray="local", timeout=5) as pool:
        results = pool.map(tasks.hang, [0, 1, 2])
        assert [r.failure for r in results] == [None, "timeout", None]
        crashed = pool.map(tasks.always_die, [3])
    assert crashed[0].failure == "crash"


def test_training_curve_plot_from_a_run_directory(tmp_path):
    from mlopt.evaluation import plot_training_curve

    assert plot_training_curve(tmp_path, tmp_path) is None  # no metrics.jsonl: no plot
    (tmp_path / "metrics.jsonl").write_text("\n".join(
        json.dumps({"iteration": i, "reward": 0.01 * i, "validation_delta_percent": -0.1 * i}) for i in range(5)))
    path = plot_training_curve(tmp_path, tmp_path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # validation every other iteration, and a test curve: the points drawn are exactly those given
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(
        {"iteration": i, "train_delta_percent": -0.1 * i, "validation_delta_percent": -0.2 * i if i % 2 == 0 else None})
        for i in range(5)))
    import matplotlib.pyplot as plt

    drawn = {}
    real_close = plt.close
    plt.close = lambda fig=None: drawn.update({ln.get_label(): list(ln.get_xdata()) for ln in fig.axes[0].lines}) \
        or real_close(fig)
    try:
        plot_training_curve(tmp_path, tmp_path, test={0: 0.0, 4: -0.3})
    finally:
        plt.close = real_close
    assert drawn["validation (total)"] == [0, 2, 4]
    assert drawn["test (total; after training, not used to choose)"] == [0, 4]
    assert drawn["training (total of its modules)"] == [0, 1, 2, 3, 4]


def test_training_curves_share_one_sign_convention():
    """ES logs a reward (positive = smaller), search and validation a delta
    (negative = smaller): the plot shows all as delta % vs -Oz, negative =
    smaller, so a policy that shrinks code goes down on every curve."""
    from mlopt.evaluation.plots import training_curve_series

    es = training_curve_series([{"iteration": 1, "reward": 0.02, "validation_delta_percent": -1.5},
                                {"iteration": 2, "reward": -0.01, "validation_delta_percent": None}])
    assert es["training (mean per sampled module)"] == [-2.0, 1.0]
    assert es["validation (total)"][0] == -1.5 and np.isnan(es["validation (total)"][1])
    search = training_curve_series([{"round": 1, "train_delta_percent": -0.7}])
    assert search == {"training (total of its modules)": [-0.7]}
    both = training_curve_series([{"iteration": 1, "reward": 0.007, "train_delta_percent": -0.7}])
    assert both == {"training (total of its modules)": [-0.7]}  # ES logs both: its total is the objective


def test_rollouts_start_from_the_trace_cache(mini_corpus, tmp_path, monkeypatch):
    """A rollout worker's replay starts from mlopt trace's cached compile of the module: the heuristic's
    rollout is then answered without a compile, with the traced size; off, or with nothing traced, it
    compiles, to the same size. The trace cache's key holds the engine's build."""
    from mlopt.rollouts import run_rollout
    from mlopt.rollouts import tasks as worker
    from mlopt.rollouts.trace_cache import engine_digest, module_key

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    entries = corpus_entries(mini_corpus)
    major = mlopt._native.resolve_llvm(None)
    monkeypatch.setattr(worker, "_CACHES", {})
    untraced = [run_rollout(RolloutTask(e, None)) for e in entries]
    assert not any(r.cache_hit for r in untraced)
    ds = trace_corpus(mini_corpus, quiet=True)
    assert ds.meta["compiled"] == len(entries)
    for start, hit in ((False, False), (True, True)):
        monkeypatch.setattr(worker, "_CACHES", {})
        monkeypatch.setattr(worker, "_UNTRACED", set())
        got = [run_rollout(RolloutTask(e, None, start_from_trace=start)) for e in entries]
        assert [r.cache_hit for r in got] == [hit] * len(entries)
        assert [r.text_size for r in got] == [r.text_size for r in untraced] == ds.text_size.tolist()
    key = module_key(entries[0], major)
    assert len(engine_digest(major)) == 64
    monkeypatch.setattr("mlopt.rollouts.trace_cache.engine_digest", lambda llvm: "another build")
    assert module_key(entries[0], major) != key  # a rebuilt engine does not take an older one's compiles


def test_heuristic_answers_are_what_the_rollouts_answer(mini_corpus, tmp_path, monkeypatch):
    """HeuristicAnswers (the costs CompilerEnvironment knows without a rollout): a candidate that decides
    as the heuristic on every row of a module's traced compile gets that compile's size, the size a
    real compile of it gives; one deciding otherwise somewhere, a policy that is not a plain MLP and a
    module the trace cache does not hold get None. ES's environment with and without it returns the
    same costs."""
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.rollouts.heuristic_answers import HeuristicAnswers
    from mlopt.rollouts.tasks import run_rollout
    from mlopt.training.environment import CompilerEnvironment

    monkeypatch.setenv("MLOPT_CACHE", str(tmp_path / "cache"))
    entries = corpus_entries(mini_corpus)
    logs = [mlopt.compile(m).log for m in mlopt.load_corpus(mini_corpus)]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=50, features=inlining.FEATURES)
    net = mlopt.InlinePolicy.random(vocab, hidden=(16,), seed=3)
    # the heuristic's vote (margin 20) over the network scaled: from deciding as the heuristic everywhere
    # (x0.001) to deciding as the network on many call sites (x30)
    policies = [with_default_prior(mlopt.InlinePolicy(vocab, [(w * s, b * s) for w, b in net.layers]), 20.0)
                for s in (0.001, 3.0, 10.0, 30.0)]
    items = [(c, e) for c in range(len(policies)) for e in entries]
    assert HeuristicAnswers().costs(policies, items) == [None] * len(items)  # nothing traced yet
    trace_corpus(mini_corpus, quiet=True)
    answers = HeuristicAnswers()
    got = answers.costs(policies, items)
    for c, policy in enumerate(policies):
        path = policy.export(tmp_path / f"p{c}")
        for (i, e), v in zip(items, got):
            if i == c and v is not None:
                assert v == run_rollout(RolloutTask(e, str(path), cache=False)).text_size, (c, e.name)
    per_policy = [sum(v is not None for (i, _), v in zip(items, got) if i == c) for c in range(len(policies))]
    assert per_policy[0] == len(entries) and per_policy[-1] < len(entries) and answers.answered == sum(per_policy)
    loaded = mlopt.load_policy(policies[0].export(tmp_path / "loaded"))
    assert answers.costs([loaded], [(0, e) for e in entries]) == [None] * len(entries)  # not numpy weights
    with make_pool(2) as pool:
        env_costs = [CompilerEnvironment(policies[0].problem, pool, start_from_trace=start).costs(
            policies, items, tmp_path / f"work{start}") for start in (False, True)]
    assert env_costs[0] == env_costs[1] and None not in env_costs[0]

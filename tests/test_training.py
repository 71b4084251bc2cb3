"""Training: behavioral cloning of the heuristic from a real trace."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlopt
from mlopt.corpus import make_corpus
from mlopt.problems import inlining
from mlopt.rollouts import TraceDataset, trace_corpus
from mlopt.training import train_bc


@pytest.fixture(scope="module")
def sdist_trace(llvm_tools, corpus_modules, tmp_path_factory):
    """The heuristic's trace of the 35 lz4 + brotli modules."""
    work = tmp_path_factory.mktemp("bc")
    make_corpus(corpus_modules[0].parent, work / "corpus")
    return trace_corpus(work / "corpus", workers=2, use_cache=False, quiet=True, llvm=llvm_tools["major"])


def test_bc_agrees_with_the_heuristic_on_held_out_modules(sdist_trace):
    r = train_bc(sdist_trace, inlining.PROBLEM, epochs=20, heldout_fraction=0.3)
    assert r.heldout_rows >= 0.3 * len(sdist_trace) and r.train_rows > 1000, r.report()
    # modules it never saw (their rows are not in the vocab either): well above always answering the majority
    label = sdist_trace.columns[inlining.DEFAULT_DECISION].reshape(-1)
    assert r.heldout_agreement >= max(0.9, np.mean(label == 0) + 0.1, np.mean(label == 1) + 0.1), r.report()
    # the numpy forward pass of the returned policy gives that agreement
    held = np.zeros(len(sdist_trace), bool)
    from mlopt.training import heldout_modules

    chosen = heldout_modules(sdist_trace.modules, 0.3, np.diff(sdist_trace.module_rows))
    assert [sdist_trace.modules[i] for i in chosen] == r.heldout_modules
    assert r.report()["heldout_module_count"] == len(chosen) > 1
    for i in chosen:
        held[sdist_trace.rows_of(i)] = True
    assert held.sum() == r.heldout_rows
    rows = {k: v[held] for k, v in sdist_trace.columns.items()}
    decided = r.policy.decide(rows)
    assert np.mean(decided == rows[inlining.DEFAULT_DECISION].reshape(-1)) == pytest.approx(r.heldout_agreement)
    again = train_bc(sdist_trace, inlining.PROBLEM, epochs=20, heldout_fraction=0.3)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(r.policy.layers, again.policy.layers))  # deterministic


def _synthetic_trace(modules: dict[str, int], seed: int = 0) -> TraceDataset:
    """A trace of the inliner's features (random) whose label is a function
    of one feature; ``modules``: rows per module."""
    rng = np.random.default_rng(seed)
    n = sum(modules.values())
    columns = {s.name: rng.integers(0, 50, (n, *s.shape)).astype(np.int64) for s in inlining.PROBLEM.features}
    columns[inlining.DEFAULT_DECISION] = (columns["callee_basic_block_count"] < 10).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(list(modules.values()))]).astype(np.int64)
    return TraceDataset(list(modules), np.full(len(modules), 100, np.int64), offsets, columns)


def test_bc_holds_out_whole_packages_with_a_real_share_of_rows():
    """A training split's modules are those corpus split did not hold out
    (split value >= its held-out fraction at seed 0): BC still holds out a
    real share of the rows, whole packages, never a module of a package it
    trains on -- the old per-module rule held out a single module here."""
    from mlopt.corpus.split import package_of, split_value
    from mlopt.training import heldout_modules

    names = [f"{p}/src/m{j}.c" for p in ("lz4", "brotli", "zstd", "jsonnet", "ujson", "pycryptodome")
             for j in range(8)]
    names = [m for m in names if split_value(m) >= 0.25]  # what `corpus split` left for training
    rows = {m: 20 + (7 * k) % 50 for k, m in enumerate(names)}
    held = heldout_modules(names, 0.2, list(rows.values()))
    held_names = {names[i] for i in held}
    held_packages = {package_of(m) for m in held_names}
    assert 0 < len(held_packages) < 6
    assert held_names == {m for m in names if package_of(m) in held_packages}  # whole packages
    share = sum(rows[m] for m in held_names) / sum(rows.values())
    assert 0.1 <= share <= 0.3 and len(held_names) > 1  # about the asked share, at most 1.5 times it
    # a package that alone holds most of the rows is never what gets held out while smaller ones can be
    skewed = dict(rows, **{m: 5000 for m in names if package_of(m) == "jsonnet"})
    held_skewed = {package_of(names[i]) for i in heldout_modules(names, 0.2, list(skewed.values()))}
    assert held_skewed and "jsonnet" not in held_skewed
    assert heldout_modules(names, 0.0, list(rows.values())) == []
    only = [m for m in names if package_of(m) == "lz4"]  # one package: whole modules, never all of them
    alone = heldout_modules(only, 0.5, [rows[m] for m in only])
    assert 0 < len(alone) < len(only) and sum(rows[only[i]] for i in alone) >= 0.5 * sum(rows[m] for m in only)
    assert heldout_modules(only[:1], 0.5, [rows[only[0]]]) == []

    ds = _synthetic_trace(rows)
    r = train_bc(ds, inlining.PROBLEM, hidden=(8,), epochs=2, num_buckets=20, heldout_fraction=0.2)
    assert r.heldout_rows == sum(rows[m] for m in held_names) and r.train_rows == len(ds) - r.heldout_rows
    assert r.report()["heldout_units"] == sorted(held_packages)
    assert r.report()["heldout_module_count"] == len(held_names)
    # the vocab saw the training rows only: a held-out-only value is not a quantile boundary
    for i in held:
        ds.columns["callee_basic_block_count"][ds.rows_of(i)] = 10_000
    r2 = train_bc(ds, inlining.PROBLEM, hidden=(8,), epochs=1, num_buckets=20, heldout_fraction=0.2)
    assert r2.policy.vocab.boundaries["callee_basic_block_count"].max() < 50


def test_run_dir_starts_over_only_with_force_and_resumes_only_with_resume(tmp_path):
    from mlopt.training.run_dir import open_run

    run = open_run(tmp_path / "r")
    assert not run.resumed and (tmp_path / "r" / "metrics.jsonl").read_text() == ""
    run.write_config({"kind": "x", "lr": 1})
    run.log_metrics({"iteration": 1})
    (tmp_path / "r" / "best").mkdir()
    (tmp_path / "r" / "best" / "policy.npz").write_bytes(b"old")
    (tmp_path / "r" / "checkpoint.npz").write_bytes(b"old")
    with pytest.raises(mlopt.RunDirError, match="--resume to continue it, --force to start over"):
        open_run(tmp_path / "r")
    with pytest.raises(mlopt.RunDirError, match=r"\(--force to start over\)"):
        open_run(tmp_path / "r", resumable=False)
    with pytest.raises(mlopt.RunDirError, match="exclude each other"):
        open_run(tmp_path / "r", force=True, resume=True)
    resumed = open_run(tmp_path / "r", resume=True)  # resuming keeps everything
    assert resumed.resumed and resumed.read_config() == {"kind": "x", "lr": 1}
    assert (tmp_path / "r" / "metrics.jsonl").read_text().count("\n") == 1
    assert (tmp_path / "r" / "checkpoint.npz").exists() and (tmp_path / "r" / "best" / "policy.npz").exists()
    fresh = open_run(tmp_path / "r", force=True)  # starting over keeps nothing of the old run
    assert not fresh.resumed and sorted(p.name for p in (tmp_path / "r").iterdir()) == ["metrics.jsonl"]
    assert (tmp_path / "r" / "metrics.jsonl").read_text() == ""
    with pytest.raises(mlopt.RunDirError, match="nothing to resume"):
        open_run(tmp_path / "new", resume=True)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    for force in (False, True):  # never deletes a directory that is not a run's
        with pytest.raises(mlopt.RunDirError, match="not a run directory"):
            open_run(tmp_path / "mine", force=force)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    open_run(tmp_path / "empty_is_fine")


def test_cli_train_bc_run_dir_needs_force_to_start_over(tmp_path, capsys):
    from mlopt.cli import main

    rows = {f"p{k}/m{j}.c": 30 for k in range(3) for j in range(2)}
    _synthetic_trace(rows).save(tmp_path / "t.npz")
    args = ["train", "bc", str(tmp_path / "t.npz"), "-o", str(tmp_path / "bc"), "--epochs", "2", "--hidden", "4",
            "--buckets", "10", "--no-compile", "--quiet"]
    assert main(args) == 0
    first = (tmp_path / "bc" / "policy.npz").read_bytes()
    (tmp_path / "bc" / "stale.txt").write_text("from the first run")
    capsys.readouterr()
    assert main(args) == 2  # neither --force nor (for bc) --resume: a usage error, nothing touched
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force to start over" in err
    assert (tmp_path / "bc" / "stale.txt").exists()
    assert main([*args, "--resume"]) == 2  # bc cannot resume
    assert main([*args, "--force", "--seed", "1"]) == 0
    assert not (tmp_path / "bc" / "stale.txt").exists()
    assert json.loads((tmp_path / "bc" / "config.json").read_text())["seed"] == 1
    assert (tmp_path / "bc" / "policy.npz").read_bytes() != first
    assert [json.loads(line)["epoch"] for line in (tmp_path / "bc" / "metrics.jsonl").read_text().splitlines()] \
        == [0, 1]


def test_cli_train_bc_writes_a_run_directory_whose_policy_clang_can_use(sdist_trace, corpus_modules, tmp_path,
                                                                        capsys):
    from mlopt.cli import main

    sdist_trace.save(tmp_path / "trace.npz")
    run = tmp_path / "run"
    assert main(["train", "bc", str(tmp_path / "trace.npz"), "-o", str(run), "--epochs", "20", "--heldout", "0.3",
                 "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["llvm"] == sdist_trace.meta["llvm"]
    assert report["heldout_agreement"] >= 0.9 and report["heldout_rows"] >= 0.3 * len(sdist_trace)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == list(range(20))
    policy = mlopt.load_policy(run / "policy.so")
    r = mlopt.compile(mlopt.Module(corpus_modules[0]), policy)
    numpy_policy = mlopt.InlinePolicy.load(run / "policy.npz")
    assert np.array_equal(r.decisions, numpy_policy.decide(r.log))
    assert main(["train", "bc", str(tmp_path / "trace.npz"), "-o", str(run)]) == 2  # no silent overwrite
    assert "a run directory exists" in capsys.readouterr().err


def test_bc_refuses_an_empty_trace():
    empty = TraceDataset([], np.zeros(0, np.int64), np.zeros(1, np.int64),
                         {f: np.zeros((0, 1), np.int64) for f in (*inlining.FEATURES, inlining.DEFAULT_DECISION)})
    with pytest.raises(mlopt.MloptError, match="no training rows"):
        train_bc(empty, inlining.PROBLEM)


def test_vocab_warns_when_asked_for_more_buckets_than_values(corpus_modules, tmp_path, capsys):
    from mlopt.cli import main

    log = tmp_path / "x.log"
    log.write_bytes(mlopt.compile(mlopt.Module(corpus_modules[0])).log_bytes)
    assert main(["vocab", str(log), "-o", str(tmp_path / "v"), "--buckets", "100"]) == 0
    err = capsys.readouterr().err
    vocab = mlopt.Vocab.load(tmp_path / "v")
    distinct = {f: np.unique(vocab.boundaries[f]).size for f in inlining.FEATURES}
    few = [f for f, k in distinct.items() if k < 100]
    assert 0 < len(few) < 38
    assert f"warning: {len(few)} of 38 features have fewer distinct quantiles than --buckets 100" in err
    # a feature with a single value has one distinct quantile, and comes first in the message
    assert min(distinct.values()) == 1 and min(distinct, key=distinct.get) in err


@pytest.fixture(scope="module")
def es_setup(mini_corpus):
    from mlopt.corpus import corpus_entries

    ds = trace_corpus(mini_corpus, use_cache=False, workers=2, quiet=True)
    bc = train_bc(ds, inlining.PROBLEM, epochs=5, hidden=(16,), heldout_fraction=0.0)
    baseline = {m: int(s) for m, s in zip(ds.modules, ds.text_size)}
    entries = corpus_entries(mini_corpus)
    return bc.policy, entries, baseline


def _es(es_setup, run, iterations, pool):
    from mlopt.training import ESConfig, ESTrainer

    policy, entries, baseline = es_setup
    run.mkdir(exist_ok=True)
    cfg = ESConfig(iterations=iterations, perturbations=2, modules_per_perturbation=3, sigma=0.5, seed=3)
    trainer = ESTrainer(policy, entries[:5], baseline, run, cfg, validation=entries[5:], pool=pool)
    trainer.resume()
    trainer.run()
    return trainer


def test_es_iteration_is_identical_on_the_local_pool_and_on_ray(es_setup, tmp_path):
    from mlopt.workers import make_pool

    with make_pool(1) as pool:
        one = _es(es_setup, tmp_path / "local1", 1, pool)
    with make_pool(2, ray="local") as pool:
        ray = _es(es_setup, tmp_path / "ray", 1, pool)
    assert one.theta.tobytes() == ray.theta.tobytes()
    from mlopt.training.es import flatten

    assert not np.array_equal(one.theta, flatten(es_setup[0]))  # the step moved the policy
    metrics = [json.loads(line) for line in (tmp_path / "local1" / "metrics.jsonl").read_text().splitlines()]
    scheduling = ("evaluations_per_s", "cache_hit_share")  # speed, and what the workers' caches answered
    assert metrics == [json.loads(line) | {k: metrics[1][k] for k in scheduling} if i else
                       json.loads(line) for i, line in
                       enumerate((tmp_path / "ray" / "metrics.jsonl").read_text().splitlines())]
    assert metrics[1]["evaluations"] == 12 and metrics[1]["validation_delta_percent"] is not None


def test_es_resumed_after_an_interruption_equals_an_uninterrupted_run(es_setup, tmp_path):
    from mlopt.workers import make_pool

    with make_pool(2) as pool:
        straight = _es(es_setup, tmp_path / "straight", 2, pool)
        _es(es_setup, tmp_path / "cut", 1, pool)  # stopped after one iteration...
        (tmp_path / "cut" / "work").mkdir()  # ...and in the middle of the next one
        resumed = _es(es_setup, tmp_path / "cut", 2, pool)
    assert resumed.iteration == 2 and resumed.theta.tobytes() == straight.theta.tobytes()
    from mlopt.training import ESConfig, ESTrainer

    policy, entries, baseline = es_setup
    other = ESTrainer(policy, entries, baseline, tmp_path / "cut", ESConfig(iterations=3, sigma=0.1, seed=3))
    with pytest.raises(mlopt.MloptError, match="started with other settings"):
        other.resume()


def test_cli_train_es_runs_resumes_and_ships_a_policy(mini_corpus, tmp_path, capsys):
    from mlopt.cli import main

    ds = trace_corpus(mini_corpus, use_cache=False, workers=1, quiet=True)
    ds.save(tmp_path / "trace.npz")
    assert main(["train", "bc", str(tmp_path / "trace.npz"), "-o", str(tmp_path / "bc"), "--epochs", "3",
                 "--hidden", "8", "--no-compile", "--quiet"]) == 0
    args = ["train", "es", str(mini_corpus), "--init", str(tmp_path / "bc"), "-o", str(tmp_path / "es"),
            "--validation", str(mini_corpus), "--perturbations", "2", "--modules", "2", "--workers", "2",
            "--quiet", "--json"]
    assert main([*args, "--iterations", "1"]) == 0
    capsys.readouterr()
    assert main([*args, "--iterations", "2", "--resume"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["iterations"] == 2 and summary["best_validation_delta_percent"] is not None
    metrics = [json.loads(line) for line in (tmp_path / "es" / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [0, 1, 2]  # 0: the starting policy's validation
    policy = mlopt.load_policy(summary["files"]["policy_so"])
    assert len(mlopt.compile(mlopt.load_corpus(mini_corpus)[0], policy).decisions) > 0
    assert summary["llvm"] == 19
    capsys.readouterr()
    assert main([*args, "--iterations", "1"]) == 2  # the run directory exists: neither --force nor --resume
    assert "--resume to continue it, --force to start over" in capsys.readouterr().err
    assert main([*args, "--iterations", "1", "--force", "--resume"]) == 2
    assert main(["train", "es", str(mini_corpus), "--init", str(tmp_path / "bc"), "-o", str(tmp_path / "none"),
                 "--resume"]) == 2
    # --force starts over: a fresh theta, optimizer state, best/ and metrics, as a new run directory would
    assert main([*args, "--iterations", "1", "--force"]) == 0
    assert main([*args, "--iterations", "1", "-o", str(tmp_path / "es_new")]) == 0
    metrics = [json.loads(line) for line in (tmp_path / "es" / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [0, 1]  # 0: the starting policy, as in a new run
    for name in ("checkpoint.npz", "best/policy.npz", "policy.npz"):
        with np.load(tmp_path / "es" / name) as forced, np.load(tmp_path / "es_new" / name) as new:
            assert forced.files == new.files and all(np.array_equal(forced[k], new[k]) for k in new.files), name
    # the recipe's sigma by default: calibrated to change 6% of the training modules, lr 0.02 scaled alike,
    # module-rank; found again (the same bits) on --resume
    config = json.loads((tmp_path / "es" / "config.json").read_text())
    calibration = config["sigma_calibration"]
    assert calibration["target"] == 0.06 and calibration["share"] >= 0.06 and config["sigma"] == calibration["sigma"]
    assert config["lr"] == calibration["lr"] == pytest.approx(0.02 * config["sigma"] / 0.05)
    assert config["objective"] == "module-rank" and config["modules_per_perturbation"] == 2
    flip = [*args[:5], "-o", str(tmp_path / "es_flip"), *args[7:], "--flip-share", "0.5"]
    assert main([*flip, "--iterations", "1"]) == 0
    config = json.loads((tmp_path / "es_flip" / "config.json").read_text())
    calibration = config["sigma_calibration"]
    assert calibration["share"] >= 0.5 and config["sigma"] == calibration["sigma"] != 0.05
    assert main([*flip, "--iterations", "2", "--resume"]) == 0
    # --sigma fixes sigma (no calibration, lr as given); with --flip-share it is a usage error
    fixed = [*args[:5], "-o", str(tmp_path / "es_fixed"), *args[7:], "--sigma", "0.1", "--lr", "0.03"]
    assert main([*fixed, "--iterations", "1"]) == 0
    config = json.loads((tmp_path / "es_fixed" / "config.json").read_text())
    assert "sigma_calibration" not in config and config["sigma"] == 0.1 and config["lr"] == 0.03
    capsys.readouterr()
    assert main([*fixed, "--iterations", "1", "--force", "--flip-share", "0.1"]) == 2
    assert "give one of them" in capsys.readouterr().err


def test_policy_check_reports_what_a_policy_would_do_on_logged_sites(sdist_trace, tmp_path, capsys):
    from mlopt.cli import main

    sdist_trace.save(tmp_path / "trace.npz")
    never = mlopt.InlinePolicy.constant(0).export(tmp_path / "never")
    assert main(["policy", "check", str(never), "--log", str(tmp_path / "trace.npz"), "--json"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{"):])
    heuristic = sdist_trace.columns[inlining.DEFAULT_DECISION].reshape(-1)
    assert report["rows"] == len(heuristic) and report["policy_rates"] == {"0": 1.0, "1": 0.0}
    assert report["agreement"] == pytest.approx(float(np.mean(heuristic == 0)))
    buckets = report["per_feature"]["cost_estimate"]
    assert sum(b["rows"] for b in buckets) == len(heuristic)
    assert all(b["policy_rate_1"] == 0.0 for b in buckets)
    assert main(["policy", "check", str(never), "--log", str(tmp_path / "trace.npz")]) == 0
    assert "agreement" in capsys.readouterr().out


# lz4.c and lz4hc.c (100 KB of .text each) are most of a search's compile time; the other three improve too
_SLOW = ("obj/lz4.c.o", "obj/lz4hc.c.o")


def _searched(entries):
    return [e for e in entries[:5] if e.name not in _SLOW]


def _search(es_setup, trace, tmp_path, pool, name, moves="flip"):
    from mlopt.training.callee_search import CalleeSearch
    from mlopt.training.local_search import SearchConfig, TrajectorySearch, search_and_imitate
    from mlopt.training.validation import total_delta_percent

    policy, entries, baseline = es_setup
    run = tmp_path / name
    run.mkdir()
    cfg = SearchConfig(evaluations_per_module=8, batch=4, flip_weights=(1.0, 8.0), epochs=2)
    chosen, report = search_and_imitate(
        policy, trace, _searched(entries), run, cfg, pool=pool,
        search_class={"flip": TrajectorySearch, "callee": CalleeSearch}[moves],
        validate=lambda p: total_delta_percent(p, entries[5:], baseline, run / "work", pool=pool))
    return chosen, report, run


def test_callee_search_moves_force_every_site_of_one_callee(es_setup, mini_corpus, tmp_path):
    """A callee move decides every site of its callee (and only those: the
    policy decides the others); each accepted move replays to its recorded
    size on top of the earlier ones, and the imitation rows it weighs are
    exactly the forced callees' sites. Same result on 1 and 2 workers."""
    from mlopt.training.callee_search import callee_moves
    from mlopt.workers import make_pool

    trace = trace_corpus(mini_corpus, use_cache=False, workers=2, quiet=True)
    with make_pool(1) as pool:
        one, report, run = _search(es_setup, trace, tmp_path, pool, "local1", moves="callee")
    with make_pool(2) as pool:
        two, report2, run2 = _search(es_setup, trace, tmp_path, pool, "local2", moves="callee")
    assert one.to_tflite() == two.to_tflite() and report["moves"] == "callee"
    assert (run / "trajectories.npz").read_bytes() == (run2 / "trajectories.npz").read_bytes()
    searched = json.loads((run / "search.json").read_text())
    policy, entries, baseline = es_setup
    model = mlopt.load_policy(run / "work" / "search-policy.tflite")
    assert report["improved_modules"] == sum(bool(r["flips"]) for r in searched) > 0
    assert len(searched) == len(_searched(entries)) == 3
    for r, e in zip(searched, _searched(entries)):
        module = e.load()
        parent = mlopt.compile(module, model, call_sites=True)
        assert parent.text_size == r["start_text"] and r["evaluations"] <= 8
        forced = {}
        for move in r["flips"]:
            before = "".join(map(str, parent.decisions))
            # the move was one of the parent's: some site of the callee got the other decision
            assert (move["callee"], move["decision"]) in callee_moves(parent.call_sites, before)
            forced[move["callee"]] = move["decision"]
            child = mlopt.compile(module, model, call_sites=True, forced_callees=forced)
            assert child.text_size == move["size"] < move["parent_size"] == parent.text_size
            mine = policy.decide(child.log)
            for (caller, callee), d, p in zip(child.call_sites, child.decisions, mine):
                assert d == forced.get(callee, p), (caller, callee)
            parent = child
        assert parent.text_size == r["best_text"] and "".join(map(str, parent.decisions)) == r["decisions"]
    assert report["chosen"] in report["validation"]


def test_forced_callees_decide_every_site_of_a_callee(mini_corpus):
    """forced_callees={f: 0} leaves no site of f inlined, {f: 1} inlines
    every site of f the inliner asks about; the other sites are the
    heuristic's, and a bad value is a ValueError."""
    module = mlopt.load_corpus(mini_corpus)[0]
    base = mlopt.compile(module, call_sites=True)
    inlined = [c for (_, c), d in zip(base.call_sites, base.decisions) if d and c]
    declined = [c for (_, c), d in zip(base.call_sites, base.decisions) if not d and c]
    assert inlined and declined
    for callee, d in ((inlined[0], 0), (declined[0], 1)):
        r = mlopt.compile(module, call_sites=True, forced_callees={callee: d})
        mine = [int(x) for (_, c), x in zip(r.call_sites, r.decisions) if c == callee]
        assert mine and set(mine) == {d}
        others = [int(x) == int(h) for (_, c), x, h in zip(r.call_sites, r.decisions, r.default_decisions)
                  if c != callee]
        assert all(others)
    with pytest.raises(ValueError, match="forced_callees"):
        mlopt.compile(module, forced_callees={inlined[0]: 2})


def test_trajectory_search_moves_are_single_flips_the_policy_completes(es_setup, mini_corpus, tmp_path):
    """Every accepted move differs from its parent in exactly one decision,
    at the same call site (same caller, callee and logged features), replays
    to the size the search recorded, and every later decision is the
    policy's own; the chain of moves ends at the recorded best trajectory.
    The whole trainer -- trajectories, choice, policy bytes -- is the same
    on one local worker and on two Ray workers."""
    from mlopt.training.local_search import flip_move
    from mlopt.workers import make_pool

    trace = trace_corpus(mini_corpus, use_cache=False, workers=2, quiet=True)
    with make_pool(1) as pool:
        one, report, run = _search(es_setup, trace, tmp_path, pool, "local1")
    with make_pool(2, ray="local") as pool:
        two, report2, run2 = _search(es_setup, trace, tmp_path, pool, "ray2")
    assert one.to_tflite() == two.to_tflite()
    assert {k: v for k, v in report.items() if k != "search_seconds"} == \
        {k: v for k, v in report2.items() if k != "search_seconds"}
    assert (run / "trajectories.npz").read_bytes() == (run2 / "trajectories.npz").read_bytes()
    searched = json.loads((run / "search.json").read_text())
    policy, entries, baseline = es_setup
    model = mlopt.load_policy(run / "work" / "search-policy.tflite")
    assert [r["module"] for r in searched] == [e.name for e in _searched(entries)]
    assert report["improved_modules"] == sum(bool(r["flips"]) for r in searched) > 0
    assert len(searched) == len(_searched(entries)) == 3
    for r, e in zip(searched, _searched(entries)):
        module = e.load()
        parent = mlopt.compile(module, model, call_sites=True)  # the policy's own trajectory
        assert parent.text_size == r["start_text"] and r["heuristic_text"] == baseline[e.name]
        assert r["evaluations"] <= 8 and len(r["flips"]) <= 10
        last = -1
        for flip in r["flips"]:
            k = flip["position"]
            assert k > last and flip["parent_size"] == parent.text_size > flip["size"]
            child = mlopt.compile(module, model, call_sites=True,
                                  forced_decisions=flip_move("".join(map(str, parent.decisions)), k))
            assert child.text_size == flip["size"]
            # the same call sites up to and including the flipped one, by name and by logged features
            assert child.call_sites[:k + 1] == parent.call_sites[:k + 1]
            for f in inlining.FEATURES:
                assert np.array_equal(child.log[f][:k + 1], parent.log[f][:k + 1]), f
            assert np.array_equal(child.decisions[:k], parent.decisions[:k])
            assert child.decisions[k] != parent.decisions[k]
            # everything after the flip is the policy's answer on the child's own call sites
            assert np.array_equal(child.decisions[k + 1:], policy.decide(child.log)[k + 1:])
            parent, last = child, k
        assert parent.text_size == r["best_text"] <= r["start_text"]
        assert "".join(map(str, parent.decisions)) == r["decisions"]
        best = TraceDataset.load(run / "trajectories.npz")
        i = best.module_index()[e.name]
        assert np.array_equal(best.columns[inlining.DECISION][best.rows_of(i)].reshape(-1), parent.decisions)
        assert best.text_size[i] == r["best_text"]
    assert report["chosen"] in report["validation"] and set(report["validation"]) == {"start", "flip_weight=1",
                                                                                    "flip_weight=8"}
    assert report["validation"][report["chosen"]] == min(report["validation"].values())


def test_imitation_weighs_size_partitions_equally():
    from mlopt.training.local_search import partition_weights

    sizes = np.array([10, 20, 30, 1000, 2000, 3000, 4000, 5000])
    rows = np.array([1, 2, 3, 100, 200, 300, 400, 500])
    w = partition_weights(sizes, rows, 2)  # small modules (few rows) and large ones weigh the same in total
    per_row = np.repeat(w, rows)
    small = np.repeat(sizes, rows) <= 1000
    assert per_row[small].sum() == pytest.approx(per_row[~small].sum())
    assert per_row.mean() == pytest.approx(1.0)
    assert np.allclose(partition_weights(sizes, rows, 1), 1.0)


def test_cli_train_search_ships_a_policy(mini_corpus, tmp_path, capsys):
    from mlopt.cli import main

    ds = trace_corpus(mini_corpus, use_cache=False, workers=1, quiet=True)
    ds.save(tmp_path / "trace.npz")
    assert main(["train", "bc", str(tmp_path / "trace.npz"), "-o", str(tmp_path / "bc"), "--epochs", "3",
                 "--hidden", "8", "--no-compile", "--quiet"]) == 0
    capsys.readouterr()
    args = ["train", "search", str(mini_corpus), "--init", str(tmp_path / "bc"), "-o", str(tmp_path / "s"),
            "--validation", str(mini_corpus), "--evaluations", "4", "--flip-weights", "2", "--workers", "2",
            "--quiet", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["evaluations"] <= 4 * len(ds.modules) and report["chosen"] in ("start", "flip_weight=2")
    assert [json.loads(line)["round"] for line in (tmp_path / "s" / "metrics.jsonl").read_text().splitlines()] \
        == list(range(1, report["rounds"] + 1))
    policy = mlopt.load_policy(report["files"]["policy_so"])
    assert len(mlopt.compile(mlopt.load_corpus(mini_corpus)[0], policy).decisions) > 0
    assert main(args) == 2  # an existing run: neither --force given nor resumable, a usage error
    assert main([*args[:-4], "--flip-weights", "0"]) == 2  # usage error

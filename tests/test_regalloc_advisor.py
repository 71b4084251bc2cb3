"""Regalloc eviction policies inside stock llc-19 / clang-19 (the plugin) and
the in-process engine: mlopt's analysis runs LLVM's own ML
eviction advisor over an in-process channel, validates every reply, writes
development-mode eviction logs with the function's RegAllocScore as reward.

Conformance is checked against stock llc-19 itself: its interactive channel
(rows and objects on replay), its default advisor (objects), and the MIR it
prints after rewriting (the score)."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import mlopt
from mlopt.compiler.interactive import Host
from mlopt.policy import LoadedPolicy, Vocab, compile_policy
from mlopt.problems import regalloc

pytestmark = [pytest.mark.llvm, pytest.mark.network]


@pytest.fixture(scope="module")
def ra(tmp_path_factory):
    """LLVM 19's tools, mlopt's plugin for them, and -O2 bitcode of a brotli
    module with register pressure (stock llc asks ~600 eviction questions)."""
    from mlopt import _native
    from tests.conftest import IN_CI, _tool
    from tests.support.corpus import c_sources, include_flags

    if 19 not in _native.built_majors() or not mlopt.compiler.regalloc_supported(19):
        message = "this mlopt build has no regalloc eviction advisor (LLVM 19 private headers)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    tools = {n: _tool(f"{n}-19") for n in ("llc", "clang")}
    d = tmp_path_factory.mktemp("ra")
    src = next(p for p in c_sources("brotli") if p.name == "backward_references_hq.c")
    bc = d / "brq.bc"
    subprocess.run([tools["clang"], "-O2", *include_flags("brotli"), "-emit-llvm", "-c", str(src), "-o", str(bc)],
                   check=True)
    stock = d / "stock.o"
    subprocess.run([tools["llc"], "-O2", str(bc), "-filetype=obj", "-o", str(stock)], check=True)
    return {**tools, "plugin": mlopt.compiler.plugin_path(19), "bc": bc, "stock": stock.read_bytes(), "dir": d}


def llc(ra, *flags, out):
    r = subprocess.run([ra["llc"], f"-load={ra['plugin']}", "-O2", *flags, str(ra["bc"]), "-filetype=obj", "-o",
                        str(out)], capture_output=True, text=True)
    return r


def stock_interactive(ra, policy, out):
    r = Host(policy, timeout=300, capture=True).run(
        [ra["llc"], "-O2", "-regalloc-enable-advisor=release", "-regalloc-evict-interactive-channel-base={channel}",
         str(ra["bc"]), "-filetype=obj", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    return r


def engine_module(ra):
    return mlopt.Module(ra["bc"], reloc_model="static", llvm=19)  # what plain llc-19 compiles


@pytest.fixture(scope="module")
def default_log(ra):
    """The plugin's eviction log with the default advisor deciding."""
    path = ra["dir"] / "default.log"
    r = llc(ra, f"-mlopt-regalloc-training-log={path}", out=ra["dir"] / "default.o")
    assert r.returncode == 0, r.stderr
    return {"path": path, "object": (ra["dir"] / "default.o").read_bytes(), "log": mlopt.read_log(path)}


def test_private_headers_are_the_installed_llvms():
    """The build took LLVM's private headers from the Debian source package
    of exactly the installed libllvm19."""
    from mlopt import _native

    version = _native.engine(19).regalloc_source_version
    try:
        installed = subprocess.run(["dpkg-query", "-W", "-f=${source:Version}", "libllvm19"], capture_output=True,
                                   text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("libllvm19 is not a Debian package here")
    assert version and version == installed


def test_default_advisor_log_is_llvms_development_layout_and_code_is_stock(ra, default_log):
    log = default_log["log"]
    assert default_log["object"] == ra["stock"]  # the default advisor decided every question
    names = [s.name for s in log.features]
    assert names == [*regalloc.FEATURES, regalloc.DECISION]
    assert log.score_spec == mlopt.TensorSpec("reward", "float", [1])
    assert len(log) > 300 and len(set(log.contexts)) == len(log.contexts) > 5
    # Rewards: 0.0 for every observation followed by another in its function,
    # the function's RegAllocScore for its last one.
    reward = np.asarray(log.score).reshape(-1)
    ctx = np.asarray(log.context_index)
    last = np.r_[ctx[1:] != ctx[:-1], True]
    assert (reward[~last] == 0).all() and (reward[last] > 0).all()
    scores = mlopt.allocate(engine_module(ra), pipeline="").scores
    for i in np.flatnonzero(last):
        assert reward[i] == np.float32(scores[log.contexts[ctx[i]]])


def test_logged_features_equal_stock_llcs_rows_on_replay(ra, default_log, tmp_path):
    """Replaying the logged decisions to stock llc-19's interactive channel
    gets back, row for row, the features mlopt logged, and the same object."""
    log = default_log["log"]
    decisions = iter(np.asarray(log[regalloc.DECISION]).reshape(-1).tolist())
    r = stock_interactive(ra, lambda obs: next(decisions), tmp_path / "replay.o")
    stock = mlopt.read_log(r.streams[0])
    assert len(stock) == len(log)
    for name in regalloc.FEATURES:
        assert np.asarray(stock[name]).tobytes() == np.asarray(log[name]).tobytes(), name
    assert (tmp_path / "replay.o").read_bytes() == ra["stock"]


@pytest.fixture(scope="module")
def policy(ra, default_log):
    d = ra["dir"]
    vocab = Vocab.from_logs([default_log["log"]], num_buckets=100, features=regalloc.FEATURES)
    p = regalloc.EvictionPolicy.random(vocab, hidden=(16, 16), seed=1)
    p.export(d / "model", logits_output=True)
    return {"numpy": p, "model": d / "model", "so": compile_policy(d / "model", d / "policy.so")}


def test_policy_in_the_plugin_equals_stock_llc_asking_the_same_policy(ra, policy, tmp_path):
    """.tflite and compiled .so give identical objects, the same as stock
    llc-19 driven over its interactive channel by the same policy."""
    objects = {}
    for kind in ("model", "so"):
        out = tmp_path / f"{kind}.o"
        r = llc(ra, f"-mlopt-regalloc-model={policy[kind]}", f"-mlopt-regalloc-training-log={tmp_path / kind}.log",
                out=out)
        assert r.returncode == 0 and not r.stderr, r.stderr
        objects[kind] = out.read_bytes()
    assert objects["model"] == objects["so"] != ra["stock"]
    loaded = LoadedPolicy(policy["so"], regalloc.PROBLEM)
    r = stock_interactive(ra, lambda obs: int(loaded.decide(obs)[0]), tmp_path / "host.o")
    assert (tmp_path / "host.o").read_bytes() == objects["so"]
    mine = mlopt.read_log(tmp_path / "so.log")
    assert np.array_equal(np.asarray(mine[regalloc.DECISION]).reshape(-1), np.array(r.decisions))
    # The engine: same object, same log bytes as the plugin.
    e = mlopt.allocate(engine_module(ra), policy["so"], pipeline="", keep_object=True)
    assert e.object == objects["so"] and e.log_bytes == (tmp_path / "so.log").read_bytes()
    assert e.questions == len(mine) and e.replaced == 0 and not e.warnings
    # A numpy EvictionPolicy (called per question) decides the same.
    assert mlopt.allocate(engine_module(ra), policy["numpy"], pipeline="").log_bytes == e.log_bytes


def masked_column(obs, default):
    zeros = np.flatnonzero(obs["mask"] == 0)
    return int(zeros[0]) if len(zeros) else default


def always_evict(obs, default):
    legal = np.flatnonzero(obs["mask"][:32])
    return int(legal[0]) if len(legal) else default


@pytest.mark.parametrize("bad, warning", [
    (masked_column, "whose mask is 0"),
    (lambda obs, default: 40, "answered column 40"),
    (lambda obs, default: -1, "answered column -1"),
    (lambda obs, default: "x", "answered 'x' in function"),
], ids=["masked", "out-of-range", "negative", "not-an-index"])
def test_invalid_replies_get_the_default_advisors_choice_and_one_warning(ra, bad, warning):
    r = mlopt.allocate(engine_module(ra), bad, pipeline="", keep_object=True)
    assert r.object == ra["stock"]  # every reply was replaced by the default advisor's choice
    assert r.replaced == r.questions > 300
    assert len(r.warnings) == 1 and warning in r.warnings[0], r.warnings


def test_runaway_evictions_are_guarded(ra):
    free = mlopt.allocate(engine_module(ra), always_evict, pipeline="")
    assert free.questions > 3 * mlopt.allocate(engine_module(ra), pipeline="").questions  # it evicts a lot
    guarded = mlopt.allocate(engine_module(ra), always_evict, pipeline="", max_evictions=1)
    assert guarded.questions < free.questions and guarded.replaced > 0
    assert len(guarded.warnings) == 1 and "evict 1 times" in guarded.warnings[0]


def test_a_raising_policy_is_reraised_after_the_compile(ra):
    def boom(obs, default):
        raise ValueError("policy bug")

    with pytest.raises(ValueError, match="policy bug"):
        mlopt.allocate(engine_module(ra), boom, pipeline="")


def test_plugin_errors_are_one_line_and_never_crash(ra, default_log, tmp_path):
    r = llc(ra, f"-mlopt-regalloc-model={tmp_path / 'missing.so'}", out=tmp_path / "m.o")
    assert r.returncode != 0 and "missing.so" in r.stderr and "Stack dump" not in r.stderr
    r = llc(ra, f"-mlopt-regalloc-training-log={default_log['path']}", out=tmp_path / "o.o")
    assert r.returncode != 0 and "-mlopt-regalloc-training-log-overwrite" in r.stderr
    assert mlopt.read_log(default_log["path"]).features == default_log["log"].features  # not overwritten


def test_clang_fpass_plugin_runs_the_policy(ra, policy, tmp_path):
    from tests.support.corpus import c_sources, include_flags

    src = next(p for p in c_sources("brotli") if p.name == "backward_references_hq.c")
    base = [ra["clang"], "-O2", *include_flags("brotli"), "-c", str(src)]
    subprocess.run([*base, "-o", str(tmp_path / "stock.o")], check=True)
    # -Xclang -load: clang parses -mllvm options before -fpass-plugin loads.
    load = [f"-fpass-plugin={ra['plugin']}", "-Xclang", "-load", "-Xclang", str(ra["plugin"])]
    r = subprocess.run([*base, *load, "-mllvm", f"-mlopt-regalloc-model={policy['so']}",
                        "-mllvm", f"-mlopt-regalloc-training-log={tmp_path / 'c.log'}", "-o", str(tmp_path / "p.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(mlopt.read_log(tmp_path / "c.log")) > 300
    assert (tmp_path / "p.o").read_bytes() != (tmp_path / "stock.o").read_bytes()


def mir_score(mir: str, function: str) -> float:
    """RegAllocScore of a single-block function from the MIR stock llc-19
    prints after rewriting: LLVM's weights over copies, loads, stores and
    load-stores (told by the memory operands)."""
    body = mir.split(f"name:            {function}\n", 1)[1].split("\nbody:", 1)[1].split("\n...", 1)[0]
    assert len(re.findall(r"^\s*bb\.\d+", body, re.M)) == 1
    copies = loads = stores = both = 0
    for line in body.splitlines():
        t = line.strip()
        if not t or t.startswith(("bb.", "liveins", "successors", ";")):
            continue
        code, _, mem = t.partition("::")
        op = code.split(" = ", 1)[1].split()[0] if " = " in code else code.split()[0]
        assert not op.startswith(("DBG_", "INLINEASM")) and not op.startswith("MOV32r0"), op  # no remat here
        if op == "COPY":
            copies += 1
        elif "load" in mem and "store" in mem:
            both += 1
        elif "load" in mem:
            loads += 1
        elif "store" in mem:
            stores += 1
    assert copies and loads and stores > 18  # it spilled
    return 0.2 * copies + 4.0 * loads + 1.0 * stores + 5.0 * both


def test_score_equals_what_stock_llc_leaves_after_rewriting(ra, tmp_path):
    """The score is LLVM's RegAllocScore of the code right after
    VirtRegRewriter: checked against stock llc-19's MIR there, for a
    single-block function that spills (block frequency 1)."""
    n = 18
    ir = ["define void @pressure(ptr %p, ptr %q) {", "entry:"]
    ir += [f"  %a{i}.ptr = getelementptr i64, ptr %p, i64 {i}\n  %a{i} = load volatile i64, ptr %a{i}.ptr"
           for i in range(n)]
    ir += [f"  %m{i} = mul i64 %a{i}, %a{(i * 7 + 3) % n}" for i in range(n)]
    ir += [f"  %s{i} = add i64 %m{i}, %a{(i + 5) % n}\n  %o{i} = getelementptr i64, ptr %q, i64 {i}\n"
           f"  store volatile i64 %s{i}, ptr %o{i}" for i in range(n)]
    (tmp_path / "p.ll").write_text("\n".join([*ir, "  ret void", "}"]) + "\n")
    subprocess.run([ra["llc"], "-O2", "-relocation-model=static", "-stop-after=virtregrewriter",
                    str(tmp_path / "p.ll"), "-o", str(tmp_path / "p.mir")], check=True)
    expected = mir_score((tmp_path / "p.mir").read_text(), "pressure")
    r = mlopt.allocate(mlopt.Module(tmp_path / "p.ll", reloc_model="static", llvm=19), pipeline="")
    assert r.scores == {"pressure": pytest.approx(expected, rel=1e-12)}
    assert r.rescore({"loads": 0.0}) == pytest.approx(expected - 4.0 * r.counts["pressure"]["loads"]
                                                      - 4.0 * r.counts["pressure"]["load_stores"])


def test_regalloc_rollouts_measure_the_score_and_es_trains_against_it(mini_corpus, tmp_path):
    """A regalloc rollout's cost is the module's RegAllocScore (as allocate
    measures it, in a worker); BC clones the default advisor from its
    eviction logs; one ES iteration runs against the score, and the same seed
    gives the same policy bytes again."""
    if not mlopt.compiler.regalloc_supported(19):
        pytest.skip("no regalloc eviction advisor in this build")
    from mlopt.corpus import corpus_entries
    from mlopt.rollouts import RolloutTask, run_rollouts
    from mlopt.training import ESConfig, ESTrainer
    from mlopt.training.bc import clone_logs
    from mlopt.training.validation import costs_of
    from mlopt.workers import make_pool

    entries = corpus_entries(mini_corpus)
    with make_pool(2) as pool:
        rs = run_rollouts([RolloutTask(e, None, log=True, problem="regalloc", llvm=19) for e in entries], pool=pool,
                          quiet=True)
        assert all(r.ok for r in rs)
        direct = {e.name: mlopt.allocate(e.load(19), log=False).score for e in entries}
        assert {r.value.module: r.value.cost for r in rs} == pytest.approx(direct, rel=1e-12)
        logs = [mlopt.read_log(r.value.log_bytes) for r in rs if r.value.log_bytes]
        logs = [log for log in logs if len(log)]
        assert sum(len(log) for log in logs) > 50
        vocab = Vocab.from_logs(logs, num_buckets=50, features=regalloc.FEATURES)
        bc = clone_logs(regalloc.EvictionPolicy.random(vocab, hidden=(8,), seed=0), logs, epochs=3,
                        heldout_fraction=0.0)
        assert bc.train_agreement > 0.5  # it learned something of the default advisor
        baseline = {e.name: c for e, c in zip(entries, costs_of([(None, e) for e in entries], "regalloc", pool=pool))}
        thetas = []
        for run in ("a", "b"):
            cfg = ESConfig(iterations=1, perturbations=2, modules_per_perturbation=3, seed=3)
            trainer = ESTrainer(bc.policy, entries, baseline, tmp_path / run, cfg, pool=pool)
            trainer.run()
            thetas.append(trainer.theta.copy())
        assert np.array_equal(thetas[0], thetas[1])
        assert not np.array_equal(thetas[0], np.concatenate([a.reshape(-1) for wb in bc.policy.layers for a in wb]))

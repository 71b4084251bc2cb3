"""IR2Vec on LLVM 22: the callee/caller embeddings LLVM appends to the
inliner's inputs when given a vocabulary, through the plugin and the
engine, against what stock opt-22 sends; policies with and without them;
the trainer's per-element z-score of float features; and clear errors
where a policy, a vocabulary or an LLVM major does not fit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import mlopt
import mlopt.compiler
from mlopt import _native
from mlopt.compiler.interactive import Host
from mlopt.errors import IR2VecVocabError, PolicyError, ProblemError
from mlopt.policy import LoadedPolicy, Vocab, compile_policy, feature_matrix
from mlopt.problems import get as get_problem
from mlopt.problems import inlining, is_problem_name, load_weights
from mlopt.rollouts import TraceDataset
from mlopt.training import train_bc

DIM = 8
OPERANDS = {"Function", "Pointer", "Constant", "Variable"}


def _require(major: int) -> None:
    if major not in _native.built_majors() or not shutil.which(f"opt-{major}"):
        message = f"mlopt was built without LLVM {major}, or opt-{major} is missing"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)


def write_vocab(path, dim: int, seed: int) -> str:
    """A vocabulary over every entity LLVM 22's own tool lists, with seeded
    random vectors (LLVM reads operand kinds and predicates from "Arguments")."""
    out = subprocess.run(["llvm-ir2vec-22", "entities"], check=True, capture_output=True, text=True).stdout
    names = [line.split("\t")[0] for line in out.splitlines()[1:] if line.strip()]
    assert len(names) > 100 and "Ret" in names and "ICMP_eq" in names
    rng = np.random.default_rng(seed)
    sections = {"Opcodes": {}, "Types": {}, "Arguments": {}}
    for name in names:
        section = ("Types" if name.endswith("Ty") else
                   "Arguments" if name in OPERANDS or name.startswith(("ICMP_", "FCMP_")) else "Opcodes")
        sections[section][name] = [round(float(v), 3) for v in rng.normal(0, 1, dim)]
    path.write_text(json.dumps(sections))
    return str(path)


@pytest.fixture(scope="module")
def ir2vec(tmp_path_factory):
    """LLVM 22 bitcode of six real C modules (lz4, brotli) and two vocabularies."""
    _require(22)
    from tests.support.corpus import bitcode, c_sources, include_flags

    d = tmp_path_factory.mktemp("ir2vec")
    picks = [("lz4", "lz4.c"), ("lz4", "lz4hc.c"), ("lz4", "lz4frame.c"), ("brotli", "encode.c"),
             ("brotli", "decode.c"), ("brotli", "backward_references.c")]
    modules = []
    for sdist, name in picks:
        src = next(p for p in c_sources(sdist) if p.name == name)
        modules.append(bitcode("clang-22", src, d, flags=include_flags(sdist)))
    return {"modules": modules, "vocab": write_vocab(d / "vocab8.json", DIM, 0),
            "vocab4": write_vocab(d / "vocab4.json", 4, 1), "dir": d}


def engine_module(path):
    # As opt-22 + llc-22 compile it (the relocation model opt uses by default).
    return mlopt.Module(path, opt_level="Oz", reloc_model="static", llvm=22)


def toy(obs) -> int:
    """A deterministic policy that says both yes and no."""
    return int(obs["cost_estimate"][0] < 20)


def stock_interactive(module, vocab, out):
    cmd = ["opt-22", "-passes=default<Oz>", "-enable-ml-inliner=release",
           "-inliner-interactive-channel-base={channel}", f"-ml-inliner-ir2vec-vocab-file={vocab}",
           f"-ir2vec-vocab-path={vocab}", str(module), "-o", str(out)]
    r = Host(toy, timeout=300, capture=True).run(cmd)
    assert r.returncode == 0, r.stderr
    return r


def test_embeddings_equal_what_stock_opt22_sends(ir2vec, tmp_path):
    """Stock opt-22's interactive rows (38 features + callee/caller
    embeddings) are what mlopt's plugin sends on the same channel, byte for
    byte, and what the engine logs, value for value, for the same policy."""
    plugin = mlopt.compiler.plugin_path(22)
    for module in ir2vec["modules"]:
        stock = stock_interactive(module, ir2vec["vocab"], tmp_path / "stock.bc")
        log = mlopt.read_log(stock.streams[0])
        assert log.feature_names == [*inlining.FEATURES, *inlining.EMBEDDINGS], module.name
        for name in inlining.EMBEDDINGS:
            spec = log.features[log.feature_names.index(name)]
            assert (spec.type, spec.shape) == ("float", (DIM,))
        emb = log["callee_embedding"]
        assert len(log) > 10 and np.abs(emb).sum() > 0 and len(np.unique(emb, axis=0)) > 1, module.name

        ours = Host(toy, timeout=300, capture=True).run(
            ["opt-22", f"-load-pass-plugin={plugin}", "-passes=default<Oz>", "-mlopt-inline-interactive={channel}",
             f"-mlopt-inline-ir2vec-vocab={ir2vec['vocab']}", str(module), "-o", str(tmp_path / "ours.bc")])
        assert ours.returncode == 0, ours.stderr
        assert ours.streams[0] == stock.streams[0], module.name
        assert (tmp_path / "ours.bc").read_bytes() == (tmp_path / "stock.bc").read_bytes()

        def decide(ints, floats):
            assert floats.shape == (2 * DIM,) and floats.dtype == np.float32
            return int(ints[inlining.FEATURES.index("cost_estimate")] < 20)

        r = mlopt.compile(engine_module(module), decide, ir2vec_vocab=ir2vec["vocab"])
        assert len(r.log) == len(log), module.name
        for name in log.feature_names:
            assert np.array_equal(r.log[name], log[name]), (module.name, name)
        assert np.array_equal(r.decisions, np.array(stock.decisions) != 0)


def test_plugin_training_log_with_embeddings_equals_the_engines(ir2vec, tmp_path):
    plugin = mlopt.compiler.plugin_path(22)
    module = ir2vec["modules"][0]
    flags = mlopt.compiler.opt_flags(llvm=22, training_log=tmp_path / "x.log", ir2vec_vocab=ir2vec["vocab"])
    subprocess.run(["opt-22", *flags, "-passes=default<Oz>", str(module), "-o", str(tmp_path / "x.bc")], check=True)
    assert flags[0] == f"-load-pass-plugin={plugin}"
    r = mlopt.compile(engine_module(module), ir2vec_vocab=ir2vec["vocab"])
    assert (tmp_path / "x.log").read_bytes() == r.log_bytes
    assert [s.name for s in r.log.features][-4:] == [*inlining.EMBEDDINGS, inlining.DEFAULT_DECISION,
                                                     inlining.DECISION]
    # The heuristic decides: the same decisions and code as without embeddings.
    plain = mlopt.compile(engine_module(module))
    assert np.array_equal(plain.decisions, r.decisions) and plain.text_size == r.text_size


@pytest.fixture(scope="module")
def trained(ir2vec, tmp_path_factory):
    """A BC policy over the 38 features + embeddings, from an engine trace of
    the modules, exported as .tflite and compiled to .so."""
    d = tmp_path_factory.mktemp("trained")
    results = [mlopt.compile(engine_module(m), ir2vec_vocab=ir2vec["vocab"]) for m in ir2vec["modules"]]
    ds = TraceDataset.from_logs([r.module for r in results], [r.text_size for r in results],
                                [r.log_bytes for r in results])
    problem = inlining.with_ir2vec(DIM)
    result = train_bc(ds, problem, hidden=(16,), epochs=3, num_buckets=50, heldout_fraction=0.0, seed=0)
    policy = result.policy
    policy.export(d / "model")
    so = compile_policy(d / "model", d / "policy.so")
    plain = train_bc(ds, inlining.PROBLEM, hidden=(16,), epochs=3, num_buckets=50, heldout_fraction=0.0,
                     seed=0).policy
    plain.export(d / "plain")
    return {"policy": policy, "model": d / "model", "so": so, "ds": ds, "plain": plain,
            "plain_so": compile_policy(d / "plain", d / "plain.so"), "dir": d}


def test_bc_z_scores_the_embeddings(trained):
    policy, ds = trained["policy"], trained["ds"]
    assert sorted(policy.vocab.zscore) == sorted(inlining.EMBEDDINGS)
    for name in inlining.EMBEDDINGS:
        mean, std = policy.vocab.zscore[name]
        assert mean.shape == std.shape == (DIM,)
        assert np.allclose(mean, ds.columns[name].astype(np.float64).mean(axis=0))
        assert np.allclose(std, ds.columns[name].astype(np.float64).std(axis=0))
    # The normalized embedding columns have mean ~0 and std ~1 on the trace.
    x = policy.vocab.normalize(feature_matrix(ds.columns, policy.problem.features), policy.widths)
    z = x[:, len(inlining.FEATURES): len(inlining.FEATURES) + 2 * DIM]
    assert np.allclose(z.mean(axis=0), 0, atol=1e-3) and np.allclose(z.std(axis=0), 1, atol=1e-3)


def test_policies_with_embeddings_run_in_plugin_and_engine_alike(ir2vec, trained, tmp_path):
    """The .tflite and the compiled .so decide as the numpy policy does on
    the same inputs, and give the same objects; the plugin with the .so logs
    what the engine logs."""
    policy = trained["policy"]
    for module in ir2vec["modules"][:3]:
        m = engine_module(module)
        by_model = {}
        for path in (trained["model"], trained["so"]):
            r = mlopt.compile(m, str(path), keep_object=True, ir2vec_vocab=ir2vec["vocab"])
            assert not r.warnings
            assert np.array_equal(r.decisions, policy.decide(r.log)), (module.name, path)
            by_model[str(path)] = r
        tfl, so = by_model.values()
        assert tfl.object == so.object and tfl.log_bytes == so.log_bytes
        flags = mlopt.compiler.opt_flags(llvm=22, model=trained["so"], training_log=tmp_path / f"{module.stem}.log",
                                         ir2vec_vocab=ir2vec["vocab"])
        subprocess.run(["opt-22", *flags, "-passes=default<Oz>", str(module), "-o", str(tmp_path / "o.bc")],
                       check=True)
        assert (tmp_path / f"{module.stem}.log").read_bytes() == so.log_bytes
    # The embeddings matter to this policy: zeroing them changes some decisions.
    ds = trained["ds"]
    zeroed = dict(ds.columns, callee_embedding=np.zeros_like(ds.columns["callee_embedding"]),
                  caller_embedding=np.zeros_like(ds.columns["caller_embedding"]))
    assert (policy.decide(zeroed) != policy.decide(ds.columns)).any()


def test_a_policy_without_embeddings_runs_with_or_without_a_vocabulary(ir2vec, trained, tmp_path):
    so = trained["plain_so"]
    for module in ir2vec["modules"][:2]:
        m = engine_module(module)
        with_vocab = mlopt.compile(m, str(so), ir2vec_vocab=ir2vec["vocab"])
        without = mlopt.compile(m, str(so))
        assert np.array_equal(with_vocab.decisions, without.decisions)
        assert with_vocab.text_size == without.text_size
        assert with_vocab.log.feature_names[-4:-2] == list(inlining.EMBEDDINGS)
    # Loaded for the IR2Vec problem, it takes the 38 only.
    loaded = LoadedPolicy(so, inlining.with_ir2vec(DIM))
    assert loaded.inputs == list(inlining.FEATURES)
    flags = mlopt.compiler.opt_flags(llvm=22, model=so, ir2vec_vocab=ir2vec["vocab"])
    r = subprocess.run(["opt-22", *flags, "-passes=default<Oz>", str(ir2vec["modules"][0]), "-o",
                        str(tmp_path / "o.bc")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""


def test_a_policy_with_embeddings_fails_by_name_where_they_are_missing_or_misshaped(ir2vec, trained, tmp_path):
    so, module = str(trained["so"]), ir2vec["modules"][0]
    m = engine_module(module)
    with pytest.raises(PolicyError, match="'action_callee_embedding:0'.*ir2vec_vocab="):
        mlopt.compile(m, so)
    with pytest.raises(PolicyError, match="takes 'callee_embedding'.*ir2vec_vocab="):
        mlopt.compile(m, LoadedPolicy(so, inlining.with_ir2vec(DIM)))
    with pytest.raises(PolicyError, match=r"'action_callee_embedding:0' has shape \[8\], expected float \[4\]"):
        mlopt.compile(m, so, ir2vec_vocab=ir2vec["vocab4"])
    with pytest.raises(PolicyError, match=r"'callee_embedding' as float \[8\].*4-d"):
        mlopt.compile(m, LoadedPolicy(so, inlining.with_ir2vec(DIM)), ir2vec_vocab=ir2vec["vocab4"])
    with pytest.raises(PolicyError, match="action_callee_embedding:0"):
        LoadedPolicy(so, inlining.PROBLEM)
    # The plugin: one error line naming the tensor, and opt fails.
    for extra, expected in [([], "'action_callee_embedding:0' (float [8]) is not one of the compiler's features "
                                 "(the policy takes IR2Vec embeddings: pass -mlopt-inline-ir2vec-vocab=FILE"),
                            ([f"-mlopt-inline-ir2vec-vocab={ir2vec['vocab4']}"],
                             "'action_callee_embedding:0' has shape [8], expected float [4]")]:
        r = subprocess.run(["opt-22", f"-load-pass-plugin={mlopt.compiler.plugin_path(22)}",
                            f"-mlopt-inline-model={so}", *extra, "-passes=default<Oz>", str(module), "-o",
                            str(tmp_path / "o.bc")], capture_output=True, text=True)
        assert r.returncode != 0 and expected in r.stderr, r.stderr
        assert r.stderr.count("error:") == 1, r.stderr


def test_bad_vocabularies_and_llvm19_are_clear_errors(ir2vec, tmp_path):
    m = engine_module(ir2vec["modules"][0])
    broken = tmp_path / "broken.json"
    broken.write_text('{"Opcodes": {"Ret": [1, 2]}}')
    with pytest.raises(IR2VecVocabError, match="broken.json: .*Types"):
        mlopt.compile(m, ir2vec_vocab=broken)
    with pytest.raises(IR2VecVocabError, match="no such IR2Vec vocabulary file"):
        mlopt.compile(m, ir2vec_vocab=tmp_path / "missing.json")
    plugin = mlopt.compiler.plugin_path(22)
    r = subprocess.run(["opt-22", f"-load-pass-plugin={plugin}", f"-mlopt-inline-ir2vec-vocab={broken}",
                        "-passes=default<Oz>", str(ir2vec["modules"][0]), "-o", str(tmp_path / "o.bc")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "broken.json" in r.stderr and "Types" in r.stderr
    # Stock's trigger without a path is named too.
    r = subprocess.run(["opt-22", f"-load-pass-plugin={plugin}", "-mlopt-inline-ml-advisor",
                        "-ml-inliner-ir2vec-vocab-file=x", "-passes=default<Oz>", str(ir2vec["modules"][0]),
                        "-o", str(tmp_path / "o.bc")], capture_output=True, text=True)
    assert r.returncode != 0 and "-ir2vec-vocab-path" in r.stderr
    if 19 in _native.built_majors():
        src = tmp_path / "f.ll"
        src.write_text("define i32 @f(i32 %a) {\n  ret i32 %a\n}\n")
        with pytest.raises(IR2VecVocabError, match="LLVM 21 or later"):
            mlopt.compile(mlopt.Module(src, llvm=19), ir2vec_vocab=ir2vec["vocab"])
        r = subprocess.run(["opt-19", f"-load-pass-plugin={mlopt.compiler.plugin_path(19)}",
                            f"-mlopt-inline-ir2vec-vocab={ir2vec['vocab']}", "-passes=default<Oz>", str(src),
                            "-o", str(tmp_path / "o19.bc")], capture_output=True, text=True)
        assert r.returncode != 0 and "LLVM 21 or later" in r.stderr


def test_the_cli_traces_trains_and_evaluates_with_embeddings(mini_corpus, ir2vec, tmp_path, capsys, monkeypatch):
    """trace -> train bc (the problem taken from the trace) -> train es (its
    workers get the vocabulary) -> eval, all with --ir2vec-vocab on LLVM 22."""
    from mlopt.cli import main

    monkeypatch.setenv("MLOPT_IR2VEC_VOCAB", "")  # --ir2vec-vocab sets it; restored after the test

    v = ["--llvm", "22", "--ir2vec-vocab", ir2vec["vocab"]]
    assert main(["trace", str(mini_corpus), "-o", str(tmp_path / "t.npz"), "--workers", "1", "--quiet", *v]) == 0
    capsys.readouterr()
    ds = TraceDataset.load(tmp_path / "t.npz")
    assert ds.meta["problem"] == f"inlining-ir2vec:{DIM}" and "caller_embedding" in ds.columns
    assert main(["train", "bc", str(tmp_path / "t.npz"), "-o", str(tmp_path / "bc"), "--epochs", "2",
                 "--hidden", "8", "--quiet"]) == 0
    capsys.readouterr()
    assert load_weights(tmp_path / "bc" / "policy.npz").problem.name == f"inlining-ir2vec:{DIM}"
    assert main(["train", "es", str(mini_corpus), "--init", str(tmp_path / "bc"), "-o", str(tmp_path / "es"),
                 "--iterations", "1", "--perturbations", "1", "--modules", "2", "--workers", "2", "--quiet",
                 "--json", *v]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert main(["eval", summary["files"]["policy_so"], str(mini_corpus), "-o", str(tmp_path / "ev"), "--workers",
                 "1", "--no-plots", "--quiet", *v]) == 0
    # Without the vocabulary the policy cannot run, and says why.
    monkeypatch.setenv("MLOPT_IR2VEC_VOCAB", "")
    assert main(["eval", summary["files"]["policy_so"], str(mini_corpus), "-o", str(tmp_path / "ev2"),
                 "--workers", "1", "--no-plots", "--quiet", "--llvm", "22"]) == 1
    assert "callee_embedding" in capsys.readouterr().err


def test_the_ir2vec_problem_family():
    p = get_problem("inlining-ir2vec:75")
    assert p.feature_names == (*inlining.FEATURES, *inlining.EMBEDDINGS)
    assert [(s.type, list(s.shape)) for s in p.features[-2:]] == [("float", [75])] * 2
    assert p.zscore_features == p.optional_features == inlining.EMBEDDINGS
    assert is_problem_name("inlining") and is_problem_name("inlining-ir2vec:8")
    assert not is_problem_name("inlining-ir2vec") and not is_problem_name("inlining:3")
    with pytest.raises(ProblemError, match="dimension"):
        get_problem("inlining-ir2vec:x")


def test_zscore_vocab_round_trips_and_normalizes_in_float32(tmp_path):
    rng = np.random.default_rng(3)
    emb = rng.normal(5, 3, (200, 4)).astype(np.float32)
    ints = rng.integers(0, 9, (200, 1))
    v = Vocab.from_columns({"a": [ints], "e": [emb]}, 10, zscore=["e"])
    assert list(v.boundaries) == ["a"] and list(v.zscore) == ["e"]
    v.save(tmp_path / "v")
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["a.buckets", "e.zscore"]
    back = Vocab.load(tmp_path / "v")
    assert back.features == ("a", "e")
    assert np.array_equal(back.zscore["e"][0], v.zscore["e"][0]) and np.array_equal(back.zscore["e"][1],
                                                                                  v.zscore["e"][1])
    x = np.hstack([ints.astype(np.float64), emb.astype(np.float64)])
    out = back.normalize(x, [1, 4])
    mean, inv = v.zscore_constants("e")
    z = (emb - mean) * inv
    assert out.dtype == np.float32 and np.array_equal(out[:, 1:5], z) and np.array_equal(out[:, 6:], z * z)
    (tmp_path / "v" / "e.zscore").write_text("1 2\n3 x\n")
    with pytest.raises(mlopt.errors.VocabError, match=r"e.zscore:2"):
        Vocab.load(tmp_path / "v")

"""Ahead-of-time compiled policies (.so): same decisions as numpy, LiteRT and the
plugin's LiteRT runner, identical IR in the real opt-19, clear errors."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import mlopt
from mlopt.compiler.plugin import opt_flags
from mlopt.problems import inlining as inliner
from mlopt.problems.inlining import feature_matrix
from mlopt.tflite import GraphBuilder
from tests.support.llvm import opt


@pytest.fixture(scope="module")
def real_rows(llvm_tools, plugin, corpus_modules, tmp_path_factory):
    """Feature rows from real training logs: traces of every corpus module under
    the heuristic at -Oz and -O3 and under an always-inline policy (different
    decisions and thresholds, different rows) and two random policies."""
    out = tmp_path_factory.mktemp("rows")
    always = mlopt.InlinePolicy.constant(1).export(out / "always")
    logs = []
    for module in corpus_modules:
        for name, flags, level in (("h", {}, "Oz"), ("a", {"model": always}, "Oz"), ("o3", {}, "O3")):
            log = out / f"{module.stem}.{name}.log"
            opt(llvm_tools, module, out / "o.bc", *opt_flags(training_log=log, llvm=llvm_tools["major"], **flags),
                level=level)
            logs.append(mlopt.read_log(log))
    vocab = mlopt.Vocab.from_logs(logs[::3], num_buckets=100)
    for seed in (3, 4):
        model = mlopt.InlinePolicy.random(vocab, hidden=(16,), seed=seed).export(out / f"r{seed}")
        for module in corpus_modules:
            log = out / f"{module.stem}.r{seed}.log"
            opt(llvm_tools, module, out / "o.bc", *opt_flags(training_log=log, model=model, llvm=llvm_tools["major"]))
            logs.append(mlopt.read_log(log))
    return logs


@pytest.fixture(scope="module")
def exported(real_rows, tmp_path_factory):
    vocab = mlopt.Vocab.from_logs(real_rows[::5], num_buckets=500)
    x = feature_matrix(real_rows[0])
    # The first seed whose random policy decides both ways often enough.
    policy = next(p for p in (mlopt.InlinePolicy.random(vocab, hidden=(64, 32), seed=s) for s in range(50))
                  if 0.2 < p.decide(x).mean() < 0.8)
    root = tmp_path_factory.mktemp("compiled")
    directory = policy.export(root / "model", logits_output=True)
    so = mlopt.compile_policy(directory, root / "policy.so")
    return policy, directory, so


@pytest.mark.slow  # builds >10,000 real feature rows
def test_compiled_litert_and_numpy_agree_on_real_rows(real_rows, exported):
    policy, directory, so = exported
    x = np.concatenate([feature_matrix(log) for log in real_rows]).astype(np.int64)
    assert len(x) >= 10_000
    expected = policy.decide(x)
    logits = policy.logits(x)
    assert 0.05 < expected.mean() < 0.95
    compiled = mlopt.load_policy(so)
    assert compiled.kind == "compiled" and [s.name for s in compiled.extra_outputs] == ["inlining_logits"]
    via_so = compiled.evaluate(x)
    assert np.array_equal(via_so[inliner.DECISION], expected)
    np.testing.assert_allclose(via_so["inlining_logits"], logits, atol=1e-5, rtol=0)
    via_litert = mlopt.load_policy(directory).evaluate(x)  # the plugin's LiteRT runner
    assert np.array_equal(via_litert[inliner.DECISION], expected)
    np.testing.assert_allclose(via_litert["inlining_logits"], logits, atol=1e-5, rtol=0)
    # LiteRT's own Python interpreter, every row.
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(directory / "model.tflite")).get_signature_runner("action")
    for r in range(len(x)):
        got = runner(**{f: x[r, j : j + 1] for j, f in enumerate(inliner.FEATURES)})
        assert got[inliner.DECISION][0] == expected[r], r
        np.testing.assert_allclose(got["inlining_logits"], logits[r], atol=1e-5, rtol=0)


@pytest.mark.slow  # builds >10,000 real feature rows
def test_compiled_and_tflite_give_identical_ir_in_opt(llvm_tools, plugin, corpus_modules, exported, tmp_path):
    _, directory, so = exported
    for module in corpus_modules:
        a, b = tmp_path / "tflite.bc", tmp_path / "so.bc"
        la, lb = tmp_path / f"{module.stem}.tflite.log", tmp_path / f"{module.stem}.so.log"
        opt(llvm_tools, module, a, *opt_flags(model=directory, training_log=la))
        opt(llvm_tools, module, b, *opt_flags(model=so, training_log=lb))
        assert a.read_bytes() == b.read_bytes(), module.name
        ta, tb = mlopt.read_log(la), mlopt.read_log(lb)
        assert ta.feature_names == tb.feature_names and len(ta) == len(tb)
        for name in ta.feature_names:  # logits: float sums in another order
            if name == "inlining_logits":
                np.testing.assert_allclose(ta[name], tb[name], atol=1e-5, rtol=0)
            else:
                assert np.array_equal(ta[name], tb[name]), (module.name, name)


def test_compile_is_deterministic(exported, tmp_path):
    _, directory, so = exported
    again = mlopt.compile_policy(directory, tmp_path / "again.so")
    assert again.read_bytes() == so.read_bytes()


def test_compile_never_overwrites(exported):
    _, directory, so = exported
    with pytest.raises(FileExistsError):
        mlopt.compile_policy(directory, so)


def test_unsupported_operator_is_named(tmp_path):
    g = GraphBuilder(signature_key="action")
    xs = [g.input(f, f"action_{f}:0", np.int64, [1]) for f in inliner.FEATURES]
    f = g.op("CAST", [xs[0]], np.float32, [1], g.options("CastOptions", inDataType=4, outDataType=0))
    soft = g.op("SOFTMAX", [f], np.float32, [1], g.options("SoftmaxOptions", beta=1.0), name="probabilities")
    g.output("inlining_decision", g.op("CAST", [soft], np.int64, [1],
                                       g.options("CastOptions", inDataType=0, outDataType=4),
                                       name="inlining_decision:0"))
    model = tmp_path / "softmax.tflite"
    model.write_bytes(g.finish())
    with pytest.raises(mlopt.PolicyCompileError, match=r"operator SOFTMAX \(operator #1, output 'probabilities'\)"):
        mlopt.compile_policy(model, tmp_path / "p.so")
    assert not (tmp_path / "p.so").exists()
    cli = subprocess.run(["mlopt", "policy", "compile", str(model), "-o", str(tmp_path / "p.so")],
                         capture_output=True, text=True)
    assert cli.returncode == 1 and "operator SOFTMAX" in cli.stderr and len(cli.stderr.splitlines()) == 1


def test_corrupt_model_cannot_be_compiled(tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(range(256)) * 4)
    with pytest.raises(mlopt.PolicyCompileError, match="cannot parse"):
        mlopt.compile_policy(bad, tmp_path / "p.so")
    text = tmp_path / "t.tflite"
    text.write_text("hello")
    with pytest.raises(mlopt.PolicyCompileError, match="not a .tflite"):
        mlopt.compile_policy(text, tmp_path / "p.so")


def _shared_object(tmp_path, name, body):
    src = tmp_path / f"{name}.cpp"
    src.write_text(body)
    out = tmp_path / f"{name}.so"
    subprocess.run(["c++", "-shared", "-fPIC", str(src), "-o", str(out)], check=True)
    return out


def test_foreign_and_mismatched_shared_objects(llvm_tools, plugin, corpus_modules, tmp_path):
    foreign = _shared_object(tmp_path, "foreign", 'extern "C" int something(void) { return 1; }\n')
    future = _shared_object(tmp_path, "future", (
        'extern "C" int mlopt_policy_abi_version(void) { return 2; }\n'
        'extern "C" const char *mlopt_policy_signature(void) { return "{}"; }\n'
        'extern "C" int mlopt_policy_evaluate(const void *const *, void *const *) { return 0; }\n'))
    cases = {
        foreign: "not an mlopt compiled policy (missing mlopt_policy_* symbols)",
        future: "compiled policy ABI version 2, this mlopt reads version 1",
    }
    for so, expected in cases.items():
        with pytest.raises(mlopt.PolicyError, match=expected.replace("(", r"\(").replace(")", r"\)")
                           .replace("*", r"\*")):
            mlopt.load_policy(so)
        result = opt(llvm_tools, corpus_modules[0], tmp_path / "o.bc", *opt_flags(model=so), check=False)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and expected in lines[0]


def test_compiled_wrong_inputs_are_rejected_like_tflite(tmp_path):
    """The .so goes through the same binding: a misnamed input is named."""
    g = GraphBuilder(signature_key="action")
    xs = []
    for f in inliner.FEATURES:
        name = "action_callee_userz:0" if f == "callee_users" else f"action_{f}:0"
        xs.append(g.input(name.split(":")[0].removeprefix("action_"), name, np.int64, [1]))
    zero = g.op("MUL", [xs[0], g.const("zero", np.zeros([1], np.int64))], np.int64, [1],
                g.options("MulOptions"), name="inlining_decision:0")
    g.output("inlining_decision", zero)
    model = tmp_path / "renamed.tflite"
    model.write_bytes(g.finish())
    so = mlopt.compile_policy(model, tmp_path / "renamed.so")
    with pytest.raises(mlopt.PolicyError, match="no input for feature 'callee_users'"):
        mlopt.load_policy(so)

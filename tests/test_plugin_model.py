""".tflite policies inside the real opt-19 / clang-19 through the plugin's LiteRT runner."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pytest

import mlopt
from mlopt.compiler.plugin import clang_flags, opt_flags
from mlopt.problems import inlining as inliner
from tests.support.llvm import opt
from tests.support.models import good_inputs, tiny_model


@pytest.fixture(scope="module")
def heuristic_logs(llvm_tools, plugin, corpus_modules, tmp_path_factory):
    """Training logs of the stock heuristic on the first modules of the corpus."""
    out = tmp_path_factory.mktemp("heuristic")
    logs = []
    for module in corpus_modules[:12]:
        log = out / f"{module.stem}.log"
        opt(llvm_tools, module, out / "o.bc", *opt_flags(training_log=log, llvm=llvm_tools["major"]))
        logs.append(log)
    return logs


@pytest.fixture(scope="module")
def random_policy(heuristic_logs, tmp_path_factory):
    """A random MLP over a real vocab, exported with its logits as an extra output."""
    vocab = mlopt.Vocab.from_logs(heuristic_logs, num_buckets=200)
    policy = mlopt.InlinePolicy.random(vocab, hidden=(32, 16), seed=2)
    directory = policy.export(tmp_path_factory.mktemp("policy") / "model", logits_output=True)
    return policy, directory


def test_policy_decisions_in_opt_equal_numpy(llvm_tools, plugin, corpus_modules, random_policy, tmp_path):
    """Every decision the plugin's LiteRT runner made equals the numpy forward
    pass on the logged features, and the logged logits match within 1e-5."""
    policy, directory = random_policy
    rows = yes = 0
    for module in corpus_modules:
        log_path = tmp_path / f"{module.stem}.log"
        result = opt(llvm_tools, module, tmp_path / "o.bc", *opt_flags(model=directory, training_log=log_path))
        assert "error" not in result.stderr and "INFO" not in result.stderr, result.stderr
        log = mlopt.read_log(log_path)
        assert log.feature_names == [*inliner.FEATURES, "inlining_logits", inliner.DEFAULT_DECISION,
                                     inliner.DECISION]
        assert np.array_equal(log[inliner.DECISION][:, 0], policy.decide(log)), module.name
        np.testing.assert_allclose(log["inlining_logits"], policy.logits(log), atol=1e-5, rtol=0)
        rows += len(log)
        yes += int(log[inliner.DECISION].sum())
    assert rows > 1000 and 0 < yes < rows  # the policy really decides both ways


def test_always_zero_leaves_only_mandatory_inlining(llvm_tools, plugin, corpus_modules, tmp_path):
    """A policy answering 0 gives the IR stock opt gives when nothing but
    `alwaysinline` may be inlined (an unreachable inline threshold)."""
    never = mlopt.InlinePolicy.constant(0).export(tmp_path / "never")
    for module in corpus_modules:
        plug, stock, log = tmp_path / "plug.bc", tmp_path / "stock.bc", tmp_path / f"{module.stem}.log"
        opt(llvm_tools, module, plug, *opt_flags(model=never, training_log=log))
        opt(llvm_tools, module, stock, "-inline-threshold=-1000000000")
        assert plug.read_bytes() == stock.read_bytes(), module.name
        assert not mlopt.read_log(log)[inliner.DECISION].any()


def test_always_one_is_stopped_by_the_size_guard(llvm_tools, plugin, corpus_modules, tmp_path):
    """A policy answering 1 finishes every module in bounded time; the size
    guard (-ml-advisor-size-increase-threshold) is what stops it: a tighter
    guard stops it after fewer decisions."""
    always = mlopt.InlinePolicy.constant(1).export(tmp_path / "always")
    start = time.monotonic()
    stopped_earlier = 0
    for module in corpus_modules:
        counts = []
        for guard in ("2.0", "1.05"):
            log = tmp_path / f"{module.stem}.{guard}.log"
            result = opt(llvm_tools, module, tmp_path / "o.bc", *opt_flags(model=always, training_log=log),
                         f"-ml-advisor-size-increase-threshold={guard}", timeout=300)
            assert result.returncode == 0
            trace = mlopt.read_log(log)
            assert trace[inliner.DECISION].all()
            counts.append(len(trace))
        assert counts[1] <= counts[0], module.name
        stopped_earlier += counts[1] < counts[0]
    assert stopped_earlier >= 5
    assert time.monotonic() - start < 600


def test_policy_run_is_deterministic(llvm_tools, plugin, corpus_modules, random_policy, tmp_path):
    _, directory = random_policy
    module = max(corpus_modules, key=lambda p: p.stat().st_size)
    outputs, logs = set(), set()
    for i in range(3):
        opt(llvm_tools, module, tmp_path / f"{i}.bc", *opt_flags(model=directory, training_log=tmp_path / f"{i}.log"))
        outputs.add((tmp_path / f"{i}.bc").read_bytes())
        logs.add((tmp_path / f"{i}.log").read_bytes())
    assert len(outputs) == 1 and len(logs) == 1


def test_bare_tflite_file_and_clang(llvm_tools, plugin, corpus_modules, random_policy, tmp_path):
    """The plugin takes a bare .tflite too, and works from clang-19 with the
    flags `mlopt clang-flags --model` prints."""
    policy, directory = random_policy
    module = corpus_modules[0]
    log_opt, log_clang = tmp_path / "opt.log", tmp_path / "clang.log"
    opt(llvm_tools, module, tmp_path / "o.bc", *opt_flags(model=directory / "model.tflite", training_log=log_opt))
    subprocess.run([llvm_tools["clang"], "-Oz", *clang_flags(model=directory / "model.tflite", training_log=log_clang),
                    "-c", "-x", "ir", str(module), "-o", str(tmp_path / "o.o")], check=True, timeout=600)
    a, b = mlopt.read_log(log_opt), mlopt.read_log(log_clang)
    assert a.feature_names == [*inliner.FEATURES, inliner.DEFAULT_DECISION, inliner.DECISION]
    assert np.array_equal(a[inliner.DECISION][:, 0], policy.decide(a))
    # clang's own pipeline (its TargetMachine) may see different features; its
    # decisions are still the policy's on what it saw.
    assert len(b) > 100 and np.array_equal(b[inliner.DECISION][:, 0], policy.decide(b))
    cli = subprocess.run(["mlopt", "clang-flags", "--model", str(directory)], capture_output=True, text=True)
    assert cli.returncode == 0 and f"-mlopt-inline-model={directory.resolve()}" in cli.stdout


def test_load_policy_matches_numpy(heuristic_logs, random_policy):
    """mlopt.load_policy runs the model through the same C++ binding as the plugin."""
    policy, directory = random_policy
    loaded = mlopt.load_policy(directory)
    assert loaded.kind == "tflite" and [s.name for s in loaded.extra_outputs] == ["inlining_logits"]
    for log_path in heuristic_logs:
        log = mlopt.read_log(log_path)
        out = loaded.evaluate(log)
        assert np.array_equal(out[inliner.DECISION], policy.decide(log))
        np.testing.assert_allclose(out["inlining_logits"], policy.logits(log), atol=1e-5, rtol=0)


def test_exported_directory_follows_model_under_training(random_policy):
    """output_spec.json and tensor names as LLVM's ModelUnderTrainingRunner expects."""
    _, directory = random_policy
    spec = json.loads((directory / "output_spec.json").read_text())
    assert spec[0] == {"logging_name": "inlining_decision",
                       "tensor_spec": {"name": "inlining_decision", "port": 0, "type": "int64_t", "shape": [1]}}
    assert spec[1]["logging_name"] == "inlining_logits"
    assert all(set(e) == {"logging_name", "tensor_spec"} for e in spec)
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(directory / "model.tflite"))
    names = sorted(d["name"] for d in interp.get_input_details())
    assert names == sorted(f"action_{f}:0" for f in inliner.FEATURES)
    assert all(d["dtype"] == np.int64 and list(d["shape"]) == [1] for d in interp.get_input_details())
    outputs = {d["name"] for d in interp.get_output_details()}
    assert outputs == {f"{e['tensor_spec']['name']}:{e['tensor_spec']['port']}" for e in spec}


# -- wrong models: one-line errors naming the tensor ---------------------------------------------

def wrong_models():
    missing = good_inputs()
    del missing[inliner.FEATURES.index("callee_users")]
    renamed = good_inputs()
    renamed[inliner.FEATURES.index("callee_users")] = ("action_callee_userz:0", np.int64, [1])
    dtype = good_inputs()
    dtype[inliner.FEATURES.index("cost_estimate")] = ("action_cost_estimate:0", np.int32, [1])
    shape = good_inputs()
    shape[inliner.FEATURES.index("node_count")] = ("action_node_count:0", np.int64, [2])
    return {
        "missing": (missing, "no input for feature 'callee_users'"),
        "renamed": (renamed, "no input for feature 'callee_users'"),
        "dtype": (dtype, "input 'action_cost_estimate:0' has type int32_t [1], expected int64_t [1]"),
        "shape": (shape, "input 'action_node_count:0' has shape [2], expected int64_t [1]"),
    }


@pytest.mark.parametrize("kind", ["missing", "renamed", "dtype", "shape"])
def test_wrong_model_is_a_one_line_error(llvm_tools, plugin, corpus_modules, tmp_path, kind):
    inputs, expected = wrong_models()[kind]
    model = tmp_path / "bad.tflite"
    model.write_bytes(tiny_model(inputs))
    result = opt(llvm_tools, corpus_modules[0], tmp_path / "o.bc", *opt_flags(model=model), check=False)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: mlopt: {model}: ") and expected in lines[0]
    with pytest.raises(mlopt.PolicyError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        mlopt.load_policy(model)
    cli = subprocess.run(["mlopt", "clang-flags", "--model", str(model)], capture_output=True, text=True)
    assert cli.returncode == 1 and expected in cli.stderr and cli.stdout == ""


def test_well_formed_tiny_model_loads_and_answers_zero(tmp_path):
    model = tmp_path / "ok.tflite"
    model.write_bytes(tiny_model(good_inputs()))
    loaded = mlopt.load_policy(model)
    assert np.array_equal(loaded.decide(np.ones((3, 38), np.int64)), [0, 0, 0])


def test_extra_unknown_input_is_an_error(tmp_path):
    model = tmp_path / "extra.tflite"
    model.write_bytes(tiny_model(good_inputs() + [("action_mystery:0", np.int64, [1])]))
    with pytest.raises(mlopt.PolicyError, match="model input 'action_mystery:0' .* is not one of"):
        mlopt.load_policy(model)


def test_training_only_inputs_are_accepted(tmp_path):
    """LLVM declares discount/reward/step_type for TF-Agents policies: allowed."""
    model = tmp_path / "tfagents.tflite"
    model.write_bytes(tiny_model(good_inputs() + [("action_discount:0", np.float32, [1]),
                                                  ("action_reward:0", np.float32, [1]),
                                                  ("action_step_type:0", np.int32, [1])]))
    assert mlopt.load_policy(model).decide(np.zeros((1, 38), np.int64))[0] == 0


def test_corrupt_and_missing_models(llvm_tools, plugin, corpus_modules, tmp_path):
    corrupt = tmp_path / "corrupt.tflite"
    corrupt.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(range(256)) * 4)
    not_tflite = tmp_path / "text.tflite"
    not_tflite.write_text("hello")
    no_spec = tmp_path / "nospec"
    no_spec.mkdir()
    (no_spec / "model.tflite").write_bytes(tiny_model(good_inputs()))
    bad_spec = tmp_path / "badspec"
    bad_spec.mkdir()
    (bad_spec / "model.tflite").write_bytes(tiny_model(good_inputs()))
    (bad_spec / "output_spec.json").write_text(json.dumps(
        [{"logging_name": "inlining_decision",
          "tensor_spec": {"name": "StatefulPartitionedCall", "port": 0, "type": "int64_t", "shape": [1]}}]))
    cases = {
        corrupt: "cannot read this .tflite model",
        not_tflite: "not a .tflite model",
        tmp_path / "absent": "no such model file or directory",
        no_spec: "output_spec.json: cannot open",
        bad_spec: "model has no output 'StatefulPartitionedCall:0'",
    }
    for model, expected in cases.items():
        result = opt(llvm_tools, corpus_modules[0], tmp_path / "o.bc", *opt_flags(model=model), check=False)
        assert result.returncode != 0, model
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: mlopt: ") and expected in lines[0], result.stderr
        with pytest.raises(mlopt.PolicyError, match=expected):
            mlopt.load_policy(model)


def test_out_of_range_answers_fall_back_to_the_heuristic(llvm_tools, plugin, corpus_modules, tmp_path):
    """A model answering 7 is not a decision: one warning, heuristic decisions."""
    model = tmp_path / "seven.tflite"
    model.write_bytes(tiny_model(good_inputs(), value=7))
    module = corpus_modules[0]
    log = tmp_path / "t.log"
    result = opt(llvm_tools, module, tmp_path / "p.bc", *opt_flags(model=model, training_log=log))
    opt(llvm_tools, module, tmp_path / "s.bc")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: mlopt:")]
    assert len(warnings) == 1 and "answered 7 for inlining_decision (expected 0 or 1)" in warnings[0]
    assert (tmp_path / "p.bc").read_bytes() == (tmp_path / "s.bc").read_bytes()
    trace = mlopt.read_log(log)
    assert np.array_equal(trace[inliner.DECISION], trace[inliner.DEFAULT_DECISION])
    assert np.array_equal(mlopt.load_policy(model).decide(np.zeros((2, 38), np.int64)), [-1, -1])

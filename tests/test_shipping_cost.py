"""What a shipped policy pays in the compiler, and the replay that measures it.

A compiled policy in release mode (no training log) must not run the stock
heuristic's cost analysis: the advisor computes the heuristic's decision
only when the runner or the log asks for it. The heuristic's analysis is
seen by its optimization remarks (pass ``inline``: "too costly to inline",
"can be inlined"), which LLVM's inline-cost code emits whenever it runs.
``-mlopt-inline-replay`` forces the first decisions from a file: with the
heuristic's own decisions the code is stock's, whatever the model says.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlopt
from mlopt.compiler.plugin import opt_flags
from tests.support.llvm import opt

pytestmark = pytest.mark.llvm

HEURISTIC_REMARKS = ("too costly to inline", "can be inlined", "should always be inlined")


def _remarks(llvm_tools, module, tmp_path, *flags) -> list[str]:
    r = opt(llvm_tools, module, tmp_path / "o.bc", *flags, "-pass-remarks-missed=^inline$",
            "-pass-remarks-analysis=^inline$")
    return [line for line in r.stderr.splitlines() if any(k in line for k in HEURISTIC_REMARKS)]


@pytest.fixture(scope="module")
def constant_policies(tmp_path_factory):
    out = tmp_path_factory.mktemp("constant")
    return {v: mlopt.compile_policy(mlopt.InlinePolicy.constant(v).export(out / f"c{v}"), out / f"c{v}.so")
            for v in (0, 1)}


@pytest.fixture(scope="module")
def module_with_choices(corpus_modules, llvm_tools):
    """The first corpus module whose heuristic inlines some call sites and not others."""
    for m in corpus_modules:
        d = mlopt.compile(m, None, log=True, codegen=False, llvm=llvm_tools["major"]).decisions
        if 0 < d.sum() < len(d) and len(d) >= 6:
            return m, d
    pytest.fail("no corpus module with both decisions")


def test_a_shipped_policy_does_not_run_the_heuristics_cost_analysis(llvm_tools, plugin, constant_policies,
                                                                     module_with_choices, tmp_path):
    module, _ = module_with_choices
    major = llvm_tools["major"]
    stock = _remarks(llvm_tools, module, tmp_path)
    assert stock, "the heuristic's remarks are the signal this test reads"
    shipped = _remarks(llvm_tools, module, tmp_path, *opt_flags(model=constant_policies[1], llvm=major))
    assert shipped == []
    # A training log records the heuristic's decision: then it is computed.
    logged = _remarks(llvm_tools, module, tmp_path, *opt_flags(model=constant_policies[1], llvm=major,
                                                               training_log=tmp_path / "x.log"))
    assert logged


def test_replaying_the_heuristics_decisions_gives_stock_code_whatever_the_policy(
        llvm_tools, plugin, constant_policies, module_with_choices, tmp_path):
    module, decisions = module_with_choices
    major = llvm_tools["major"]
    replay = tmp_path / "heuristic.txt"
    replay.write_text("".join("1" if d else "0" for d in decisions) + "\n")
    opt(llvm_tools, module, tmp_path / "stock.bc")
    for value, so in constant_policies.items():
        opt(llvm_tools, module, tmp_path / f"r{value}.bc", *opt_flags(model=so, replay=replay, llvm=major))
        assert (tmp_path / f"r{value}.bc").read_bytes() == (tmp_path / "stock.bc").read_bytes(), value
    # Without the replay the constant policies give other code.
    opt(llvm_tools, module, tmp_path / "c0.bc", *opt_flags(model=constant_policies[0], llvm=major))
    assert (tmp_path / "c0.bc").read_bytes() != (tmp_path / "stock.bc").read_bytes()


def test_a_short_replay_forces_its_prefix_and_the_policy_decides_the_rest(
        llvm_tools, plugin, constant_policies, module_with_choices, tmp_path):
    module, decisions = module_with_choices
    major = llvm_tools["major"]
    prefix = "".join("0" if d else "1" for d in decisions[:3])  # the heuristic's first three, flipped
    replay = tmp_path / "prefix.txt"
    replay.write_text(" ".join(prefix))  # whitespace is ignored
    log = tmp_path / "x.log"
    opt(llvm_tools, module, tmp_path / "o.bc", *opt_flags(model=constant_policies[1], replay=replay,
                                                          training_log=log, llvm=major))
    made = mlopt.read_log(log)["inlining_decision"].ravel()
    assert "".join(map(str, made[:3])) == prefix
    assert np.all(made[3:] == 1)


def test_a_replay_file_that_is_not_decisions_is_one_error_naming_the_byte(llvm_tools, plugin, module_with_choices,
                                                                         tmp_path):
    module, _ = module_with_choices
    bad = tmp_path / "bad.txt"
    bad.write_text("01 1x0")
    r = opt(llvm_tools, module, tmp_path / "o.bc", *opt_flags(replay=bad, llvm=llvm_tools["major"]), check=False)
    assert r.returncode != 0
    assert f"{bad}: byte 4 is not a decision" in r.stderr
    missing = tmp_path / "missing.txt"
    r = opt(llvm_tools, module, tmp_path / "o.bc", *opt_flags(replay=missing, llvm=llvm_tools["major"]), check=False)
    assert r.returncode != 0 and "cannot replay decisions" in r.stderr and str(missing) in r.stderr
    assert "Stack dump" not in r.stderr


def test_clang_flags_pass_the_replay(tmp_path):
    from mlopt.compiler.plugin import clang_flags

    try:
        flags = clang_flags(replay=tmp_path / "d.txt", llvm=19)
    except mlopt.errors.PluginNotFoundError:
        pytest.skip("no LLVM 19 plugin built")
    assert flags[-2:] == ["-mllvm", f"-mlopt-inline-replay={tmp_path / 'd.txt'}"]


def test_clang_flags_cli_checks_the_replay_file(tmp_path, capsys):
    from mlopt.cli import main

    try:
        mlopt.compiler.plugin.plugin_path(19)
    except mlopt.errors.PluginNotFoundError:
        pytest.skip("no LLVM 19 plugin built")
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("01\n10\n")
    bad.write_text("0110\n1?")
    assert main(["clang-flags", "--llvm", "19", "--replay", str(good)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"-mlopt-inline-replay={good}")
    assert main(["clang-flags", "--llvm", "19", "--replay", str(bad)]) == 2
    assert f"--replay {bad}: byte 6 is not a decision" in capsys.readouterr().err
    assert main(["clang-flags", "--llvm", "19", "--replay", str(tmp_path / "none.txt")]) == 2

"""The pass plugin inside the real stock opt-19 / clang-19."""

from __future__ import annotations

import subprocess

import numpy as np

import mlopt
from mlopt.compiler.interactive import Host
from mlopt.compiler.plugin import clang_flags, opt_flags
from mlopt.problems import inlining as inliner
from tests.support.llvm import opt


def test_heuristic_through_plugin_equals_stock(llvm_tools, plugin, corpus_modules, tmp_path):
    """No model: the plugin's advisor (LLVM's MLInlineAdvisor + heuristic
    decisions, logging) gives byte-identical IR to stock -Oz on every module."""
    assert len(corpus_modules) >= 30
    total = 0
    for module in corpus_modules:
        stock, plug, log = (tmp_path / f"{module.stem}.{k}" for k in ("stock.bc", "plug.bc", "log"))
        opt(llvm_tools, module, stock)
        opt(llvm_tools, module, plug, *opt_flags(training_log=log))
        assert plug.read_bytes() == stock.read_bytes(), module.name
        trace = mlopt.read_log(log)
        # Without a model the decision is the heuristic's.
        assert np.array_equal(trace["inlining_decision"], trace["inlining_default"])
        total += len(trace)
    assert total > 1000


def test_loading_without_options_changes_nothing(llvm_tools, plugin, corpus_modules, tmp_path):
    module = corpus_modules[0]
    opt(llvm_tools, module, tmp_path / "stock.bc")
    opt(llvm_tools, module, tmp_path / "plug.bc", f"-load-pass-plugin={plugin}")
    assert (tmp_path / "plug.bc").read_bytes() == (tmp_path / "stock.bc").read_bytes()


def test_training_log_layout(llvm_tools, plugin, corpus_modules, tmp_path):
    opt(llvm_tools, corpus_modules[0], tmp_path / "o.bc", *opt_flags(training_log=tmp_path / "t.log"))
    log = mlopt.read_log(tmp_path / "t.log")
    assert log.feature_names == [*inliner.FEATURES, inliner.DEFAULT_DECISION, inliner.DECISION]
    assert all(s == mlopt.TensorSpec(s.name, "int64_t", [1]) for s in log.features)
    assert log.score_spec is None and log.advice_spec is None
    assert log.contexts == [""] and np.array_equal(log.observation_id, np.arange(len(log)))


def test_training_log_features_equal_stock_interactive(llvm_tools, plugin, corpus_modules, tmp_path):
    """Decision by decision, the plugin's logged features are the rows stock
    opt-19 sends on its interactive channel when the host replays the same
    decisions. (No include-default: column 25 is intact on both sides.)"""
    checked = 0
    for module in corpus_modules[:8]:
        log_path = tmp_path / f"{module.stem}.log"
        opt(llvm_tools, module, tmp_path / "p.bc", *opt_flags(training_log=log_path))
        log = mlopt.read_log(log_path)
        decisions = iter(log["inlining_decision"].ravel().tolist())
        result = Host(lambda obs: next(decisions), timeout=600, capture=True).run(  # noqa: B023 (used now)
            [llvm_tools["opt"], "-passes=default<Oz>", "-enable-ml-inliner=release",
             "-inliner-interactive-channel-base={channel}", str(module), "-o", str(tmp_path / "s.bc")])
        assert result.returncode == 0, result.stderr
        stream = mlopt.read_log(b"".join(result.streams))
        assert len(stream) == len(log), module.name
        for name in inliner.FEATURES:
            assert np.array_equal(stream[name], log[name]), (module.name, name)
        assert (tmp_path / "s.bc").read_bytes() == (tmp_path / "p.bc").read_bytes()
        checked += len(log)
    assert checked > 300


def test_deterministic(llvm_tools, plugin, corpus_modules, tmp_path):
    module = max(corpus_modules, key=lambda p: p.stat().st_size)
    outputs = set()
    for i in range(3):
        opt(llvm_tools, module, tmp_path / f"{i}.bc", *opt_flags(training_log=tmp_path / f"{i}.log"))
        outputs.add(((tmp_path / f"{i}.bc").read_bytes(), (tmp_path / f"{i}.log").read_bytes()))
    assert len(outputs) == 1


def test_clang_route(llvm_tools, plugin, tmp_path):
    from tests.support.corpus import c_sources, include_flags

    src = next(p for p in c_sources("lz4") if p.name == "lz4hc.c")
    inc = include_flags("lz4")
    log = tmp_path / "c.log"
    subprocess.run([llvm_tools["clang"], "-Oz", *inc, *clang_flags(training_log=log), "-c", str(src),
                    "-o", str(tmp_path / "plug.o")], check=True)
    subprocess.run([llvm_tools["clang"], "-Oz", *inc, "-c", str(src), "-o", str(tmp_path / "stock.o")], check=True)
    assert (tmp_path / "plug.o").read_bytes() == (tmp_path / "stock.o").read_bytes()
    assert len(mlopt.read_log(log)) > 100


def test_unwritable_training_log_is_a_clear_error(llvm_tools, plugin, corpus_modules, tmp_path):
    (tmp_path / "a-file").write_text("")
    bad = tmp_path / "a-file" / "t.log"
    r = opt(llvm_tools, corpus_modules[0], tmp_path / "o.bc", *opt_flags(training_log=bad), check=False)
    assert r.returncode != 0
    assert f"mlopt: cannot write training log: cannot create '{bad}': Not a directory" in r.stderr


def test_per_translation_unit_logs_and_no_silent_overwrite(llvm_tools, plugin, tmp_path):
    """A build of several files with one --training-log used to keep only the
    last file's log. A directory gives one log per translation unit, equal to
    each file's own log; a second build into the same logs is refused with
    one line unless -mlopt-inline-training-log-overwrite."""
    from mlopt.compiler.plugin import clang_flags
    from tests.support.corpus import c_sources, include_flags

    sources = c_sources("lz4")[:3]
    inc = include_flags("lz4")
    (tmp_path / "objs").mkdir()

    def build(*flags, files=sources):
        return subprocess.run([llvm_tools["clang"], "-Oz", *inc, *flags, "-c", *map(str, files)],
                              cwd=tmp_path / "objs", capture_output=True, text=True)

    r = build(*clang_flags(training_log=f"{tmp_path}/logs/"))
    assert r.returncode == 0, r.stderr
    logs = sorted((tmp_path / "logs").iterdir())
    expected = [str(s).lstrip("/").replace("/", "_") + ".log" for s in sources]
    assert [p.name for p in logs] == sorted(expected)
    for s in sources:
        alone = tmp_path / f"{s.name}.alone.log"
        assert build(*clang_flags(training_log=alone), files=[s]).returncode == 0
        own = tmp_path / "logs" / (str(s).lstrip("/").replace("/", "_") + ".log")
        # the same decisions as the file compiled alone (the log of a lone file)
        assert mlopt.read_log(own)[inliner.DECISION].tolist() == mlopt.read_log(alone)[inliner.DECISION].tolist()
    before = {p: p.read_bytes() for p in logs}
    r = build(*clang_flags(training_log=f"{tmp_path}/logs/"))
    assert r.returncode == 1
    assert "File exists (pass -mlopt-inline-training-log-overwrite to replace it" in r.stderr
    assert {p: p.read_bytes() for p in logs} == before  # nothing the user had is lost
    r = build(*clang_flags(training_log=f"{tmp_path}/logs/", overwrite_log=True))
    assert r.returncode == 0 and {p: p.read_bytes() for p in logs} == before
    # one plain file for several translation units: the second one is refused
    r = build(*clang_flags(training_log=tmp_path / "one.log"))
    assert r.returncode == 1 and r.stderr.count("File exists") == len(sources) - 1
    # %m pattern
    r = build(*clang_flags(training_log=f"{tmp_path}/pat/%m.inline.log"))
    assert r.returncode == 0 and len(list((tmp_path / "pat").glob("*.c.inline.log"))) == len(sources)


def test_cli_plugin_path_and_clang_flags(plugin, capsys):
    from mlopt.cli import main

    assert main(["plugin-path"]) == 0
    assert capsys.readouterr().out.strip() == str(plugin)
    assert main(["clang-flags", "--training-log", "x.log"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"-fpass-plugin={plugin} -Xclang -load -Xclang {plugin} -mllvm -mlopt-inline-training-log=x.log")

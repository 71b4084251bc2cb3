"""One installation, several LLVM majors: the version table, choosing a
major, keeping each major's objects apart, and a policy trained on LLVM 19
logs running on LLVM 22 (the per-major conformance suite is every other
test that uses llvm_tools: it runs once per major)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import mlopt
from mlopt import _native
from mlopt.cli import main
from mlopt.problems import inlining

pytestmark = [pytest.mark.llvm, pytest.mark.network]


@pytest.fixture(scope="module")
def modules19(tmp_path_factory):
    """lz4 + brotli bitcode from clang-19 (LLVM 22 reads it; 19 cannot read 22's)."""
    import shutil

    from tests.support.corpus import corpus

    return corpus(shutil.which("clang-19"), tmp_path_factory.mktemp("corpus19"))


def _require(*majors):
    missing = [m for m in majors if m not in _native.built_majors()]
    if missing:
        message = f"mlopt was built without LLVM {missing[0]}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)


def test_the_default_major_follows_the_environment_then_the_clang_on_path(tmp_path, monkeypatch, capsys):
    _require(19, 22)
    assert _native.LLVM_MAJORS == (19, 22) and _native.built_majors() == (19, 22)
    monkeypatch.delenv("MLOPT_LLVM")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    assert _native.default_llvm() == 22  # no clang or opt on PATH: the newest built
    for major in (19, 22):
        link = bin_dir / "clang"
        link.unlink(missing_ok=True)
        link.symlink_to(f"/usr/lib/llvm-{major}/bin/clang")
        assert _native.default_llvm() == major
        assert mlopt.Module(b"define void @f() {\n  ret void\n}\n").llvm == major
    monkeypatch.setenv("MLOPT_LLVM", "19")
    assert _native.default_llvm() == 19  # the environment wins
    for major in (19, 22):
        assert main(["plugin-path", "--llvm", str(major)]) == 0
        path = capsys.readouterr().out.strip()
        assert path.endswith(f"/lib/llvm-{major}/MLOptPlugin.so") and os.path.isfile(path)
        assert main(["clang-flags", "--llvm", str(major)]) == 0
        assert f"llvm-{major}/MLOptPlugin.so" in capsys.readouterr().out
    assert main(["plugin-path", "--llvm", "21"]) == 2
    assert "LLVM 21 is not supported; this mlopt supports LLVM 19, 22" in capsys.readouterr().err


def test_each_major_compiles_its_own_modules_in_one_process(modules19, tmp_path):
    """The same bitcode, compiled by both engines in one process, gives what
    each major's own opt + llc give; objects of one major are refused by
    the other with a message."""
    _require(19, 22)
    path = modules19[0]
    objects = {}
    for major in (19, 22):
        m = mlopt.Module(path, opt_level="Oz", reloc_model="static", llvm=major)
        r = mlopt.compile(m, keep_object=True)
        opt_out, obj = tmp_path / f"{major}.bc", tmp_path / f"{major}.o"
        subprocess.run([f"opt-{major}", "-passes=default<Oz>", str(path), "-o", str(opt_out)], check=True)
        subprocess.run([f"llc-{major}", "-filetype=obj", str(opt_out), "-o", str(obj)], check=True)
        assert r.object == obj.read_bytes(), major
        objects[major] = r.object
    m19 = mlopt.Module(path, llvm=19)
    with pytest.raises(ValueError, match="loaded by LLVM 19, not LLVM 22"):
        mlopt.compile(m19, llvm=22)
    with pytest.raises(ValueError, match="serves LLVM 22"):
        mlopt.compile(m19, cache=mlopt.compiler.TextSizeCache(llvm=22))


def test_a_policy_trained_on_llvm19_logs_runs_on_llvm22(modules19, tmp_path):
    """BC on LLVM 19's logs; its .tflite and compiled .so load in LLVM 22's
    engine and in stock opt-22 with the plugin, and decide there exactly as
    its numpy forward pass does on the features LLVM 22 logs."""
    _require(19, 22)
    from mlopt.rollouts import TraceDataset
    from mlopt.training import train_bc

    logs = [mlopt.compile(mlopt.Module(p, llvm=19)) for p in modules19[:12]]
    ds = TraceDataset.from_logs([str(i) for i in range(12)], [r.text_size for r in logs],
                                [r.log_bytes for r in logs])
    policy = train_bc(ds, inlining.PROBLEM, epochs=3, hidden=(16,), heldout_fraction=0.0).policy
    model = policy.export(tmp_path / "model")
    so = mlopt.compile_policy(model, tmp_path / "policy.so")
    decided_differently = 0
    for p in modules19[12:20]:
        m = mlopt.Module(p, opt_level="Oz", reloc_model="static", llvm=22)
        via_tflite = mlopt.compile(m, mlopt.load_policy(model), keep_object=True)
        via_so = mlopt.compile(m, mlopt.load_policy(so), keep_object=True)
        assert via_so.object == via_tflite.object
        assert np.array_equal(via_tflite.decisions, policy.decide(via_tflite.log))
        decided_differently += int((via_tflite.decisions != via_tflite.default_decisions).sum())
        out = tmp_path / "opt22.bc"
        subprocess.run(["opt-22", f"-load-pass-plugin={mlopt.compiler.plugin.plugin_path(22)}",
                        f"-mlopt-inline-model={so}", "-passes=default<Oz>", str(p), "-o", str(out)], check=True)
        ref = tmp_path / "ref.bc"
        subprocess.run(["opt-22", f"-load-pass-plugin={mlopt.compiler.plugin.plugin_path(22)}",
                        f"-mlopt-inline-model={model}", "-passes=default<Oz>", str(p), "-o", str(ref)], check=True)
        assert out.read_bytes() == ref.read_bytes()
    assert decided_differently > 0  # the policy is not the heuristic everywhere: the check has teeth


def test_a_plugin_loaded_by_another_major_fails_with_a_message_not_a_crash(tmp_path):
    """LLVM 22's plugin in opt-19 or clang-19 says which plugin to use (exit
    1, before any of its LLVM code runs); LLVM 19's in opt-22 is refused by
    LLVM's loader (a missing symbol). Neither dies of a signal."""
    _require(19, 22)
    src = tmp_path / "a.c"
    src.write_text("static int f(int x) { return x + 1; }\nint g(int y) { return f(y) * 2; }\n")
    bc = tmp_path / "a.bc"
    subprocess.run(["clang-19", "-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-c", str(src), "-o", str(bc)],
                   check=True)
    plugin = mlopt.compiler.plugin.plugin_path
    runs = {
        "opt-19 + 22": ["opt-19", f"-load-pass-plugin={plugin(22)}", "-passes=default<Oz>", str(bc), "-o",
                        str(tmp_path / "o.bc")],
        "clang-19 + 22": ["clang-19", "-Oz", *mlopt.compiler.plugin.clang_flags(llvm=22), "-c", str(src), "-o",
                          str(tmp_path / "a.o")],
        "opt-22 + 19": ["opt-22", f"-load-pass-plugin={plugin(19)}", "-passes=default<Oz>", str(bc), "-o",
                        str(tmp_path / "o.bc")],
    }
    for name, argv in runs.items():
        r = subprocess.run(argv, capture_output=True, text=True)
        assert r.returncode == 1, (name, r.returncode, r.stderr)
        if name.endswith("+ 22"):
            assert ("error: mlopt: this pass plugin is for LLVM 22, but the compiler loading it runs LLVM 19."
                    in r.stderr), r.stderr
            assert "mlopt plugin-path --llvm 19" in r.stderr
        else:
            assert "Could not load library" in r.stderr

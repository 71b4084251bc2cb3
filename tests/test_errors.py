"""One error base: every public error derives from MloptError and is
exported; the CLI turns them into one line (exit 1), usage errors into exit 2,
and lets a bug show its traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import mlopt
import mlopt.errors
from mlopt.cli import main
from tests.support.golden import GOLDEN


def test_every_public_error_has_the_base_and_is_exported():
    classes = [getattr(mlopt.errors, n) for n in mlopt.errors.__all__]
    errors = [c for c in classes if issubclass(c, Exception) and not issubclass(c, Warning)]
    assert len(errors) >= 15
    for c in classes:
        assert issubclass(c, (mlopt.MloptError, mlopt.errors.MloptWarning)), c
        assert getattr(mlopt, c.__name__) is c, f"mlopt.{c.__name__} is not exported"
    # every error class defined anywhere in the package is one of them
    import inspect
    import pkgutil

    for info in pkgutil.walk_packages(mlopt.__path__, "mlopt."):
        if info.name in ("mlopt.__main__",):
            continue
        module = __import__(info.name, fromlist=["_"])
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Exception) and obj.__module__.startswith("mlopt"):
                # mlopt.debian is standard-library only (the build loads it by path, before mlopt is
                # installed): its AptSourceError cannot derive from MloptError; no public API raises it
                assert obj in classes or obj.__module__ in ("mlopt.cli._common", "mlopt.debian.apt_sources"), obj


def test_cpp_errors_arrive_as_mlopt_errors(tmp_path):
    with pytest.raises(mlopt.LogFormatError) as e:
        mlopt.read_log(b"int main() { return 0; }\n")
    assert isinstance(e.value, mlopt.MloptError) and e.value.offset == 0
    assert "not an MLGO training log" in e.value.reason and "starts with 'i'" in e.value.reason
    with pytest.raises(mlopt.SpecError, match="unknown tensor type"):
        mlopt.TensorSpec("x", "int128_t", [1])
    with pytest.raises(mlopt.PolicyError, match="no such model file"):
        mlopt.load_policy(tmp_path / "missing.tflite")
    log = tmp_path / "x.log"
    mlopt.LogWriter(log, [mlopt.TensorSpec("a", "int64_t", [1])]).close()
    with pytest.raises(mlopt.OutputExistsError, match=r"x\.log exists \(pass overwrite=True to replace it\)"):
        mlopt.LogWriter(log, [mlopt.TensorSpec("a", "int64_t", [1])])


def run(*args):
    return subprocess.run([sys.executable, "-m", "mlopt", *args], capture_output=True, text=True)


def one_error_line(r, code=1):
    assert r.returncode == code, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlopt: error: "), r.stderr
    return lines[0]


def test_usage_errors_exit_2(tmp_path):
    for args, said in [
        (["policy", "export", "--random", "--vocab", "v", "--hidden", "64,x", "-o", "m"], "64,x"),
        (["vocab", "a.log", "-o", "v", "--buckets", "0"], "must be at least 1, not 0"),
        (["compile", "x.bc", "--threads", "0"], "must be at least 1"),
        (["policy", "export", "--random", "-o", str(tmp_path / "m")], "--random needs --vocab DIR"),
        (["frobnicate"], "invalid choice"),
        (["train", "es", "t", "--init", "r", "-o", str(tmp_path / "es"), "--objective", "module-rank",
          "--modules-per-pair", "2"], "cannot be combined with --modules-per-pair"),
        (["recipe", "c", "--fractions", "0.5,x"], "expected numbers"),
        (["recipe", "c", "--exclude", "a/b"], "is not a package name"),
    ]:
        r = run(*args)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)
    assert main(["compile", "x.bc", "--threads", "0"]) == 2


def test_input_errors_are_one_line(tmp_path):
    c_file = tmp_path / "x.c"
    c_file.write_text("#include <stdio.h>\nint main(void) { return 0; }\n")
    line = one_error_line(run("log", "stats", str(c_file)))
    assert line == (f"mlopt: error: {c_file}: byte 0: not an MLGO training log: bad header: expected a JSON "
                    "object with a 'features' list, the input starts with '#'")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "corpus_description.json").write_text('{"modules": ["a", 3]}')
    assert "expected an object with a 'modules' list" in one_error_line(run("compile", str(corpus)))
    (corpus / "corpus_description.json").write_text("{not json")
    assert "corpus_description.json: invalid JSON" in one_error_line(run("compile", str(corpus)))
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(range(256)) * 4)
    line = one_error_line(run("policy", "compile", str(bad), "-o", str(tmp_path / "p.so")))
    assert "cannot parse the .tflite flatbuffer: " in line and "(error)" not in line


def test_exists_hints_speak_the_callers_language(tmp_path):
    log = tmp_path / "g.log"
    log.write_bytes(GOLDEN)
    out = tmp_path / "g.npz"
    mlopt.read_log(log).to_npz(out)
    with pytest.raises(mlopt.OutputExistsError, match=r"exists \(pass overwrite=True to replace it\)"):
        mlopt.read_log(log).to_npz(out)
    line = one_error_line(run("log", "to-npz", str(log), str(out)))
    assert line == f"mlopt: error: {out} exists (use --force to replace it)"


def test_outputs_create_missing_directories_alike(tmp_path):
    log = tmp_path / "g.log"
    log.write_bytes(GOLDEN)
    r = run("log", "to-npz", str(log), str(tmp_path / "new" / "dir" / "g.npz"))
    assert r.returncode == 0, r.stderr
    assert set(np.load(tmp_path / "new" / "dir" / "g.npz")) >= {"a", "b", "reward"}
    r = run("policy", "export", "--constant", "0", "-o", str(tmp_path / "m") + "/")
    assert r.returncode == 0 and r.stdout == f"wrote {tmp_path}/m/model.tflite and {tmp_path}/m/output_spec.json\n"


def test_a_bug_is_not_dressed_as_a_user_error(monkeypatch):
    import mlopt.cli.log as log_cmd

    def broken(args):
        return {}["no such key"]

    monkeypatch.setattr(log_cmd, "cmd_stats", broken)
    with pytest.raises(KeyError):
        main(["log", "stats", "whatever.log"])


def test_version_has_one_source():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert mlopt.__version__ == pyproject["project"]["version"]
    assert run("--version").stdout == f"mlopt {mlopt.__version__}\n"
    assert json.dumps(mlopt.__version__)  # a plain string


def test_missing_llvm_parts_are_named_errors(monkeypatch):
    """Built without an LLVM major: its engine and plugin say so, typed; an
    unsupported major is named as such, and a usage error on the CLI."""
    from mlopt import _native
    from mlopt.compiler.plugin import plugin_path

    monkeypatch.setitem(sys.modules, "mlopt._engine19", None)  # as if never built
    with pytest.raises(mlopt.NativeModuleError, match="built without LLVM 19.*install llvm-19-dev"):
        _native.engine(19)
    with pytest.raises(mlopt.NativeModuleError):
        mlopt.Module(b"", llvm=19)
    with pytest.raises(mlopt.NativeModuleError, match="LLVM 18 is not supported; this mlopt supports LLVM 19, 22"):
        _native.engine(18)
    assert main(["plugin-path", "--llvm", "18"]) == 2
    monkeypatch.setattr(_native, "plugin_library", lambda llvm=None: None)
    monkeypatch.delenv("MLOPT_PLUGIN", raising=False)
    with pytest.raises(mlopt.PluginNotFoundError,
                       match=r"llvm-19/MLOptPlugin\.so is missing: mlopt was built without LLVM 19"):
        plugin_path(19)
    r = main(["plugin-path"])
    assert r == 1

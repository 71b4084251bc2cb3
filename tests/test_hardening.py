"""Nothing mlopt does aborts a compiler or leaves a log that looks complete
when it is not: a full disk is one error line and a non-zero exit."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

import mlopt
from mlopt.cli import main
from mlopt.compiler.plugin import clang_flags, opt_flags
from tests.support.corpus import c_sources, include_flags

FULL = "error: mlopt: cannot write training log '/dev/full': No space left on device"


def test_plugin_log_on_a_full_disk_is_one_error_in_opt(llvm_tools, plugin, corpus_modules):
    r = subprocess.run([llvm_tools["opt"], *opt_flags(training_log="/dev/full"), "-passes=default<Oz>",
                        str(corpus_modules[0]), "-o", "/dev/null"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert r.stderr == FULL + "\n"  # no "terminate called", no stack dump


def test_plugin_log_on_a_full_disk_is_one_error_in_clang(llvm_tools, plugin, corpus_modules, tmp_path):
    source = c_sources("lz4")[0]
    r = subprocess.run([llvm_tools["clang"], "-Oz", *include_flags("lz4"), *clang_flags(training_log="/dev/full"),
                        "-c", str(source), "-o", str(tmp_path / "x.o")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert FULL in r.stderr and "Stack dump" not in r.stderr and "terminate" not in r.stderr
    assert not (tmp_path / "x.o").exists()


def test_log_writer_on_a_full_disk_raises_and_is_failed():
    spec = mlopt.TensorSpec("a", "int64_t", [1])
    w = mlopt.LogWriter("/dev/full", [spec], overwrite=True)
    w.switch_context("f")
    w.log_observation([1])
    with pytest.raises(OSError) as info:
        w.close()
    assert info.value.errno == errno.ENOSPC and info.value.filename == "/dev/full"
    with pytest.raises(mlopt.LogUsageError):
        w.log_observation([2])


def test_an_incomplete_log_file_is_removed(tmp_path):
    """A log that hits a write error part-way (here the file size limit) is
    not left behind looking like a shorter, complete log."""
    path = tmp_path / "cut.log"
    code = f"""
import resource, signal, mlopt, numpy as np
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
w = mlopt.LogWriter({str(path)!r}, [mlopt.TensorSpec("a", "int64_t", [1000])])
w.switch_context("f")
try:
    for i in range(400):
        w.log_observation([np.full(1000, i)])
    w.close()
except OSError as e:
    print("errno", e.errno)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout == f"errno {errno.EFBIG}\n", r.stderr
    assert not path.exists()


def test_compile_cli_log_on_a_full_disk_is_one_line(tmp_path, capsys):
    module = tmp_path / "m.ll"
    module.write_text("define i32 @f(i32 %x) {\n  ret i32 %x\n}\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "m.log").symlink_to("/dev/full")
    pytest.importorskip("mlopt._engine")
    assert main(["compile", str(module), "--log-dir", str(logs), "--force"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"mlopt: error: {logs / 'm.log'}: No space left on device"

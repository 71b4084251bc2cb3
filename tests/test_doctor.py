"""``mlopt doctor`` reports what this installation really has: each fact is
checked against the installed files, the LLVM tools and dpkg."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

from mlopt import _native

pytestmark = pytest.mark.llvm


def doctor(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlopt", "doctor", *args], capture_output=True, text=True,
                          timeout=120)


def test_doctor_json_matches_the_installation():
    r = doctor("--json")
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    assert facts["mlopt"] == _native.version()
    assert facts["litert"]["ai_edge_litert"] == importlib.metadata.version("ai-edge-litert")
    for major in _native.built_majors():
        f = facts["llvm"][str(major)]
        assert f["plugin"] == str(_native.plugin_file(major))
        version = subprocess.run([f"llvm-config-{major}", "--version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        assert f["llvm_version"] == version
        assert f["ir2vec"] is (major >= 21)
        assert f["tools"]["clang"].endswith(f"clang-{major}")
    regalloc = facts["llvm"]["19"]["regalloc"]
    engine = _native.engine(19)
    assert regalloc == (engine.regalloc_source_version if engine.regalloc_supported else None)
    if regalloc is not None:  # the private headers are exactly those of the installed libllvm19
        dpkg = subprocess.run(["dpkg-query", "-W", "-f=${source:Version}", "libllvm19"], capture_output=True,
                              text=True, check=True).stdout
        assert regalloc == dpkg
    assert facts["llvm"]["22"]["regalloc"] is None
    tool = _native.native_dir() / "_valgrind" / "mlopt-bbseq-amd64-linux"
    assert facts["trace_order"] == (str(tool) if tool.is_file() else None)


def test_doctor_text_names_each_major_and_what_it_lacks():
    r = doctor()
    assert r.returncode == 0, r.stderr
    facts = json.loads(doctor("--json").stdout)
    for major, f in facts["llvm"].items():
        block = r.stdout.split(f"LLVM {major}:\n", 1)[1]
        assert block.splitlines()[0] == (f"  engine:   LLVM {f['llvm_version']}" if f["engine"]
                                         else "  engine:   not built")
    assert ("regalloc: yes (private headers of " in r.stdout) == (facts["llvm"]["19"]["regalloc"] is not None)
    assert "regalloc: no (LLVM 19 only)" in r.stdout
    assert [line[len("warning: "):] for line in r.stdout.splitlines() if line.startswith("warning: ")] == \
        facts["warnings"]

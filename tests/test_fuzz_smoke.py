"""A short run of every atheris harness of fuzz/python_harness.py (the
parsers' Python entry points): each starts, runs its executions and finds
nothing. The long runs are fuzz/run.sh's (fuzz/README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "fuzz" / "python_harness.py"
TARGETS = ["read_log", "read_log_path", "log_stream", "load_policy", "load_policy_so", "output_spec", "corpus",
           "vocab", "ir2vec_vocab"]

pytestmark = pytest.mark.llvm


def test_every_target_is_smoke_tested():
    import ast

    tree = ast.parse(HARNESS.read_text())
    targets = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                   and getattr(node.targets[0], "id", "") == "TARGETS")
    assert sorted(k.value for k in targets.keys) == sorted(TARGETS)


@pytest.mark.parametrize("target", TARGETS)
def test_harness_smoke_run(target, tmp_path):
    pytest.importorskip("atheris")
    r = subprocess.run([sys.executable, str(HARNESS), target, str(tmp_path), "-runs=300", "-max_len=2048", "-seed=1",
                        f"-artifact_prefix={tmp_path}/finding-"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "Done 300 runs" in r.stderr, r.stderr[-2000:]
    assert not list(tmp_path.glob("finding-*"))

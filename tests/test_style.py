"""The code keeps the style its configs describe (ruff: pyproject.toml;
clang-format: .clang-format). Both tools are pinned in the test extras."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (pip install -e .[test])")
    return path


def test_python_passes_ruff():
    r = subprocess.run([_tool("ruff"), "check", "--output-format", "concise", "."], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cpp_is_clang_formatted():
    files = sorted(str(p) for p in [*ROOT.glob("src/**/*.h"), *ROOT.glob("src/**/*.cpp"),
                                    *ROOT.glob("tests/oracle/*.cpp"), *ROOT.glob("fuzz/*.cpp")])
    r = subprocess.run([_tool("clang-format"), "--dry-run", "-Werror", *files], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]

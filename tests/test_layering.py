"""The Python package's imports go only downward (docs/architecture.md), and
the checker that says so catches what it must."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.layering import check, read_layers

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "mlopt"


def layers():
    return read_layers((ROOT / "docs" / "architecture.md").read_text())


def test_package_imports_only_go_down():
    assert check(PACKAGE, "mlopt", layers()) == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


LAYERS = [["pkg.low"], ["pkg.mid_a", "pkg.mid_b"], ["pkg.high"], ["pkg$"]]


def test_checker_reports_a_cycle(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "low/__init__.py": "from . import a\n",
                               "low/a.py": "from .b import x\n", "low/b.py": "def f():\n    from .a import y\n"})
    assert check(root, "pkg", LAYERS) == ["cycle: pkg.low.a -> pkg.low.b -> pkg.low.a"]


def test_checker_reports_upward_and_sideways_imports_even_inside_functions(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "import importlib\nimportlib.import_module('pkg.high')\n",
        "low.py": "def f():\n    from pkg import high\n",
        "mid_a.py": "from . import mid_b\n",
        "mid_b.py": "import importlib\n\ndef g():\n    return importlib.import_module('pkg.high.x')\n",
        "high/__init__.py": "", "high/x.py": "from ..low import f\n",
        "stray.py": "",
    })
    assert check(root, "pkg", LAYERS) == [
        "pkg.low -> pkg.high: upward import",
        "pkg.mid_a -> pkg.mid_b: sideways import",
        "pkg.mid_b -> pkg.high.x: upward import",
        "pkg.stray: on no layer",
    ]


def test_a_deliberate_cycle_in_mlopt_is_caught(tmp_path):
    """The real package with one import added where it must not be."""
    import shutil

    copy = tmp_path / "mlopt"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    log_init = copy / "log" / "__init__.py"
    log_init.write_text(log_init.read_text() + "\nfrom ..policy import Vocab  # noqa\n")
    problems = check(copy, "mlopt", layers())
    assert "mlopt.log -> mlopt.policy: upward import" in problems
    assert any(p.startswith("cycle: ") and "mlopt.log" in p and "mlopt.policy" in p for p in problems)


ENGINES = ["mlopt._engine19", "mlopt._engine22"]


@pytest.mark.parametrize("statement,absent", [
    ("import mlopt", ["numpy", "mlopt._core", *ENGINES, "mlopt.log", "mlopt.compiler", "mlopt.policy"]),
    ("import mlopt; mlopt.read_log", [*ENGINES, "mlopt.compiler", "mlopt.policy", "mlopt.problems"]),
    ("from mlopt.cli import build_parser; build_parser()", [*ENGINES, "mlopt.compiler", "numpy"]),
])
def test_imports_stay_lazy(statement, absent):
    code = f"import sys; {statement}; print(*sorted(m for m in {absent!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == []

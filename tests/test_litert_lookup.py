"""LiteRT's runtime is found wherever pip put the ai-edge-litert wheel, also
when mlopt itself runs from a source checkout on PYTHONPATH (no wheel beside
it); a library the user names is used as named, never replaced."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mlopt
from mlopt import _native
from tests.support.models import good_inputs, tiny_model

WHEEL = _native._wheel_litert_library()

CHILD = """
import os, sys
import mlopt
from mlopt.errors import MloptError
try:
    mlopt.load_policy(sys.argv[1])
    print("loaded", mlopt.__file__, os.environ.get("MLOPT_LITERT_LIBRARY"))
except MloptError as e:
    print("error", type(e).__name__, e)
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """mlopt's package, compiled modules and plugins copied where no ai_edge_litert is beside it."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(Path(mlopt.__file__).parent, root / "mlopt", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _child(checkout: Path, model: Path, **env) -> str:
    base = {k: v for k, v in os.environ.items() if k != "MLOPT_LITERT_LIBRARY"}
    r = subprocess.run([sys.executable, "-c", CHILD, str(model)], capture_output=True, text=True, timeout=120,
                       env={**base, "PYTHONPATH": str(checkout), **env}, cwd=checkout)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.skipif(WHEEL is None, reason="ai-edge-litert is not installed")
def test_a_checkout_on_pythonpath_loads_tflite_policies_through_the_installed_wheel(checkout, tmp_path):
    model = tmp_path / "model.tflite"
    model.write_bytes(tiny_model(good_inputs(), value=1))
    out = _child(checkout, model)
    assert out == f"loaded {checkout / 'mlopt' / '__init__.py'} {WHEEL}"


@pytest.mark.skipif(WHEEL is None, reason="ai-edge-litert is not installed")
def test_a_library_the_user_names_is_kept(checkout, tmp_path):
    model = tmp_path / "model.tflite"
    model.write_bytes(tiny_model(good_inputs(), value=1))
    missing = tmp_path / "no" / "libLiteRt.so"
    out = _child(checkout, model, MLOPT_LITERT_LIBRARY=str(missing))
    assert out.startswith("error PolicyError") and str(missing) in out
    assert _native.litert_library() == os.environ.get("MLOPT_LITERT_LIBRARY", WHEEL)

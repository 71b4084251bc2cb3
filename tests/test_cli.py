import json
import subprocess
import sys

import numpy as np
import pytest

import mlopt
from mlopt.cli import main
from tests.support.golden import GOLDEN


@pytest.fixture
def golden(tmp_path):
    p = tmp_path / "golden.log"
    p.write_bytes(GOLDEN)
    return p


def test_show_prints_like_llvm_log_reader(golden, capsys):
    assert main(["log", "show", str(golden)]) == 0
    # llvm-mlgo.md 4.4: log_reader.py prints exactly these lines for the example.
    assert capsys.readouterr().out == "context: f\nobservation: 0\na: 5\nb: 1.5,-2.0\nreward: 0.25\n"


def test_show_limit_and_context(tmp_path, capsys):
    w = mlopt.LogWriter(tmp_path / "l.log", [mlopt.TensorSpec("x", "int64_t", [1])])
    for ctx in ("a", "b"):
        w.switch_context(ctx)
        for i in range(3):
            w.log_observation([i])
    w.close()
    assert main(["log", "show", str(tmp_path / "l.log"), "--context", "b", "--limit", "2"]) == 0
    assert capsys.readouterr().out == "context: b\nobservation: 0\nx: 0\nobservation: 1\nx: 1\n"


def test_stats_json(golden, capsys):
    assert main(["log", "stats", "--json", str(golden)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["observations"] == 1 and s["bytes"] == 247 and s["contexts"] == {"f": 1}
    assert s["features"][1] == {"name": "b", "count": 2, "min": -2.0, "mean": -0.25, "max": 1.5}
    assert s["score"]["max"] == 0.25


def test_stats_table(golden, capsys):
    assert main(["log", "stats", str(golden)]) == 0
    out = capsys.readouterr().out
    assert "observations:  1" in out and "score:         reward (float)" in out
    assert any(line.split() == ["b", "float", "-2", "-0.25", "1.5"] for line in out.splitlines())


def test_to_npz_round_trip_and_no_overwrite(golden, tmp_path, capsys):
    out = tmp_path / "g.npz"
    assert main(["log", "to-npz", str(golden), str(out)]) == 0
    z = np.load(out)
    assert z["a"].tolist() == [[5]] and z["reward"].tolist() == [[0.25]]
    assert z["_contexts"].tolist() == ["f"] and z["_observation_id"].tolist() == [0]
    assert mlopt.TensorSpec.from_json(json.loads(str(z["_header"]))["features"][1]).name == "b"
    before = out.read_bytes()
    assert main(["log", "to-npz", str(golden), str(out)]) == 1
    assert "exists (use --force" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main(["log", "to-npz", "--force", str(golden), str(out)]) == 0


def test_errors_are_one_line_with_exit_codes(tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_bytes(GOLDEN[:230])
    run = lambda *a: subprocess.run([sys.executable, "-m", "mlopt", *a], capture_output=True, text=True)
    r = run("log", "stats", str(bad))
    assert r.returncode == 1
    assert r.stderr == f"mlopt: error: {bad}: byte 228: truncated outcome record of observation 0 of context \"f\"\n"
    r = run("log", "stats", str(tmp_path / "missing.log"))
    assert r.returncode == 1 and r.stderr.startswith("mlopt: error: ") and "No such file" in r.stderr
    r = run("log", "frobnicate")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = run("log", "--help")
    assert r.returncode == 0 and "example" in r.stdout

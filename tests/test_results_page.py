"""docs/results.md and README's results table are the benchmarks' recorded
JSON (benchmarks/results/*.json), rendered by docs/make_results.py: a page
that disagrees with the JSON fails, and every record says what produced
it (the benchmark, its command, the LLVM version, the baseline, the commit)
and holds at least three seeds wherever training is involved."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _make_results():
    spec = importlib.util.spec_from_file_location("make_results", ROOT / "docs" / "make_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pages_equal_the_recorded_json():
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "make_results.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


def test_every_record_says_what_produced_it():
    results = _make_results().load_results()
    assert results, "no recorded results in benchmarks/results/"
    for r in results:
        trained = "runs" in r  # the recipe's records; the LTO ones train nothing and name one LLVM version
        for key in ("benchmark", "command", "problem", "corpus", "baseline", "metric", "date", "commit",
                    "runs" if trained else "llvm_version"):
            assert r.get(key), f"{r.get('benchmark')}: no {key!r}"
        assert (ROOT / r["benchmark"]).exists() and r["command"].startswith(f"python3 {r['benchmark']}")
        if not trained:
            assert re.fullmatch(r"\d+\.\d+\.\d+", r["llvm_version"])
        for run in r.get("runs", []):
            assert re.fullmatch(r"\d+\.\d+\.\d+", run["llvm"])
            assert len(run["seeds"]) >= 3
            for row in run["configs"]:
                n = 1 if row["config"] == "rule" else len(run["seeds"])
                assert len(set(row["linked"])) <= n and len(row["linked"]) == len(run["seeds"])


def test_a_changed_figure_changes_the_page(tmp_path):
    """The check is live: a page rendered from altered JSON differs from the committed one."""
    mr = _make_results()
    results = mr.load_results()
    page = mr.render_page(results)
    assert page == (ROOT / "docs" / "results.md").read_text()
    results[0]["runs"][0]["configs"][0]["linked"] = [v - 1.0 for v in results[0]["runs"][0]["configs"][0]["linked"]]
    assert mr.render_page(results) != page
    table = mr.render_readme_table(results)
    assert table not in (ROOT / "README.md").read_text()

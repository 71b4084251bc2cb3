"""The README's commands are true: two set-up commands first, and the
quickstart runs as written (in a scratch directory, against the real tools).
The front page and the guides stay for users: short Status cells, no
project-internal names (work-round numbers, issue numbers, split code names)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import mlopt

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(section: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of a ``## section``."""
    body = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", README, re.S | re.M).group(1)
    return re.findall(r"^```(\w*)\n(.*?)^```", body, re.S | re.M)


def test_readme_starts_with_the_two_setup_commands():
    first = re.search(r"^```sh\n(.*?)^```", README, re.S | re.M).group(1).strip().splitlines()
    assert len(first) == 2
    assert first[0].startswith("bash ci/install.sh python3 -m mlopt demo")
    assert first[1].startswith("bash ci/install.sh python3 -m pytest -q tests")
    assert README.index(first[0]) < README.index("## ")
    # the CI entry point runs exactly the README's test command
    run = (ROOT / ".ci" / "run").read_text()
    assert "\nbash ci/install.sh python3 -m pytest -q tests\n" in run
    # and the install with Debian's externally managed Python (PEP 668), one command from its environment
    assert "\nPYTHON=/usr/bin/python3 MLOPT_EXTRAS= bash ci/install.sh mlopt doctor --strict\n" in run


@pytest.mark.llvm
def test_quickstart_runs_as_written(tmp_path, monkeypatch):
    """As a reader runs it: no $MLOPT_LLVM (the quickstart names its major)."""
    monkeypatch.delenv("MLOPT_LLVM")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    steps = blocks("Quickstart: the Python API")
    assert [lang for lang, _ in steps] == ["sh", "python", "sh"]
    outputs = []
    for lang, code in steps:
        argv = ["bash", "-e", "-o", "pipefail", "-c", code] if lang == "sh" else [sys.executable, "-c", code]
        r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{lang} block failed:\n{code}\n{r.stderr}"
        outputs.append(r.stdout)
    base, decisions, _, mine, inlined = re.fullmatch(
        r"(\d+) bytes of \.text; (\d+) inlining decisions\n(\[.*\])\n(\d+) bytes with the policy; (\d+) call sites "
        r"inlined\n", outputs[1]).groups()
    assert int(base) > 0 and int(decisions) > 5 and int(mine) > 0
    # clang-19 with the compiled policy inlined what the in-process compile did
    trace = mlopt.read_log(tmp_path / "trace.log")
    assert int(trace["inlining_decision"].sum()) == int(inlined)
    assert (tmp_path / "demo.o").stat().st_size > 0
    assert outputs[2].startswith("file:          trace.log\n")


@pytest.mark.parametrize("doc", sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_links_point_at_files(doc):
    for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
        assert (doc.parent / target).exists(), f"{doc.name}: broken link {target}"


def _status_cells() -> list[str]:
    body = re.search(r"^## Status\n(.*?)(?=^## |\Z)", README, re.S | re.M).group(1)
    rows = [line for line in body.splitlines() if line.startswith("|") and not line.startswith("|---")][1:]
    return [cell.strip() for row in rows for cell in row.strip("|").split(" | ")]


def test_status_cells_are_short():
    cells = _status_cells()
    assert len(cells) >= 16  # the table is there, two cells a row
    long = [(len(c.split()), c[:60]) for c in cells if len(c.split()) > 40]
    assert not long, f"Status cells over 40 words: {long}"


def test_readme_is_short():
    words = len(re.sub(r"^```.*?^```", "", README, flags=re.S | re.M).split())
    assert words < 1500, f"README.md has {words} words of prose"


INTERNAL = re.compile(r"\b(stop|stops|issue|issues) \d+\b|\bsplits149\b|\bsplits\d+\b", re.I)
USER_PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("doc", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_pages_have_no_internal_names(doc):
    hits = [(i, m.group(0)) for i, line in enumerate(doc.read_text().splitlines(), 1)
            for m in INTERNAL.finditer(line)]
    assert not hits, f"{doc.relative_to(ROOT)}: project-internal names at lines {hits[:10]}"

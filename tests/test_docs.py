"""Every shell and Python block of README.md and docs/guide/*.md runs as
written on this machine, or says why not.

Each guide's blocks run in document order in a scratch directory holding
the files the guides name (``examples/``, ``a.c``/``x.c``, ``in.bc``/
``x.bc``/``lz4.bc``, ``bitcode/``, ``inline.log``/``trace1.log``/
``trace2.log``, ``policy_dir/``, ``policy.so``, ``corpus/``), so a block may
use what an earlier one wrote; what a guide makes itself (``<!-- docs-test:
makes: PATH... -->``) is left out of its copy. A block that cannot run here is preceded by
``<!-- docs-test: skip: REASON -->``; an unmarked block that fails, and a
marked one without a reason, fail the test. README's quickstart is run by
tests/test_readme.py (with its exact output), not here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
SKIP = re.compile(r"<!-- docs-test: skip(?::\s*(.*?))?\s*-->\s*\n$")
MAKES = re.compile(r"<!-- docs-test: makes: (.*?) -->")
BLOCK = re.compile(r"^```(sh|bash|python)\n(.*?)^```", re.S | re.M)

pytestmark = [pytest.mark.llvm, pytest.mark.slow]


def blocks(doc: Path) -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, skip reason or None) of every sh/python block."""
    text = doc.read_text()
    out = []
    for m in BLOCK.finditer(text):
        before = text[: m.start()]
        skip = SKIP.search(before[-400:])
        reason = None
        if skip:
            reason = skip.group(1) or ""
        elif doc.name == "README.md" and _section(text, m.start()) == "Quickstart: the Python API":
            reason = "tests/test_readme.py runs the quickstart and checks its output"
        out.append((before.count("\n") + 1, m.group(1), m.group(2), reason))
    return out


def _section(text: str, at: int) -> str:
    heads = re.findall(r"^## (.*)$", text[:at], re.M)
    return heads[-1] if heads else ""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MLOPT_LLVM", None)  # as a reader runs them: the blocks name their LLVM major
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # this mlopt's console script
    return env


def _run(lang: str, code: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = ["bash", "-e", "-o", "pipefail", "-c", code] if lang in ("sh", "bash") else [sys.executable, "-c", code]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=_env())


WORKSPACE_SH = """
cp examples/inline_demo.c a.c && cp a.c x.c
clang-19 -Oz -Xclang -disable-llvm-passes -emit-llvm -c a.c -o in.bc
cp in.bc x.bc && cp in.bc lz4.bc && mkdir bitcode && cp in.bc bitcode/a.bc
opt-19 -load-pass-plugin=$(mlopt plugin-path --llvm 19) -mlopt-inline-training-log=inline.log \
    -passes='default<Oz>' in.bc -o /dev/null
cp inline.log trace1.log && cp inline.log trace2.log
mlopt corpus make bitcode/ corpus/ --command=-Oz >/dev/null
"""
WORKSPACE_PY = """
import mlopt
vocab = mlopt.Vocab.from_logs(["inline.log"], num_buckets=20)
mlopt.InlinePolicy.random(vocab, hidden=(8,), seed=0).export("policy_dir")
mlopt.compile_policy("policy_dir", "policy.so")
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("docs-workspace")
    (d / "examples").symlink_to(ROOT / "examples")
    for lang, code in (("sh", WORKSPACE_SH), ("python", WORKSPACE_PY)):
        r = _run(lang, code, d)
        assert r.returncode == 0, r.stderr
    return d


def test_every_block_is_run_or_says_why_not():
    for doc in DOCS:
        for line, _, _, reason in blocks(doc):
            assert reason is None or reason.strip(), f"{doc.relative_to(ROOT)}:{line}: a skipped block needs a reason"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_blocks_run_as_written(doc, workspace, tmp_path):
    todo = [b for b in blocks(doc) if b[3] is None]
    if not todo:
        pytest.skip("no block of this document can run here (each says why)")
    cwd = tmp_path / "w"
    shutil.copytree(workspace, cwd, symlinks=True)
    for made in MAKES.findall(doc.read_text()):
        for name in made.split():
            target = cwd / name
            shutil.rmtree(target) if target.is_dir() else target.unlink()
    for line, lang, code, _ in todo:
        r = _run(lang, code, cwd)
        assert r.returncode == 0, f"{doc.relative_to(ROOT)}:{line} ({lang}) failed:\n{code}\n{r.stderr[-3000:]}"

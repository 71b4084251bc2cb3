"""mlopt tune on examples/cmake-project, per LLVM major: a full-LTO CMake build
saving its modules, the callee search over its binaries, the rebuild through
CMake's own variables with the decision files (one flag, %m per binary):
each rebuilt binary's .text is the size tune reported, the project shrinks,
the programs print what they printed, and --check on the same build says
every decision still applies and saves what tune found."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlopt.corpus.elf import read_sections, text_bytes
from mlopt.training.tune import read_callee_decisions

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cmake-project"
BINARIES = {"cksum": "tools/cksum", "libgeom.so": "geom/libgeom.so", "shapes": "app/shapes"}
GC_ICF = "-Wl,--gc-sections,--icf=all"

pytestmark = [pytest.mark.llvm, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")]


def _mlopt(*args: str, cwd: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "mlopt", *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"mlopt {' '.join(args)}:\n{r.stderr}"
    return r.stdout


def _build(build: Path, tools: dict, flags: str) -> dict[str, Path]:
    link = GC_ICF  # CMake's link line has CMAKE_<LANG>_FLAGS too: the plugin's flags are there
    subprocess.run(["cmake", "-S", str(EXAMPLE), "-B", str(build), f"-DCMAKE_C_COMPILER={tools['clang']}",
                    f"-DCMAKE_CXX_COMPILER={tools['clang++']}", f"-DCMAKE_C_FLAGS=-Oz {flags}",
                    f"-DCMAKE_CXX_FLAGS=-Oz {flags}", f"-DCMAKE_EXE_LINKER_FLAGS={link}",
                    f"-DCMAKE_SHARED_LINKER_FLAGS={link}"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j", "2"], check=True, capture_output=True)
    return {b: build / p for b, p in BINARIES.items()}


def _run(binary: Path) -> str:
    return subprocess.run([str(binary)], check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout


def test_tune_shrinks_the_example_and_the_rebuild_is_the_size_it_reported(llvm_tools, tmp_path):
    major = str(llvm_tools["major"])
    save = _mlopt("clang-flags", "--llvm", major, "--lto", "full", "--save-lto-modules", str(tmp_path / "modules"),
                  cwd=tmp_path).strip()
    before = _build(tmp_path / "before", llvm_tools, save)
    extracted = json.loads(_mlopt("corpus", "extract", "modules", "corpus", "--lto", "--json", cwd=tmp_path))
    desc = json.loads((tmp_path / "corpus" / "corpus_description.json").read_text())
    assert sorted(desc["modules"]) == sorted(f"{p}.lto" for p in BINARIES.values())  # CMake's checks left out
    assert extracted["skipped"] and all("CMake check" in s["reason"] for s in extracted["skipped"])

    report = json.loads(_mlopt("tune", "corpus", "-o", "tuned", "--evaluations", "16", "--llvm", major, "--json",
                               "--quiet", cwd=tmp_path))
    by_binary = {Path(m).name.removesuffix(".lto"): b for m, b in report["binaries"].items()}
    for name, b in by_binary.items():
        assert b["before"] == text_bytes(read_sections(before[name])), name  # tune's baseline is the build
    assert report["after"] < report["before"]
    files = {b["module_name"]: read_callee_decisions(tmp_path / "tuned" / f"{b['module_name']}.txt")
             for b in by_binary.values()}
    assert sum(map(len, files.values())) == sum(b["decisions"] for b in by_binary.values()) > 0

    use = _mlopt("clang-flags", "--llvm", major, "--lto", "full", "--callee-decisions",
                 str(tmp_path / "tuned" / "%m.txt"), cwd=tmp_path).strip()
    after = _build(tmp_path / "after", llvm_tools, use)
    for name, b in by_binary.items():
        assert text_bytes(read_sections(after[name])) == b["after"], name
    for program in ("shapes", "cksum"):
        assert _run(after[program]) == _run(before[program])

    checked = json.loads(_mlopt("tune", "corpus", "--check", "tuned", "--llvm", major, "--json", cwd=tmp_path))
    for m, b in checked["binaries"].items():
        assert b["apply"] == b["decisions"] == report["binaries"][m]["decisions"]
        assert (b["without"], b["with"]) == (report["binaries"][m]["before"], report["binaries"][m]["after"])


def test_tune_refuses_a_corpus_that_is_not_full_lto(tmp_path, mini_corpus):
    r = subprocess.run([sys.executable, "-m", "mlopt", "tune", str(mini_corpus), "-o", str(tmp_path / "t")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "not a full-LTO module with link facts" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_check_warns_when_the_decisions_make_a_binary_larger(llvm_tools, tmp_path):
    """--check on a build where a decision no longer pays (the synthetic module's switch helper declined:
    the enumerated optimum inlines it): the table shows the growth and a warning says to tune again."""
    from tests.support import merged

    corpus = merged.build(tmp_path / "syn", llvm_tools["major"])
    (tmp_path / "tuned").mkdir()
    (tmp_path / "tuned" / "libsyn.so.lto.txt").write_text("# a stale decision\n0 h1\n")
    r = subprocess.run([sys.executable, "-m", "mlopt", "tune", str(corpus), "--check", "tuned", "--json"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)["binaries"]["libsyn.so.lto"]
    assert b["decisions"] == b["apply"] == 1 and b["with"] > b["without"]
    r = subprocess.run([sys.executable, "-m", "mlopt", "tune", str(corpus), "--check", "tuned"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0 and "the decisions make 1 binary larger on this build (libsyn.so.lto)" in r.stderr

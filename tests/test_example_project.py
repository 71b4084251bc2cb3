"""The loop of docs/guide/your-project.md on examples/cmake-project, per
LLVM major: build with embedded bitcode, capture the corpus with modules
grouped by the binary they link into, count call sites (the
one-site-linkonce rule), rebuild through CMake's own variables with the
decisions, and report. The report's sizes must be those of the ELF files
on disk (read here with llvm-size), the C++ library must shrink, the
programs must print what they printed before, and two rebuilds with the
decisions must give the same bytes of ``.text``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cmake-project"

pytestmark = [pytest.mark.llvm, pytest.mark.slow]

MODULES = ["cksum/cutil/checksum.c", "cksum/cutil/strbuf.c", "cksum/tools/cksum.c",
           "libgeom.so/cutil/checksum.c", "libgeom.so/cutil/strbuf.c", "libgeom.so/geom/src/polygon.cpp",
           "libgeom.so/geom/src/report.cpp", "libgeom.so/geom/src/shape.cpp", "libgeom.so/geom/src/stats.cpp",
           "shapes/app/main.cpp"]
BINARIES = {"cksum": "tools/cksum", "libgeom.so": "geom/libgeom.so", "shapes": "app/shapes"}


def _mlopt(*args: str, cwd: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "mlopt", *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"mlopt {' '.join(args)}:\n{r.stderr}"
    return r.stdout


def _configure(build: Path, tools: dict, flags: str, *extra: str, query: bool = True) -> Path:
    if query:
        (build / ".cmake/api/v1/query").mkdir(parents=True)
        (build / ".cmake/api/v1/query/codemodel-v2").touch()
    subprocess.run(["cmake", "-S", str(EXAMPLE), "-B", str(build), f"-DCMAKE_C_COMPILER={tools['clang']}",
                    f"-DCMAKE_CXX_COMPILER={tools['clang++']}", f"-DCMAKE_C_FLAGS={flags}",
                    f"-DCMAKE_CXX_FLAGS={flags}", *extra], check=True, capture_output=True)
    return build


def _text_size(llvm_size: str, path: Path) -> int:
    out = subprocess.run([llvm_size, "-A", str(path)], check=True, capture_output=True, text=True).stdout
    return int(re.search(r"^\.text\s+(\d+)", out, re.M).group(1))


def _text_bytes(objcopy: str, path: Path, tmp: Path) -> bytes:
    tmp.mkdir(exist_ok=True)
    dump = tmp / f"{path.name}.text"
    subprocess.run([objcopy, "--dump-section", f".text={dump}", str(path), str(tmp / "copy")], check=True)
    return dump.read_bytes()


def _run(binary: Path) -> str:
    return subprocess.run([str(binary)], check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_example_project_build_capture_rule_rebuild_report(llvm_tools, tmp_path):
    major = llvm_tools["major"]
    embed = "-Oz -Xclang -fembed-bitcode=all"
    capture = _configure(tmp_path / "capture", llvm_tools, embed, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    subprocess.run(["cmake", "--build", str(capture), "-j", "2"], check=True, capture_output=True)

    summary = json.loads(_mlopt("corpus", "extract", str(capture), "corpus", "--cmake", "--json", cwd=tmp_path))
    assert summary["extracted"] == len(MODULES) and summary["skipped"] == 0
    assert sorted(json.loads((tmp_path / "corpus/corpus_description.json").read_text())["modules"]) == MODULES

    sites = json.loads(_mlopt("corpus", "call-sites", "corpus", "-o", "sites.npz", "--callee-decisions", "rules",
                              "--llvm", str(major), "--json", cwd=tmp_path))
    assert sorted(sites["one_site_callees"]) == sorted(BINARIES)
    assert sites["one_site_callees"]["libgeom.so"] >= 1  # the rule fires on the C++ library
    assert sites["one_site_callees"]["cksum"] == 0       # C: no linkonce_odr callees

    other = 22 if major == 19 else 19
    r = subprocess.run([sys.executable, "-m", "mlopt", "cmake", "flags", str(capture), "--llvm", str(other),
                        "--rules", "rules", "-o", "wrong"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2 and f"built by LLVM {major}'s clang" in r.stderr and len(r.stderr.splitlines()) == 1

    made = json.loads(_mlopt("cmake", "flags", str(capture), "--llvm", str(major), "--rules", "rules",
                             "-o", "rebuild", "--json", cwd=tmp_path))
    per_target = {t["target"]: t for t in made["targets"]}
    assert per_target["cutil"]["binaries"] == ["cksum", "libgeom.so"]  # a static library in two binaries
    assert per_target["geom"]["decisions"] == sites["one_site_callees"]["libgeom.so"]
    include = tmp_path / "rebuild" / "mlopt.cmake"
    assert f"llvm-{major}" in include.read_text()

    baseline = _configure(tmp_path / "oz", llvm_tools, "-Oz")
    rules = [_configure(tmp_path / name, llvm_tools, "-Oz", f"-DCMAKE_PROJECT_INCLUDE={include}", query=False)
             for name in ("rule", "rule-again")]
    for build in (baseline, *rules):
        _mlopt("cmake", "build", str(build), "--jobs", "2", cwd=tmp_path)

    report = json.loads(_mlopt("cmake", "report", "oz", "rule", "--json", cwd=tmp_path))
    table = _mlopt("cmake", "report", "oz", "rule", cwd=tmp_path)
    assert [row["binary"] for row in report["binaries"]] == sorted(BINARIES)
    for row in report["binaries"]:
        relative = BINARIES[row["binary"]]
        before, after = _text_size(llvm_tools["llvm-size"], baseline / relative), \
            _text_size(llvm_tools["llvm-size"], rules[0] / relative)
        assert (row["text_before"], row["text_after"]) == (before, after), row["binary"]
        line = next(x for x in table.splitlines() if x.startswith(row["binary"] + " "))
        assert line.split()[1:3] == [str(before), str(after)]
    sizes = {row["binary"]: row for row in report["binaries"]}
    assert sizes["libgeom.so"]["text_after"] < sizes["libgeom.so"]["text_before"]
    assert sizes["cksum"]["text_after"] == sizes["cksum"]["text_before"]
    assert all(report["build_cpu_s"][side] > 0 for side in ("before", "after"))
    assert "build CPU s" in table

    objcopy = shutil.which(f"llvm-objcopy-{major}")
    for relative in BINARIES.values():  # deterministic: the same code from two rebuilds
        first, second = (_text_bytes(objcopy, b / relative, tmp_path / b.name) for b in rules)
        assert first == second and len(first) == sizes[Path(relative).name]["text_after"]
    printed = [_run(build / "app/shapes") for build in (baseline, rules[0])]
    assert printed[0] == printed[1] and "checksum" in printed[0]


def test_capture_without_a_file_api_reply_says_what_to_pass(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    r = subprocess.run([sys.executable, "-m", "mlopt", "corpus", "extract", str(build), str(tmp_path / "c"),
                        "--cmake"], capture_output=True, text=True, env={**os.environ})
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1
    assert ".cmake/api/v1/query/codemodel-v2 before configuring" in r.stderr
    assert "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON" in r.stderr

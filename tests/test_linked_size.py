"""The package-linked estimate (``mlopt eval --linked``): each package's
COMDAT code counted once, as a linker keeps it. Objects from the real
compiler; the sections read by mlopt checked against ``llvm-readelf``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

import mlopt
from mlopt.corpus import corpus_entries, extract_corpus, objects_from_compile_commands
from mlopt.corpus.elf import text_sections
from mlopt.evaluation.linked import linked_text

# An inline function (linkonce_odr, its own COMDAT section) too large for -Oz to inline, called once per module.
HEADER = """
inline int helper(int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) { s += i * i ^ (s >> 3); if (s > 1000) s -= n * 7; }
  return s;
}
"""
SOURCES = {"pkg/a.cpp": "int fa(int n) { return helper(n) + 1; }\n",
           "pkg/b.cpp": "int fb(int n) { return helper(n * 2) - 3; }\n",
           "other/c.cpp": "int fc(int n) { return helper(n + 5); }\n"}


@pytest.fixture
def comdat_corpus(llvm_tools, tmp_path):
    (tmp_path / "helper.h").write_text(HEADER)
    commands = []
    for name, body in SOURCES.items():
        src = tmp_path / name
        src.parent.mkdir(exist_ok=True)
        src.write_text('#include "../helper.h"\n' + body)
        args = [llvm_tools["clang++"], "-Oz", "-Xclang", "-fembed-bitcode=all", "-c", name, "-o",
                name.replace(".cpp", ".o")]
        subprocess.run(args, cwd=tmp_path, check=True)
        commands.append({"directory": str(tmp_path), "file": name, "arguments": args,
                         "output": name.replace(".cpp", ".o")})
    (tmp_path / "compile_commands.json").write_text(json.dumps(commands))
    out = tmp_path / "corpus"
    extract_corpus(objects_from_compile_commands(tmp_path / "compile_commands.json"), out)
    return out


def _readelf_text(major: int, obj) -> list[tuple[str, int, bool]]:
    """(name, size, in a group) of the code sections, as llvm-readelf lists them (an independent reader)."""
    readelf = shutil.which(f"llvm-readelf-{major}")
    if readelf is None:
        pytest.skip(f"llvm-readelf-{major} not installed")
    out = subprocess.run([readelf, "-S", "-W", str(obj)], check=True, capture_output=True, text=True).stdout
    rows = []
    for m in re.finditer(r"\]\s+(\.text\S*)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+(\S*)", out):
        rows.append((m.group(1), int(m.group(2), 16), "G" in m.group(3)))
    return rows


def test_text_sections_and_the_package_linked_estimate(llvm_tools, comdat_corpus, tmp_path):
    modules = {e.name: e for e in corpus_entries(comdat_corpus)}
    assert sorted(modules) == ["other/c.o", "pkg/a.o", "pkg/b.o"]
    sections = {}
    for name, entry in modules.items():
        r = mlopt.compile(entry.load(), log=False, keep_object=True)
        obj = tmp_path / (name.replace("/", "_"))
        obj.write_bytes(r.object)
        sections[name] = text_sections(r.object, name)
        assert sorted(sections[name]) == sorted(_readelf_text(llvm_tools["major"], obj))
        assert sum(s.size for s in sections[name]) == r.text_size
        helper = [s for s in sections[name] if "helper" in s.name]
        assert len(helper) == 1 and helper[0].comdat, sections[name]  # -Oz keeps the call: a COMDAT copy
        assert not [s for s in sections[name] if s.comdat and s is not helper[0]]
    copy = {n: next(s.size for s in sections[n] if s.comdat) for n in modules}
    linked = linked_text(sections)
    per_module = {p: sum(sum(s.size for s in sections[n]) for n in modules if n.startswith(p + "/"))
                  for p in ("pkg", "other")}
    assert linked == {"pkg": per_module["pkg"] - copy["pkg/b.o"],  # the first object's copy is kept
                      "other": per_module["other"]}  # another package keeps its own


def test_eval_linked_credits_inlining_a_comdat_function_once(llvm_tools, comdat_corpus, tmp_path, capsys):
    """A policy that inlines everything drops the helper's copy from both of pkg's modules: the per-module
    sum credits it twice, the package-linked estimate once."""
    from mlopt.cli import main

    assert main(["policy", "export", "--constant", "1", "-o", str(tmp_path / "always")]) == 0
    assert main(["eval", str(tmp_path / "always"), str(comdat_corpus), "-o", str(tmp_path / "ev"), "--linked",
                 "--no-plots", "--quiet", "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "package-linked estimate" in printed
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    heuristic = {e.name: text_sections(mlopt.compile(e.load(), log=False, keep_object=True).object, e.name)
                 for e in corpus_entries(comdat_corpus)}
    always = mlopt.load_policy(tmp_path / "always")
    policy = {e.name: text_sections(mlopt.compile(e.load(), always, log=False, keep_object=True).object, e.name)
              for e in corpus_entries(comdat_corpus)}
    assert not any(s.comdat for ss in policy.values() for s in ss)  # inlined everywhere: no copy left
    h, p = linked_text(heuristic), linked_text(policy)
    lk = summary["linked"]
    assert lk["packages"]["pkg"]["heuristic_text"] == h["pkg"]
    assert lk["packages"]["pkg"]["policy_text"] == p["pkg"]
    assert lk["total"]["delta"] == sum(p.values()) - sum(h.values())
    per_module = summary["packages"]["pkg"]
    assert per_module["heuristic_text"] - lk["packages"]["pkg"]["heuristic_text"] == next(
        s.size for s in heuristic["pkg/b.o"] if s.comdat)
    assert per_module["policy_text"] == lk["packages"]["pkg"]["policy_text"]
    assert lk["packages"]["pkg"]["delta"] > per_module["delta"]  # the per-module sum credits more

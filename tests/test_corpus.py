"""Corpora: extraction from a real build, make, split, global command lines,
interoperability with LLVM's own mlgo-utils, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mlopt
from mlopt.corpus import (
    corpus_entries,
    extract_corpus,
    make_corpus,
    objects_from_compile_commands,
    objects_in_directory,
    split_corpus,
)
from mlopt.corpus.elf import read_sections, sections_of
from mlopt.evaluation import clang_command, text_size


def test_extract_gives_the_builds_modules_and_recompiles_to_the_same_code(mini_build, mini_corpus, tmp_path):
    """Every object with bitcode becomes a module (named by its object path,
    as extract_ir names it); recompiling each module from its own .cmd with
    stock clang-19 gives exactly the .text the build produced; the assembly
    object is skipped with its reason; the non-UTF-8 name survives."""
    desc = json.loads((mini_corpus / "corpus_description.json").read_text())
    assert desc["has_thinlto"] is False
    assert desc["modules"] == [f"obj/{os.fsdecode(o.name)}" for o in mini_build.objects]
    report = json.loads((mini_corpus / "extract_report.json").read_text())
    assert report["extracted"] == len(mini_build.objects) and report["skipped"] == 1
    [skipped] = report["skipped_objects"]
    assert skipped["object"].endswith("add.o") and "no .llvmbc section" in skipped["reason"]
    for entry, obj in zip(corpus_entries(mini_corpus), mini_build.objects):
        built = read_sections(obj)
        assert entry.bitcode_path.read_bytes() == built[".llvmbc"]
        out = tmp_path / "re.o"
        subprocess.run(clang_command(entry, out, None), check=True)
        again = read_sections(out)
        assert again[".text"] == built[".text"], entry.name
        assert text_size(out) == text_size(obj)


def test_extracted_corpus_compiles_in_process_like_the_build(mini_build, mini_corpus):
    """The in-process engine, reading each .cmd, gives the build's .text size."""
    modules = mlopt.load_corpus(mini_corpus)
    results = mlopt.compile_many(modules, log=False)
    assert [r.text_size for r in results] == [text_size(o) for o in mini_build.objects]
    assert all(m.notes == [] for m in modules)


def test_directory_and_list_inputs_and_filters(mini_build, tmp_path):
    objs = objects_in_directory(mini_build.directory / "obj")
    assert sorted(o.name for o in objs) == sorted([os.fsdecode(o.name) for o in mini_build.objects] + ["add.o"])
    report = extract_corpus(objs, tmp_path / "c", cmd_filter=r"^-std=c\+\+17$")
    assert sorted(report.modules) == ["shapes.cpp.o", "table.cpp.o"]
    assert sum("does not match the filter" in s["reason"] for s in report.skipped) == len(objs) - 3
    # an existing corpus is never replaced silently
    with pytest.raises(mlopt.OutputExistsError):
        extract_corpus(objs, tmp_path / "c")
    again = extract_corpus(objs, tmp_path / "c", force=True)
    assert len(again.modules) == len(mini_build.objects)


def test_a_partially_linked_object_is_skipped_with_its_reason(mini_build, tmp_path):
    """`ld -r` (as pv's build makes library.o) concatenates the .llvmbc
    sections of the objects it merges; LLVM reads that as one module and
    fails ("Invalid encoding"), so extraction skips it and says why."""
    from mlopt.corpus.bitcode import bitcode_streams
    from mlopt.corpus.extract import ObjectRef

    first, second = mini_build.objects[:2]
    merged = tmp_path / "merged.o"
    subprocess.run(["ld", "-r", str(first), str(second), "-o", str(merged)], check=True)
    assert bitcode_streams(read_sections(first)[".llvmbc"]) == 1
    assert bitcode_streams(read_sections(merged)[".llvmbc"]) == 2
    assert bitcode_streams(b"not bitcode") is None and bitcode_streams(b"BC\xc0\xde\x35\x14") is None
    report = extract_corpus([ObjectRef(merged, "merged.o"), ObjectRef(first, "first.o")], tmp_path / "c")
    assert report.modules == ["first.o"]
    [skipped] = report.skipped
    assert skipped["object"].endswith("merged.o")
    assert skipped["reason"].startswith("2 bitcode modules in one .llvmbc section (a partial link, ld -r")


def test_compile_commands_errors_name_the_place(tmp_path):
    bad = tmp_path / "compile_commands.json"
    bad.write_text('[{"directory": "/x", "arguments": ["cc", "-c", "a.c"]},')
    with pytest.raises(mlopt.CorpusError, match=r"compile_commands.json: invalid JSON at byte \d+"):
        objects_from_compile_commands(bad)
    bad.write_text('[{"arguments": ["cc"]}]')
    with pytest.raises(mlopt.CorpusError, match="entry 0 has no 'directory'"):
        objects_from_compile_commands(bad)
    bad.write_text('[{"directory": "/x", "arguments": ["cc", "-c", "a.c", "-o", "../../etc/x.o"]}]')
    with pytest.raises(mlopt.CorpusError, match="does not name a file inside the corpus"):
        objects_from_compile_commands(bad)


def test_elf_reader_rejects_broken_objects_with_offsets(mini_build):
    data = mini_build.objects[0].read_bytes()
    assert set(sections_of(data, "x.o")) >= {".text", ".llvmbc", ".llvmcmd"}
    with pytest.raises(mlopt.CorpusError, match="x.o: not an ELF object"):
        sections_of(b"BC\xc0\xde", "x.o")
    with pytest.raises(mlopt.CorpusError, match=r"x.o: section header table at byte \d+ runs past the end"):
        sections_of(data[: len(data) - 100], "x.o")


def test_make_split_and_global_command(mini_corpus, tmp_path):
    raw = tmp_path / "raw"
    for e in corpus_entries(mini_corpus)[:4]:
        dest = raw / f"{e.name}.bc"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(e.bitcode_path, dest)
    names = make_corpus(raw, tmp_path / "made", ["-O2", "-fno-pic"])
    desc = json.loads((tmp_path / "made" / "corpus_description.json").read_text())
    assert desc == {"global_command_override": ["-O2", "-fno-pic"], "has_thinlto": False, "modules": names}
    [m, *_] = mlopt.load_corpus(tmp_path / "made")
    assert (m.opt_level, m.reloc_model, m.loop_vectorize) == ("O2", "static", True)
    halves = {"train": 0.5, "heldout": 0.5}
    sides = split_corpus(mini_corpus, tmp_path / "split", halves, by="module", seed=1)
    assert sorted(sides["train"] + sides["heldout"]) == sorted(e.name for e in corpus_entries(mini_corpus))
    assert split_corpus(mini_corpus, tmp_path / "split2", halves, by="module", seed=1) == sides  # deterministic
    for side in ("train", "heldout"):
        assert [e.name for e in corpus_entries(tmp_path / "split" / side)] == sides[side]
    unspecified = tmp_path / "u"
    unspecified.mkdir()
    (unspecified / "corpus_description.json").write_text(
        '{"global_command_override": ["<UNSPECIFIED>"], "modules": []}')
    with pytest.raises(mlopt.CorpusError, match="<UNSPECIFIED>"):
        mlopt.load_corpus(unspecified)


def _mlgo_extract_ir():
    exe = shutil.which("extract_ir", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if exe is None:
        pytest.fail("mlgo-utils is a test dependency (pip install -e '.[test]')")
    return exe


def test_mlgo_utils_extract_ir_and_mlopt_agree(mini_build, mini_corpus, tmp_path):
    """LLVM's own extract_ir on the same build: the same module names, the
    same .bc and .cmd bytes, the same description; mlopt reads its corpus
    and compiles it to the same sizes."""
    out = tmp_path / "mlgo"
    subprocess.run([_mlgo_extract_ir(), f"--input={mini_build.compile_commands}", "--input_type=json",
                    "--llvm_objcopy_path=llvm-objcopy-19", f"--output_dir={out}"],
                   check=True, capture_output=True)
    theirs = json.loads((out / "corpus_description.json").read_text())
    ours = json.loads((mini_corpus / "corpus_description.json").read_text())
    assert theirs == ours
    for name in ours["modules"]:
        for ext in (".bc", ".cmd"):
            assert os.fsencode(out / f"{name}{ext}") and (out / f"{name}{ext}").read_bytes() == (
                mini_corpus / f"{name}{ext}").read_bytes()
    from mlopt.rollouts import trace_corpus

    a = trace_corpus(out, use_cache=False, workers=2, quiet=True)
    b = trace_corpus(mini_corpus, use_cache=False, workers=2, quiet=True)
    assert a.modules == b.modules and np.array_equal(a.text_size, b.text_size)
    assert np.array_equal(a.module_rows, b.module_rows) and a.columns.keys() == b.columns.keys()
    assert all(np.array_equal(a.columns[k], b.columns[k]) for k in a.columns)


def test_cli_corpus_commands(mini_build, tmp_path, capsys):
    from mlopt.cli import main

    out = tmp_path / "c"
    assert main(["corpus", "extract", str(mini_build.compile_commands), str(out), "--quiet", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["extracted"], summary["skipped"]) == (len(mini_build.objects), 1)
    assert main(["corpus", "extract", str(mini_build.compile_commands), str(out)]) == 1
    assert "corpus_description.json exists (use --force" in capsys.readouterr().err
    assert main(["corpus", "split", str(out), str(tmp_path / "s"), "--fractions", "1.5,-0.5"]) == 2
    assert main(["corpus", "split", str(out), str(tmp_path / "s"), "--fractions", "0.5,0.5"]) == 1  # one package
    assert "gets no module" in capsys.readouterr().err
    assert main(["corpus", "split", str(out), str(tmp_path / "s"), "--fractions", "0.5,0.5", "--by", "module"]) == 0
    assert main(["corpus", "fetch", "--packages", "nope"]) == 1
    assert "unknown package 'nope'" in capsys.readouterr().err

"""Splits by package: no package on two sides, deterministic, stable when
packages are added, pinned packages, clear errors (no LLVM needed: a split
only reads the description and links files)."""

from __future__ import annotations

import json

import pytest

import mlopt
from mlopt.corpus import corpus_entries, package_of, read_manifest, split_corpus
from mlopt.corpus.manifest import manifest_table, summary, write_manifest
from mlopt.corpus.split import assign_sides


def _corpus(root, packages: dict[str, int], manifest: bool = True):
    modules = [f"{p}/src/f{i}.c.o" for p, n in packages.items() for i in range(n)]
    for m in modules:
        (root / f"{m}.bc").parent.mkdir(parents=True, exist_ok=True)
        (root / f"{m}.bc").write_bytes(b"BC\xc0\xde" + m.encode())
        (root / f"{m}.cmd").write_bytes(b"-Oz\0-c")
    (root / "corpus_description.json").write_text(json.dumps({"has_thinlto": False, "modules": modules}))
    if manifest:
        write_manifest(root, {"source": "test", "packages": [
            {"name": p, "version": "1", "status": "built", "modules": n, "text": 100 * n,
             "languages": {"c": {"modules": n, "text": 100 * n}}} for p, n in packages.items()]})
    return modules


PACKAGES = {f"pkg{i:02}": 1 + i % 4 for i in range(40)}


def test_no_package_on_two_sides_deterministic(tmp_path):
    modules = _corpus(tmp_path / "c", PACKAGES)
    sides = split_corpus(tmp_path / "c", tmp_path / "s")
    assert list(sides) == ["train", "validation", "test"]
    owner = {}
    for side, names in sides.items():
        for m in names:
            assert owner.setdefault(package_of(m), side) == side, f"{package_of(m)} on two sides"
    assert sorted(sum(sides.values(), [])) == sorted(modules)
    assert split_corpus(tmp_path / "c", tmp_path / "s2") == sides
    for side, names in sides.items():  # each side is a corpus with the files and the manifest of its packages
        assert [e.name for e in corpus_entries(tmp_path / "s" / side)] == names
        assert (tmp_path / "s" / side / f"{names[0]}.cmd").read_bytes() == b"-Oz\0-c"
        kept = {p["name"] for p in read_manifest(tmp_path / "s" / side)["packages"]}
        assert kept == {package_of(m) for m in names}
    # all three sides have packages at these fractions (40 packages)
    assert all(len({package_of(m) for m in names}) >= 3 for names in sides.values())


def test_stable_when_packages_are_added():
    base = [f"{p}/x{i}.o" for p, n in PACKAGES.items() for i in range(n)]
    more = base + [f"new{i}/y.o" for i in range(30)]
    fractions = {"train": 0.7, "validation": 0.15, "test": 0.15}
    before = assign_sides(base, fractions)
    after = assign_sides(more, fractions)
    for side in fractions:
        assert [m for m in after[side] if not m.startswith("new")] == before[side]


def test_seed_moves_packages_and_module_split_differs():
    modules = [f"{p}/x{i}.o" for p, n in PACKAGES.items() for i in range(n)]
    f = {"train": 0.5, "test": 0.5}
    assert assign_sides(modules, f, seed=0) != assign_sides(modules, f, seed=1)
    by_module = assign_sides(modules, f, by="module")
    assert any(len({s for s, names in by_module.items() if any(package_of(m) == p for m in names)}) == 2
               for p in PACKAGES)  # a per-module split does put packages on both sides


def test_assign_pins_packages_and_errors_name_the_problem(tmp_path):
    _corpus(tmp_path / "c", {"a": 2, "b": 1, "c": 3}, manifest=False)
    sides = split_corpus(tmp_path / "c", tmp_path / "s", assign={"a": "test", "b": "validation", "c": "train"})
    assert {k: sorted({package_of(m) for m in v}) for k, v in sides.items()} == {
        "train": ["c"], "validation": ["b"], "test": ["a"]}
    with pytest.raises(mlopt.CorpusError, match="side 'validation' gets no module.*assign"):
        split_corpus(tmp_path / "c", tmp_path / "s2", assign={"a": "test", "b": "train", "c": "train"})
    with pytest.raises(mlopt.CorpusError, match="unknown side 'heldout'"):
        split_corpus(tmp_path / "c", tmp_path / "s3", assign={"a": "heldout"})
    with pytest.raises(mlopt.CorpusError, match="package 'zz' is not in the corpus"):
        split_corpus(tmp_path / "c", tmp_path / "s3", assign={"zz": "test"})
    with pytest.raises(mlopt.CorpusError, match="add up to 1"):
        split_corpus(tmp_path / "c", tmp_path / "s3", {"train": 0.5, "test": 0.2})
    with pytest.raises(mlopt.OutputExistsError):  # an existing split is not replaced silently
        split_corpus(tmp_path / "c", tmp_path / "s", assign={"a": "test", "b": "validation", "c": "train"})


def test_manifest_summary_and_table(tmp_path):
    _corpus(tmp_path / "c", {"big": 6, "small": 1})
    m = read_manifest(tmp_path / "c")
    m["packages"].append({"name": "broken", "version": "2", "status": "failed", "stage": "build",
                          "reason": "error: no rule"})
    s = summary(m)
    assert (s["packages"], s["built"], s["modules"], s["text"]) == (3, 2, 7, 700)
    assert s["largest"] == {"name": "big", "share": 600 / 700}
    assert s["failed"] == [{"name": "broken", "stage": "build", "reason": "error: no rule"}]
    table = manifest_table(m)
    assert "85.7%" in table and "failed: broken (build): error: no rule" in table
    (tmp_path / "c" / "corpus_manifest.json").write_text("[1]")
    with pytest.raises(mlopt.CorpusError, match="corpus_manifest.json: expected an object"):
        read_manifest(tmp_path / "c")


def test_cli_split_and_stats(tmp_path, capsys):
    from mlopt.cli import main

    _corpus(tmp_path / "c", PACKAGES)
    assert main(["corpus", "split", str(tmp_path / "c"), str(tmp_path / "s"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["train"] + out["validation"] + out["test"] == sum(PACKAGES.values())
    assert main(["corpus", "stats", str(tmp_path / "c")]) == 0
    assert "pkg39" in capsys.readouterr().out
    assert main(["corpus", "split", str(tmp_path / "c"), str(tmp_path / "t"), "--fractions", "1,2,x"]) == 2
    assert "--fractions" in capsys.readouterr().err


def test_exclude_keeps_packages_out(tmp_path, capsys):
    from mlopt.cli import main

    _corpus(tmp_path / "c", {"keep": 2, "drop": 3, "other": 1})
    names = [e.name for e in corpus_entries(tmp_path / "c", exclude=["drop", "absent"])]
    assert names == ["keep/src/f0.c.o", "keep/src/f1.c.o", "other/src/f0.c.o"]
    assert main(["trace", str(tmp_path / "c"), "-o", str(tmp_path / "t.npz"), "--exclude", "a/b"]) == 2
    assert "'a/b' is not a package name" in capsys.readouterr().err

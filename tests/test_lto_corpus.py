"""LTO corpora: the modules stock lld's LTO backends optimize, saved by the
plugin or by lld's --save-temps, compiled in process to the objects lld links;
a ThinLTO corpus agrees with LLVM's mlgo-utils extract_ir of the same build."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import mlopt
from mlopt.compiler.plugin import lld_flags
from mlopt.corpus import corpus_entries
from mlopt.corpus.lto import extract_lto_corpus, native_object_of
from tests.support.lto import BINARIES, lto_build

pytestmark = [pytest.mark.llvm]


@pytest.fixture(params=("full", "thin"))
def build(request, llvm_tools, plugin, tmp_path):
    return lto_build(tmp_path / "build", request.param, llvm_tools["major"])


def test_saved_modules_compile_to_the_objects_lld_links(build, llvm_tools, tmp_path):
    """-mlopt-save-lto-modules under a random policy: the corpus names one
    module per binary (full) / per backend (thin), and each compiles in process,
    with the same policy, to lld's own object, byte for byte."""
    from tests.test_plugin_lto import _random_policy

    major = llvm_tools["major"]
    policy_dir = _random_policy(build, major, tmp_path / "policy")
    saved = tmp_path / "saved"
    build.link(tmp_path / "out", *lld_flags(model=policy_dir, save_lto_modules=saved, llvm=major),
               "--save-temps=prelink")
    report = extract_lto_corpus(saved, tmp_path / "corpus")
    assert report.lto == build.mode and report.source == "saved" and not report.skipped
    if build.mode == "full":
        assert sorted(report.modules) == sorted(f"{n}.lto" for n in BINARIES)
    else:
        assert {m.split(".thinlto/")[0] for m in report.modules} == set(BINARIES)
        assert len(report.modules) == 2 + 4 + 1 + 1 + 2  # libgeom.so: 4 + cutil's 2; shapes 1; cksum 1 + 2
    desc = json.loads((tmp_path / "corpus" / "corpus_description.json").read_text())
    assert desc["lto"] == build.mode and desc["has_thinlto"] == (build.mode == "thin")
    policy = mlopt.load_policy(policy_dir)
    for entry in corpus_entries(tmp_path / "corpus"):
        module = entry.load(major)
        facts = json.loads(entry.bitcode_path.with_name(entry.bitcode_path.name[:-3] + ".link.json").read_text())
        assert module.lto == build.mode and module.reloc_model == facts["reloc_model"]
        assert facts["reloc_model"] == "pic"  # a shared library, and clang links executables -pie on Debian
        r = mlopt.compile(module, policy, keep_object=True)
        assert r.object == native_object_of(facts).read_bytes(), entry.name


def test_thinlto_corpus_agrees_with_extract_ir(llvm_tools, plugin, tmp_path):
    """lld's --save-temps=import --thinlto-emit-index-files: mlopt's corpus and
    mlgo-utils' extract_ir --thinlto_build=local have the same modules, bitcode
    and index bytes and command override; mlopt reads extract_ir's corpus and
    compiles its modules to lld's objects, and so does stock clang replaying
    each with its index and -thinlto-assume-merged."""
    major = llvm_tools["major"]
    b = lto_build(tmp_path / "build", "thin", major)
    b.link(tmp_path / "out", "--save-temps=import", "--save-temps=prelink", "--thinlto-emit-index-files",
           only=("libgeom.so",))
    obj = tmp_path / "build" / "obj"
    theirs, ours = tmp_path / "extract_ir", tmp_path / "mlopt"
    subprocess.run([sys.executable, "-m", "mlgo.corpus.extract_ir", "--thinlto_build=local",
                    f"--obj_base_dir={obj}", f"--output_dir={theirs}", "--num_workers=1"], check=True,
                   capture_output=True)
    report = extract_lto_corpus(obj, ours)
    assert report.source == "save-temps" and report.lto == "thin"
    d_theirs = json.loads((theirs / "corpus_description.json").read_text())
    d_ours = json.loads((ours / "corpus_description.json").read_text())
    assert sorted(d_theirs["modules"]) == sorted(d_ours["modules"]) and len(d_ours["modules"]) == 6
    assert d_theirs["has_thinlto"] is d_ours["has_thinlto"] is True
    assert d_theirs["global_command_override"] == d_ours["global_command_override"]
    for m in d_ours["modules"]:
        for suffix in (".bc", ".thinlto.bc"):
            assert (theirs / f"{m}{suffix}").read_bytes() == (ours / f"{m}{suffix}").read_bytes(), (m, suffix)
    for entry in corpus_entries(theirs):  # extract_ir's corpus, read by mlopt
        r = mlopt.compile(entry.load(major), keep_object=True)
        native = obj / f"libgeom.so.lto.{entry.name}{'.o' if entry.name.endswith(')') else ''}"
        assert r.object == native.read_bytes(), entry.name
        # and replayed by stock clang as ml-compiler-opt replays a ThinLTO module, with lld's codegen options
        replayed = tmp_path / "replayed.o"
        subprocess.run([f"clang-{major}", "-O2", "-fPIC", "-ffunction-sections", "-fdata-sections", "-faddrsig",
                        "-x", "ir", str(entry.bitcode_path), f"-fthinlto-index={theirs / entry.name}.thinlto.bc",
                        "-mllvm", "-thinlto-assume-merged", "-c", "-o", str(replayed)], check=True)
        assert replayed.read_bytes() == native.read_bytes(), entry.name


def test_no_lto_module_is_one_clear_error(tmp_path):
    (tmp_path / "build").mkdir()
    with pytest.raises(mlopt.CorpusError, match="no LTO module"):
        extract_lto_corpus(tmp_path / "build", tmp_path / "corpus")


def test_a_truncated_lto_module_is_one_error_naming_it(llvm_tools, plugin, tmp_path):
    major = llvm_tools["major"]
    b = lto_build(tmp_path / "build", "full", major)
    b.link(tmp_path / "out", *lld_flags(save_lto_modules=tmp_path / "saved", llvm=major), only=("cksum",))
    extract_lto_corpus(tmp_path / "saved", tmp_path / "corpus")
    [entry] = corpus_entries(tmp_path / "corpus")
    data = entry.bitcode_path.read_bytes()
    entry.bitcode_path.unlink()
    entry.bitcode_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(mlopt.ModuleError, match="cksum.lto"):
        entry.load(major)
    (tmp_path / "corpus" / "cksum.lto.link.json").write_text("{")
    with pytest.raises(mlopt.CorpusError, match="cksum.lto.link.json"):
        entry.load(major)


def test_an_lto_corpus_splits_by_package_into_lto_corpora(tmp_path):
    """corpus split keeps what an LTO corpus is: its description, each
    module's link facts and index."""
    from mlopt.corpus import split_corpus
    from mlopt.corpus.lto import write_lto_description

    corpus = tmp_path / "corpus"
    names = ["a/lib.so.thinlto/x.c", "b/prog.thinlto/y.c"]
    for m in names:
        for suffix, data in ((".bc", b"BC\\xc0\\xde"), (".thinlto.bc", b"index"), (".link.json", b"{}")):
            (corpus / f"{m}{suffix}").parent.mkdir(parents=True, exist_ok=True)
            (corpus / f"{m}{suffix}").write_bytes(data)
    write_lto_description(corpus, "thin", names)
    split_corpus(corpus, tmp_path / "splits", {"train": 0.5, "test": 0.5}, assign={"a": "train", "b": "test"})
    for side, m in (("train", names[0]), ("test", names[1])):
        desc = json.loads((tmp_path / "splits" / side / "corpus_description.json").read_text())
        assert desc["lto"] == "thin" and desc["has_thinlto"] and desc["modules"] == [m]
        assert all((tmp_path / "splits" / side / f"{m}{s}").exists() for s in (".bc", ".thinlto.bc", ".link.json"))
        [entry] = corpus_entries(tmp_path / "splits" / side)
        assert entry.lto == "thin"


def test_link_facts_say_shared_pic_or_static(llvm_tools, plugin, tmp_path):
    """The facts follow the link as lld decides: a shared library, a PIE, and
    the same program linked -no-pie (static code)."""
    major = llvm_tools["major"]
    b = lto_build(tmp_path / "build", "full", major)
    saved = tmp_path / "saved"
    b.link(tmp_path / "out", *lld_flags(save_lto_modules=saved, llvm=major), only=("libgeom.so", "cksum"))
    b.link(tmp_path / "nopie", *lld_flags(save_lto_modules=saved, llvm=major), "-no-pie", only=("cksum",))
    facts = {json.loads(p.read_text())["output_path"].split("/", 3)[-1]: json.loads(p.read_text())
             for p in saved.rglob("*.link.json")}
    by = {k.rsplit("/", 2)[-2] + "/" + k.rsplit("/", 1)[-1]: (f["shared"], f["reloc_model"]) for k, f in facts.items()}
    assert by == {"out/libgeom.so": (True, "pic"), "out/cksum": (False, "pic"), "nopie/cksum": (False, "static")}


def test_native_objects_are_named_as_lld_names_them(tmp_path):
    """lld's --save-temps=prelink: <output>.lto.o (full), <output name>.lto.<module stem>.o beside a
    ThinLTO input (a libtool .lo too), an archive member's whole name with .o."""
    out = str(tmp_path / "lib" / "libz.so.1")
    facts = {"lto": "thin", "output_path": out, "cwd": str(tmp_path / "obj")}
    assert native_object_of({**facts, "lto": "full"}) == tmp_path / "lib" / "libz.so.1.lto.o"
    assert native_object_of({**facts, "module": "a.o"}) == tmp_path / "obj" / "libz.so.1.lto.a.o"
    assert native_object_of({**facts, "module": "sub/mdb.lo"}) == tmp_path / "obj" / "sub" / "libz.so.1.lto.mdb.o"
    assert native_object_of({**facts, "module": "libc.a(b.o at 12)"}) == \
        tmp_path / "obj" / "libz.so.1.lto.libc.a(b.o at 12).o"

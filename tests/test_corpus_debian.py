"""``mlopt corpus debian`` end to end on a real Debian source package
(libyaml: a small C library that builds in well under a minute): fetched
through apt, built by its own dpkg-buildpackage with clang-19 -Oz, extracted;
every module recompiled from its .cmd by stock clang-19 gives the build's own
.text bytes. Failures are reported and skipped, results are cached,
--exclude keeps a package out. Also: deb-src entries derived from apt's
configuration (no network)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import mlopt
from mlopt.corpus import corpus_entries, read_manifest
from mlopt.corpus.debian import (
    DebianConfig,
    PackageSpec,
    debian_corpus,
    language_of,
    parse_package_args,
    read_package_list,
)
from mlopt.corpus.elf import read_sections, text_bytes
from mlopt.debian.apt_sources import deb822, missing_deb_src, read_entries
from mlopt.evaluation import clang_command

PACKAGE = "libyaml"
needs_debian = pytest.mark.skipif(shutil.which("apt-get") is None or shutil.which("clang-19") is None,
                                  reason="needs Debian's apt and clang-19")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """libyaml built once into a fresh cache, its build tree kept."""
    root = tmp_path_factory.mktemp("debian")
    cache = root / "cache"
    config = DebianConfig(llvm=19, keep_tree=True)
    manifest = debian_corpus([PackageSpec(PACKAGE), PackageSpec("mlopt-no-such-source-package")], root / "corpus",
                             config, cache=cache)
    return root, cache, config, manifest


@needs_debian
@pytest.mark.llvm
@pytest.mark.network
@pytest.mark.slow
def test_package_built_by_its_own_build_recompiles_to_the_same_bytes(built, tmp_path):
    root, cache, config, manifest = built
    [pkg, missing] = manifest["packages"]
    assert (pkg["name"], pkg["status"]) == (PACKAGE, "built")
    assert (missing["status"], missing["stage"]) == ("failed", "fetch")
    assert "mlopt-no-such-source-package" in missing["reason"]
    entries = corpus_entries(root / "corpus")
    assert len(entries) == pkg["modules"] >= 8
    assert all(e.name.startswith(f"{PACKAGE}/") for e in entries)
    assert read_manifest(root / "corpus")["flags"] == ["-Oz", "-Xclang", "-fembed-bitcode=all"]
    [result_json] = cache.glob(f"debian/{PACKAGE}/*/*/result.json")
    tree = result_json.parent / "src" / "tree"
    assert pkg["source_sha256"] and len(pkg["source_sha256"]) == 64
    for e in entries:
        obj = tree / e.name.split("/", 1)[1].replace("src/", "src/.libs/", 1)
        if not obj.exists():
            obj = tree / e.name.split("/", 1)[1]
        built_sections = read_sections(obj)
        assert e.bitcode_path.read_bytes() == built_sections[".llvmbc"]
        cmd = e.bitcode_path.with_suffix(".cmd").read_bytes()
        assert language_of(cmd) == "c"
        assert b"-Oz" in cmd.split(b"\0") or b"-Os" in cmd.split(b"\0") or b"-Oz" in cmd
        out = tmp_path / "re.o"
        subprocess.run(clang_command(e, out, None, clang="clang-19"), check=True)
        assert read_sections(out)[".text"] == built_sections[".text"], e.name
    assert pkg["text"] == sum(text_bytes(read_sections(tree / e.name.split("/", 1)[1].replace("src/", "src/.libs/", 1)))
                              for e in entries)
    assert pkg["shipped_text"] > 0  # libyaml-0.so.2 in debian/libyaml-0-2/


@needs_debian
@pytest.mark.llvm
@pytest.mark.network
@pytest.mark.slow
def test_second_run_is_cached_exclude_and_build_failures(built, tmp_path):
    root, cache, config, _ = built
    events = []
    manifest = debian_corpus([PackageSpec(PACKAGE)], tmp_path / "again", config, cache=cache,
                             on_progress=lambda ev, pkg, done, total: events.append((ev, pkg)))
    assert events == [("cached", PACKAGE)]  # nothing rebuilt
    assert [e.name for e in corpus_entries(tmp_path / "again")] == [e.name for e in corpus_entries(root / "corpus")]
    excluded = debian_corpus([PackageSpec(PACKAGE)], tmp_path / "ex", config, cache=cache, exclude=[PACKAGE])
    assert excluded["excluded"] == [PACKAGE] and excluded["packages"] == []
    assert json.loads((tmp_path / "ex" / "corpus_description.json").read_text())["modules"] == []
    # a build that fails (here: a flag clang does not know) is reported with its log's last lines, and cached
    broken = DebianConfig(llvm=19, extra_flags=("-fmlopt-no-such-flag",))
    manifest = debian_corpus([PackageSpec(PACKAGE)], tmp_path / "broken", broken, cache=cache)
    [pkg] = manifest["packages"]
    assert (pkg["status"], pkg["stage"]) == ("failed", "build")
    assert "C compiler cannot create executables" in pkg["reason"] or "-fmlopt-no-such-flag" in pkg["reason"]
    with pytest.raises(mlopt.OutputExistsError):
        debian_corpus([PackageSpec(PACKAGE)], tmp_path / "broken", broken, cache=cache)


def test_deb_src_entries_derived_from_apt_configuration(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text(
        "deb [arch=amd64 signed-by=/k/a.gpg] file:/srv/mirror/debian bookworm main contrib # c\n"
        "deb file:/srv/mirror/debian bookworm-updates main\n"
        "deb-src file:/srv/mirror/debian bookworm-updates main\n"
        "deb [trusted=yes] file:/srv/unsigned/x stable main\n")
    (etc / "sources.list.d" / "sec.sources").write_text(
        "Types: deb\nURIs: file:/srv/sec/debian-security\nSuites: bookworm-security\nComponents: main\n"
        "Signed-By: /k/b.gpg\n\nTypes: deb\nEnabled: no\nURIs: file:/srv/off/\nSuites: x\nComponents: y\n")
    missing = missing_deb_src(read_entries(etc))
    assert [(e.uri, e.suite, e.components) for e in missing] == [
        ("file:/srv/mirror/debian", "bookworm", ("main", "contrib")),
        ("file:/srv/sec/debian-security", "bookworm-security", ("main",))]
    text = deb822(missing)
    assert "Signed-By: /k/a.gpg" in text and "Signed-By: /k/b.gpg" in text
    assert "unsigned" not in text and "arch" not in text.lower().replace("archive", "")
    (etc / "sources.list.d" / "mlopt-deb-src.sources").write_text(text)
    assert missing_deb_src(read_entries(etc)) == []  # written once, then complete


def test_package_lists_and_names():
    specs = read_package_list()
    assert len(specs) >= 40 and len({s.name for s in specs}) == len(specs)
    assert all(s.version and s.domain and s.why for s in specs)
    assert len({s.domain for s in specs}) >= 10
    assert parse_package_args(["zlib", "lz4=1.9.4-1"]) == [PackageSpec("zlib"), PackageSpec("lz4", "1.9.4-1")]
    with pytest.raises(mlopt.CorpusError, match="not a Debian source package name"):
        parse_package_args(["../etc"])
    assert language_of(b"-cc1\0-main-file-name\0x.cpp\0-O2") == "c++"
    assert language_of(b"-cc1\0-main-file-name\0x.c\0-O2") == "c"


def test_build_failure_reason_and_object_selection(tmp_path):
    from mlopt.corpus.debian import _package_objects, build_failure

    log = "\n".join(["checking whether -Werror works... yes", "compiling a.c", "a.c:3:1: error: unknown type 'x'",
                     *[f"line {i}" for i in range(30)], "make: *** [all] Error 2"])
    reason = build_failure(log)
    assert reason.splitlines()[0] == "a.c:3:1: error: unknown type 'x'"
    assert reason.splitlines()[-1] == "make: *** [all] Error 2" and "-Werror" not in reason
    for rel in ("src/a.o", "src/.libs/a.o", "src/b.o", "tests/t.o", "src/examples/e.o", "debian/tmp/x.o",
                "lib/Bench/no.o", "lib/testutil/ok.o"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    objects = {o.name: o.path.relative_to(tmp_path).as_posix() for o in _package_objects(tmp_path)}
    assert objects == {"src/a.o": "src/.libs/a.o", "src/b.o": "src/b.o", "lib/testutil/ok.o": "lib/testutil/ok.o"}


def test_a_build_missing_only_its_documentation_is_recognized():
    """dh_install's own lines (debhelper 13.11) from tiff 4.5.0-6+deb12u4
    built under nodoc without sphinx: man pages listed, not built. Anything
    else missing, or another failure, is not retried."""
    from mlopt.corpus.debian import missing_doc_files

    tiff = "\n".join([
        "dh_install -X.la",
        'dh_install: warning: Cannot find (any matches for) "debian/tmp/usr/share/man/man3" (tried in ., debian/tmp)',
        "", "dh_install: warning: libtiff-dev missing files: debian/tmp/usr/share/man/man3",
        'dh_install: warning: Cannot find (any matches for) "debian/tmp/usr/share/man/man1" (tried in ., debian/tmp)',
        "", "dh_install: warning: libtiff-tools missing files: debian/tmp/usr/share/man/man1",
        "dh_install: warning: libtiff-opengl missing files: debian/tmp/usr/share/man/man1/tiffgt.1",
        "dh_install: error: missing files, aborting",
        "make[1]: *** [debian/rules:26: override_dh_install] Error 25",
        "make: *** [debian/rules:36: binary-arch] Error 2"])
    assert missing_doc_files(tiff) == ["debian/tmp/usr/share/man/man3", "debian/tmp/usr/share/man/man1",
                                       "debian/tmp/usr/share/man/man1/tiffgt.1"]
    library = tiff.replace("debian/tmp/usr/share/man/man3", "debian/tmp/usr/lib/*/libtiff.so.6")
    assert missing_doc_files(library) == []  # a library not built is a real failure
    assert missing_doc_files(tiff.replace("dh_install: error: missing files, aborting", "")) == []
    assert missing_doc_files("a.c:3:1: error: unknown type\nmake: *** [all] Error 2") == []

"""The full-LTO binary objective (problem inlining-lto): a merged module's
rollout costs the .text of the binary lld links from it with --gc-sections
--icf=all, equal to stock clang + lld's binary, for the heuristic and for a
policy the plugin runs in lld; cached rollouts cost what uncached ones do."""

from __future__ import annotations

import json
import shutil

import pytest

from mlopt.compiler.plugin import lld_flags
from mlopt.compiler.relink import is_shared, relink_command, relinked_text
from mlopt.corpus import corpus_entries
from mlopt.corpus.elf import read_sections, text_bytes
from mlopt.corpus.lto import extract_lto_corpus
from mlopt.errors import CorpusError
from mlopt.rollouts import RolloutTask, run_rollouts
from tests.support.lto import BINARIES, lto_build

GC_ICF = ("--gc-sections", "--icf=all")


def _text(path) -> int:
    return text_bytes(read_sections(path))


def _binary_of(name: str) -> str:
    return next(b for b in BINARIES if name == f"{b}.lto")


@pytest.fixture(scope="module")
def lto_corpus(llvm_tools, plugin, tmp_path_factory):
    """The example project with full LTO: its corpus (the plugin's saved modules) and the build."""
    root = tmp_path_factory.mktemp("lto-objective")
    build = lto_build(root / "build", "full", llvm_tools["major"])
    build.link(root / "saved", *lld_flags(llvm=llvm_tools["major"], save_lto_modules=root / "modules"))
    extract_lto_corpus(root / "modules", root / "corpus")
    return build, corpus_entries(root / "corpus"), root


def _costs(entries, policy=None, problem="inlining-lto", **kw):
    results = run_rollouts([RolloutTask(e, policy, problem=problem, **kw) for e in entries], quiet=True)
    assert all(r.ok for r in results), [r.describe() for r in results if not r.ok]
    return {e.name: r.value for e, r in zip(entries, results)}


@pytest.mark.llvm
def test_heuristic_rollout_costs_the_stock_gc_icf_binary(lto_corpus, llvm_tools, tmp_path):
    build, entries, _ = lto_corpus
    stock = build.link(tmp_path / "stock", *GC_ICF)
    plain = build.link(tmp_path / "plain")
    costs = _costs(entries)
    assert sorted(_binary_of(n) for n in costs) == sorted(BINARIES)
    for name, r in costs.items():
        binary = _binary_of(name)
        assert r.cost == _text(stock[binary]), name
        assert _text(stock[binary]) < _text(plain[binary])  # gc-sections and ICF remove code here
    # the same object relinked without the flags is the plain stock link
    import mlopt

    for e in entries:
        obj = mlopt.compile(e.load(llvm_tools["major"]), keep_object=True).object
        facts = json.loads(e.bitcode_path.with_name(e.name + ".link.json").read_text())
        assert relinked_text(obj, facts, llvm=llvm_tools["major"], where=e.name, lld_flags=()) == \
            _text(plain[_binary_of(e.name)])


@pytest.mark.llvm
def test_a_policys_rollout_costs_the_binary_lld_links_with_it(lto_corpus, llvm_tools, tmp_path):
    """A random policy (it changes the binaries): the rollout's cost is the .text of stock lld's gc+icf
    link with the plugin running the same policy; cached rollouts (machine code and prefix reuse) and
    forced decisions cost what uncached compiles do."""
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from tests.test_plugin_lto import _random_mlp

    build, entries, root = lto_corpus
    major = llvm_tools["major"]
    policy = with_linkage_input(with_default_prior(_random_mlp(build, major, tmp_path), margin=1e-3))
    model = policy.export(tmp_path / "random")
    flags = (*lld_flags(model=model, llvm=major), *GC_ICF)
    with_plugin = build.link(tmp_path / "policy", *flags, only=("libgeom.so", "cksum"))
    stock = build.link(tmp_path / "stock", *GC_ICF)
    # shapes links libgeom.so: its merged module (saved by the heuristic's build) is the one lld makes
    # against that build's libgeom.so, so the policy's shapes is linked against the stock library
    (tmp_path / "shapes").mkdir()
    shutil.copy(root / "saved" / "libgeom.so", tmp_path / "shapes" / "libgeom.so")
    with_plugin |= build.link(tmp_path / "shapes", *flags, only=("shapes",))
    uncached = _costs(entries, str(model), cache=False, decisions=True)
    assert any(_text(with_plugin[b]) != _text(stock[b]) for b in BINARIES)  # the policy changes code
    for name, r in uncached.items():
        assert r.cost == _text(with_plugin[_binary_of(name)]), name
    for _ in range(2):  # the second round replays what the first recorded
        cached = _costs(entries, str(model), cache=True)
        assert {n: r.cost for n, r in cached.items()} == {n: r.cost for n, r in uncached.items()}
    forced = {n: "".join(map(str, r.policy_decisions)) for n, r in uncached.items()}
    replayed = run_rollouts([RolloutTask(e, None, problem="inlining-lto", forced=forced[e.name], cache=False)
                             for e in entries], quiet=True)
    assert {e.name: r.value.cost for e, r in zip(entries, replayed)} == {n: r.cost for n, r in uncached.items()}


@pytest.mark.llvm
def test_the_objective_refuses_thinlto_and_factless_modules(lto_corpus, llvm_tools, tmp_path):
    build, entries, root = lto_corpus
    thin = lto_build(tmp_path / "thin", "thin", llvm_tools["major"])
    thin.link(tmp_path / "saved", *lld_flags(llvm=llvm_tools["major"], save_lto_modules=tmp_path / "modules"),
              only=("cksum",))
    extract_lto_corpus(tmp_path / "modules", tmp_path / "corpus")
    r = run_rollouts([RolloutTask(corpus_entries(tmp_path / "corpus")[0], None, problem="inlining-lto")],
                     quiet=True)[0]
    assert not r.ok and "ThinLTO backend module" in r.describe()
    e = entries[0]
    facts = e.bitcode_path.with_name(e.name + ".link.json")
    kept = facts.read_bytes()
    try:
        facts.unlink()
        r = run_rollouts([RolloutTask(e, None, problem="inlining-lto", cache=False)], quiet=True)[0]
        assert not r.ok and f"{e.name}: no link facts" in r.describe()
    finally:
        facts.write_bytes(kept)


def test_relink_follows_the_link_facts(tmp_path):
    assert is_shared({"output": "libz.so.1.3"}) and is_shared({"output": "libz.so"})
    assert not is_shared({"output": "zlib.sos"}) and not is_shared({"output": "lzip"})
    assert not is_shared({"shared": False, "output": "weird.so"})
    with pytest.raises(CorpusError, match="re-extract"):
        is_shared({})
    o, out = tmp_path / "m.o", tmp_path / "b"
    assert relink_command(o, out, {"shared": True}, 19)[:3] == ["clang++-19", "-fuse-ld=lld", "-shared"]
    exe = relink_command(o, out, {"shared": False, "reloc_model": "static"}, 22)
    assert exe[2] == "-no-pie" and "-Wl,--unresolved-symbols=ignore-all" in exe and "-Wl,--icf=all" in exe
    assert relink_command(o, out, {"shared": False, "reloc_model": "pic"}, 19, ())[2:] == \
        ["-pie", str(o), "-o", str(out), "-Wl,--unresolved-symbols=ignore-all", "-Wl,--export-dynamic"]


@pytest.fixture(scope="module")
def thin_corpus(llvm_tools, plugin, tmp_path_factory):
    """The example project with ThinLTO: its corpus and the heuristic's lld objects (--save-temps=prelink)."""
    root = tmp_path_factory.mktemp("thinlto-objective")
    build = lto_build(root / "build", "thin", llvm_tools["major"])
    build.link(root / "saved", *lld_flags(llvm=llvm_tools["major"], save_lto_modules=root / "modules"),
               "--save-temps=prelink")
    extract_lto_corpus(root / "modules", root / "corpus")
    return build, corpus_entries(root / "corpus")


def _lld_link(objects, facts, major, out) -> int:
    import subprocess

    from mlopt.compiler.relink import relink_command

    cmd = relink_command(objects[0], out, facts, major, GC_ICF, objects[1:])
    subprocess.run(cmd, check=True, capture_output=True)
    return _text(out)


@pytest.mark.llvm
def test_a_thinlto_backends_rollout_costs_its_binary_linked_from_llds_objects(thin_corpus, llvm_tools, tmp_path):
    """Problem inlining-thinlto: a backend module's cost, for the heuristic and for a random policy, is the
    .text of lld's own objects linked with gc-sections + ICF: that module's from lld's link with the policy,
    the binary's other backends' from the heuristic's link (the order the objective links them in). And a
    binary judged whole (every backend compiled by the policy, :mod:`mlopt.rollouts.thinlto_binary`) is
    lld's objects of that policy's link, linked."""
    from mlopt.corpus.lto import lto_module_facts, native_object_of
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.rollouts.thinlto_siblings import siblings
    from tests.test_plugin_lto import _random_mlp

    build, entries = thin_corpus
    major = llvm_tools["major"]
    policy = with_linkage_input(with_default_prior(_random_mlp(build, major, tmp_path), margin=1e-3))
    model = policy.export(tmp_path / "random")
    with_policy = build.copy(tmp_path / "p")  # lld writes its objects beside the inputs: a copy of them
    with_policy.link(tmp_path / "p" / "out", *lld_flags(model=model, llvm=major), "--save-temps=prelink",
                     only=("libgeom.so", "cksum"))
    mine = [e for e in entries if e.name.split(".thinlto/")[0] in ("libgeom.so", "cksum")]
    assert len(mine) == 4 + 2 + 1 + 2
    changed = 0
    for policy_path in (None, str(model)):
        costs = _costs(mine, policy_path, problem="inlining-thinlto", cache=False)
        for e in mine:
            others, position = siblings(e)
            lld = [native_object_of(lto_module_facts(o.bitcode_path)) for o in others]
            own = native_object_of(lto_module_facts(e.bitcode_path))
            if policy_path is not None:
                changed += (tmp_path / "p" / "obj" / own.name).read_bytes() != own.read_bytes()
                own = tmp_path / "p" / "obj" / own.name
            expected = _lld_link([*lld[:position], own, *lld[position:]], lto_module_facts(e.bitcode_path), major,
                                 tmp_path / "binary")
            assert costs[e.name].cost == expected, (e.name, policy_path)
        if policy_path is None:  # one binary, one cost, whichever of its modules is costed
            assert len({costs[e.name].cost for e in mine if e.name.startswith("libgeom.so")}) == 1
    assert changed  # the policy changed some backend's code
    # the judge under ThinLTO: every backend compiled by the policy and linked = lld's own link with the plugin
    from mlopt.rollouts.thinlto_binary import ThinLtoBinary, thinlto_binary_text

    for binary in ("libgeom.so", "cksum"):
        backends = sorted((e for e in mine if e.name.startswith(binary + ".thinlto/")), key=lambda e: e.name)
        for policy_path, objects in ((None, None), (str(model), tmp_path / "p" / "obj")):
            own = [native_object_of(lto_module_facts(e.bitcode_path)) for e in backends]
            if objects is not None:
                own = [objects / o.name for o in own]
            expected = _lld_link(own, lto_module_facts(backends[0].bitcode_path), major, tmp_path / "whole")
            judged = ThinLtoBinary(backends, policy_path, major, GC_ICF)
            assert thinlto_binary_text(judged) == expected, (binary, policy_path)

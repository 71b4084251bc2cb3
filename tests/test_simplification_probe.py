"""The simplification probe (TextSizeCache.enable_simplification_probe,
SimplificationProbe.h): it measures, on real modules of both LLVM majors,
what a memo of the inliner walk's function simplification could reuse --
and changes nothing the compiler does."""

import pytest

import mlopt
from mlopt.compiler import TextSizeCache
from tests.support.llvm import debug_info_bitcode


@pytest.fixture(scope="module")
def modules(llvm_tools, corpus_modules):
    return [mlopt.Module(p, opt_level="Oz", reloc_model="pic", llvm=llvm_tools["major"]) for p in corpus_modules]


def _probed():
    # No replay and no decision cache hit can hide a compile: every compile runs LLVM's optimizer.
    cache = TextSizeCache(per_function=False, replay=False, prefix_bytes=0)
    cache.enable_simplification_probe()
    return cache


def test_off_by_default():
    assert TextSizeCache().simplification_probe is None


def test_the_probe_changes_nothing(modules):
    cache = _probed()
    for m in modules[::2]:
        plain = mlopt.compile(m, keep_object=True)
        probed = mlopt.compile(m, keep_object=True, cache=cache)
        assert probed.object == plain.object, m.name
        assert probed.log_bytes == plain.log_bytes, m.name
    assert cache.simplification_probe["compiles"] == len(modules[::2])


def test_a_repeated_compile_hits_every_memoizable_run_and_a_first_one_none(modules):
    cache = _probed()
    for m in modules:
        mlopt.compile(m, cache=cache)
    first = cache.simplification_probe
    assert first["hits"] == 0 and first["hit_seconds"] == 0
    assert first["runs"] > 2 * len(modules)  # one run per function simplified, at least
    assert first["unmemoizable"] < first["runs"]  # only recursive SCCs are never memoized here
    assert 0 < first["run_seconds"] < first["optimizer_seconds"]
    for m in modules:  # the same input, options and decisions: every run repeats an earlier one
        mlopt.compile(m, cache=cache)
    again = cache.simplification_probe
    runs, hits, unmemoizable = (again[k] - first[k] for k in ("runs", "hits", "unmemoizable"))
    assert runs == first["runs"]
    assert hits == runs - unmemoizable


def test_one_flipped_decision_misses_where_it_changed_the_ir(modules):
    """Flipping the first decision changes its caller (and what depends on it), not every function."""
    flipped = 0
    for m in modules[::2]:
        cache = _probed()
        h = mlopt.compile(m, cache=cache)
        if len(h.decisions) < 4 or h.decisions[0] != 1:
            continue
        before = cache.simplification_probe
        mlopt.compile(m, forced_decisions=[0], cache=cache)
        after = cache.simplification_probe
        runs, hits, unmemoizable = (after[k] - before[k] for k in ("runs", "hits", "unmemoizable"))
        assert 0 < hits < runs - unmemoizable, m.name
        flipped += 1
    assert flipped >= 2


def test_debug_info_is_never_a_hit(llvm_tools, tmp_path):
    m = mlopt.Module(debug_info_bitcode(llvm_tools, tmp_path), opt_level="Oz", llvm=llvm_tools["major"])
    cache = _probed()
    mlopt.compile(m, cache=cache)
    mlopt.compile(m, cache=cache)
    p = cache.simplification_probe
    assert p["runs"] > 0 and p["hits"] == 0 and p["unmemoizable"] == p["runs"]

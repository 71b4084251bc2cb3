"""The inliner-prefix cache (TextSizeCache(prefix_bytes=...)): a compile of
a module seen before starts at the inliner from the module the passes before
it left, and its output -- object bytes, training log, decisions -- is the
full compile's, whatever the policy; on real modules of both LLVM majors."""

import pytest

import mlopt
from mlopt.compiler import TextSizeCache
from mlopt.compiler.compile import PREFIX_BYTES_ENV, default_prefix_bytes
from tests.support.llvm import debug_info_bitcode


@pytest.fixture(scope="module")
def modules(llvm_tools, corpus_modules):
    return [mlopt.Module(p, opt_level="Oz", reloc_model="pic", llvm=llvm_tools["major"]) for p in corpus_modules]


def _policy(modules, tmp_path):
    """A random MLP: decisions far from the heuristic's."""
    logs = [r.log for r in mlopt.compile_many(modules[:8], threads=2)]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=100)
    return mlopt.load_policy(mlopt.InlinePolicy.random(vocab, hidden=(16,), seed=7).export(tmp_path / "p"))


def _same(a, b, what):
    assert a.object == b.object, what
    assert a.log_bytes == b.log_bytes, what
    assert a.decisions.tobytes() == b.decisions.tobytes(), what


def _cache(prefix_bytes=64 << 20):
    # Only the prefix: every compile generates its code in full, so the object shows what it did.
    return TextSizeCache(per_function=False, replay=False, prefix_bytes=prefix_bytes)


def test_a_prefix_recorded_under_one_policy_gives_another_its_full_compile(modules, tmp_path):
    policy = _policy(modules, tmp_path)
    cache = _cache()
    heuristic = {m.name: mlopt.compile(m, keep_object=True) for m in modules}  # uncached, compiled once
    for m in modules:  # recorded under the heuristic
        _same(mlopt.compile(m, keep_object=True, cache=cache), heuristic[m.name], m.name)
    assert cache.prefix_misses == len(modules) and cache.prefix_hits == 0
    changed = 0
    for m in modules:  # resumed under the policy, and under the heuristic again
        full = mlopt.compile(m, policy, keep_object=True)
        _same(mlopt.compile(m, policy, keep_object=True, cache=cache), full, m.name)
        _same(mlopt.compile(m, keep_object=True, cache=cache), heuristic[m.name], m.name)
        changed += full.object != heuristic[m.name].object
    assert cache.prefix_hits == 2 * len(modules)
    assert changed > len(modules) // 3  # the policy's compiles really differ from the heuristic's
    assert 0 < cache.prefix_bytes <= 64 << 20


def test_forced_decisions_from_a_resumed_prefix(modules):
    cache = _cache()
    checked = 0
    for m in modules[::3]:
        h = mlopt.compile(m, cache=cache)
        if len(h.decisions) < 2:
            continue
        forced = h.decisions[:2].copy()
        forced[1] ^= 1
        _same(mlopt.compile(m, keep_object=True, forced_decisions=forced, cache=cache),
              mlopt.compile(m, keep_object=True, forced_decisions=forced), m.name)
        checked += 1
    assert checked >= 3 and cache.prefix_hits == checked


def test_a_module_with_debug_info_is_not_kept(llvm_tools, tmp_path):
    """The bitcode round trip of a module with debug info is not faithful (on the Debian corpus, LLVM 19 lost a
    use of a function in 6 such modules): it is compiled in full every time."""
    m = mlopt.Module(debug_info_bitcode(llvm_tools, tmp_path), opt_level="Oz", llvm=llvm_tools["major"])
    cache = _cache()
    first = mlopt.compile(m, keep_object=True, cache=cache)
    second = mlopt.compile(m, keep_object=True, cache=cache)
    assert cache.prefix_hits == 0 and cache.prefix_bytes == 0
    assert b".debug_info" in second.object
    _same(second, first, "debug info")
    _same(second, mlopt.compile(m, keep_object=True), "debug info")


def test_a_pipeline_without_inliner_keeps_nothing(modules):
    cache = _cache()
    for _ in range(2):
        r = mlopt.compile(modules[0], pipeline="default<O0>", keep_object=True, cache=cache)
    assert cache.prefix_hits == 0 and cache.prefix_bytes == 0
    assert r.object == mlopt.compile(modules[0], pipeline="default<O0>", keep_object=True).object


def test_capacity_bounds_what_is_kept(modules):
    sizes = []
    for m in modules[:6]:
        probe = _cache()
        mlopt.compile(m, log=False, cache=probe)
        sizes.append(probe.prefix_bytes)
    capacity = sum(sizes) // 2
    cache = _cache(capacity)
    for m in modules[:6]:
        mlopt.compile(m, log=False, cache=cache)
    assert 0 < cache.prefix_bytes <= capacity
    # The oldest went first; the last one compiled is still there, and an evicted one compiles in full again.
    mlopt.compile(modules[5], log=False, cache=cache)
    assert cache.prefix_hits == 1
    _same(mlopt.compile(modules[0], keep_object=True, cache=cache), mlopt.compile(modules[0], keep_object=True),
          modules[0].name)
    off = _cache(0)
    for _ in range(2):
        mlopt.compile(modules[0], log=False, cache=off)
    assert off.prefix_hits == 0 and off.prefix_bytes == 0


def test_bad_capacity(monkeypatch):
    with pytest.raises(ValueError, match="prefix_bytes"):
        TextSizeCache(prefix_bytes=-1)
    monkeypatch.setenv(PREFIX_BYTES_ENV, "1G")
    with pytest.raises(ValueError, match=PREFIX_BYTES_ENV):
        default_prefix_bytes()
    monkeypatch.setenv(PREFIX_BYTES_ENV, "0")
    assert TextSizeCache().prefix_bytes == 0 and default_prefix_bytes() == 0

"""Per-function reuse of machine code (TextSizeCache(per_function=True)):
a compile that makes new decisions generates code only for the functions
whose optimized IR is new, and its .text size is still exactly the full
compile's -- on real modules under several policies, and on a module built
so that a reused size would be wrong (a jump whose length depends on the
layout)."""

import numpy as np
import pytest

import mlopt


@pytest.fixture(scope="module")
def modules(llvm_tools, corpus_modules):
    return [mlopt.Module(p, opt_level="Oz", reloc_model="pic", llvm=llvm_tools["major"]) for p in corpus_modules]


def _policies(modules, tmp_path):
    """The heuristic, a random MLP and the MLP nudged (what ES compiles
    next): policies that agree on some call sites."""
    logs = [r.log for r in mlopt.compile_many(modules[:12], threads=2)]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=200)
    a = mlopt.InlinePolicy.random(vocab, hidden=(32, 16), seed=5)
    nudged = mlopt.InlinePolicy(vocab, [(w * 1.03, b) for w, b in a.layers])
    return [None] + [mlopt.load_policy(p.export(tmp_path / str(k))) for k, p in enumerate((a, nudged))]


def test_reused_functions_give_the_full_compiles_sizes(modules, tmp_path):
    policies = _policies(modules, tmp_path)
    cache = mlopt.compiler.TextSizeCache()
    modules_only = mlopt.compiler.TextSizeCache(per_function=False)  # the default off switch
    for k, p in enumerate(policies):
        full = mlopt.compile_many(modules, p, log=False, threads=2)
        for m, f in zip(modules, full):
            assert mlopt.compile(m, p, log=False, cache=cache).text_size == f.text_size, (k, m.name)
            if k == 0:
                assert mlopt.compile(m, p, log=False, cache=modules_only).text_size == f.text_size, m.name
        if k == 0:  # little to reuse yet (functions identical in two modules)
            assert cache.functions_reused < cache.functions_compiled / 10
    # Later policies reuse most functions; nothing had to be compiled again.
    assert cache.functions_reused > cache.functions_compiled / 2
    assert cache._cache.compiles_redone == 0
    assert modules_only.functions_reused == modules_only.functions_compiled == 0


def test_forced_flips_reuse_and_keep_sizes(modules):
    """Single flips, as search makes them: one decision changed, the rest
    the heuristic's."""
    cache = mlopt.compiler.TextSizeCache()
    rng = np.random.default_rng(3)
    checked = 0
    for m in modules[::2]:
        h = mlopt.compile(m, cache=cache)
        if len(h.decisions) == 0:
            continue
        for k in rng.choice(len(h.decisions), size=min(2, len(h.decisions)), replace=False):
            forced = h.decisions[:k + 1].copy()
            forced[k] ^= 1
            full = mlopt.compile(m, log=False, forced_decisions=forced)
            assert mlopt.compile(m, log=False, forced_decisions=forced, cache=cache).text_size == full.text_size
            checked += 1
    assert checked > 10
    assert cache.functions_reused > 0


def _minsize_module(padding_stores: int, after: str, before: str = "") -> bytes:
    """x86-64 IR: the functions ``before``, ``@h`` (``padding_stores``
    volatile 10-byte stores to ``@sink``), the functions ``after``; every
    function minsize."""
    stores = "\n".join(f"  store volatile i32 {i}, ptr @sink, align 4" for i in range(padding_stores))
    return f"""
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@sink = global i32 0, align 4
{before}
define void @h() #0 {{
{stores}
  ret void
}}
{after}
attributes #0 = {{ minsize noinline nounwind optsize }}
""".encode()


def _tail_call_module(padding_stores: int) -> bytes:
    """f tail-calls the static g across h; h's size decides whether f's
    jump to g fits in a byte (jmp rel8) or needs four (jmp rel32)."""
    return _minsize_module(padding_stores, before="""
define void @f() #0 {
  tail call void @g()
  ret void
}
""", after="""
define internal void @g() #0 {
  store volatile i32 -1, ptr @sink, align 4
  ret void
}

define void @keep() #0 {
  call void @g()
  ret void
}
""")


def test_a_jump_sized_by_the_layout_is_not_reused(llvm_tools):
    """f is identical in both modules, but its jump to g is 2 bytes when h
    is small and 5 when h is large: f's size must not be reused from the
    first module (the cache learns only functions whose jumps stay inside
    them or are relocated)."""
    llvm = llvm_tools["major"]
    small = mlopt.Module(_tail_call_module(2), opt_level="Oz", reloc_model="static", llvm=llvm)
    large = mlopt.Module(_tail_call_module(40), opt_level="Oz", reloc_model="static", llvm=llvm)
    full_small = mlopt.compile(small, log=False, keep_object=True)
    full_large = mlopt.compile(large, log=False, keep_object=True)
    cache = mlopt.compiler.TextSizeCache()
    assert mlopt.compile(small, log=False, cache=cache).text_size == full_small.text_size
    assert mlopt.compile(large, log=False, cache=cache).text_size == full_large.text_size
    # The modules' own check: f's jump really changed length, g was reused.
    assert b"\xeb" in full_small.object and cache.functions_reused >= 1


def test_cpp_modules_with_comdat_sections(mini_corpus, tmp_path):
    """C++ inline functions live in COMDAT sections of their own."""
    mods = mlopt.load_corpus(mini_corpus)
    assert any(".cpp" in m.name or ".cc" in m.name for m in mods), [m.name for m in mods]
    logs = [r.log for r in mlopt.compile_many(mods, threads=2)]
    policy = mlopt.load_policy(mlopt.InlinePolicy.random(mlopt.Vocab.from_logs(logs, num_buckets=50),
                                                         hidden=(16,), seed=1).export(tmp_path / "p"))
    cache = mlopt.compiler.TextSizeCache()
    for p in (None, policy):
        for m, f in zip(mods, mlopt.compile_many(mods, p, log=False, threads=2)):
            assert mlopt.compile(m, p, log=False, cache=cache).text_size == f.text_size, m.name
    assert cache.functions_reused > 0


def _aligned_asm_module(padding_stores: int) -> bytes:
    """f holds an inline-asm `.p2align 5` (zstd's match loops do): the
    padding, and so f's size, depend on where f starts, which h's size
    decides."""
    return _minsize_module(padding_stores, """
define void @f() #0 {
  store volatile i32 1, ptr @sink, align 4
  call void asm sideeffect ".p2align 5", ""()
  store volatile i32 2, ptr @sink, align 4
  ret void
}
""")


def test_a_function_with_aligning_inline_asm_is_not_reused(llvm_tools):
    llvm = llvm_tools["major"]
    mods = [mlopt.Module(_aligned_asm_module(n), opt_level="Oz", reloc_model="static", llvm=llvm) for n in (1, 2)]
    full = [mlopt.compile(m, log=False, keep_object=True) for m in mods]
    # h grows by one 10-byte store; f's padding makes the modules differ by another amount.
    assert full[1].text_size - full[0].text_size != 10, "f's padding should change with h's size"
    cache = mlopt.compiler.TextSizeCache()
    for m, f in zip(mods, full):
        assert mlopt.compile(m, log=False, cache=cache).text_size == f.text_size

"""mlopt's upkeep of the inliner's features (FeatureUpkeepAdvisor) against LLVM's (MLInlineAdvisor).

Both give LLVM's 38 features; mlopt's keeps a caller's properties after an
inlining without recomputing its dominator tree and loop info. Every
comparison here runs the same compile twice, once with each upkeep
(``-mlopt-inline-features=llvm|mlopt``, ``feature_upkeep=``), and requires
identical bytes: training logs, optimized bitcode, objects, on both LLVM
majors (19 and 22: each test runs for each). That mlopt's upkeep really
runs is seen by what it does not do: LLVM's recomputes the caller's
dominator tree and loop info after an inlining (``-debug-pass-manager``).
"""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest

import mlopt
from mlopt.compiler.plugin import opt_flags
from mlopt.problems import inlining as inliner
from tests.support.llvm import opt

pytestmark = pytest.mark.llvm

UPKEEPS = ("llvm", "mlopt")

# A callee with a loop inlined into a loop of the caller; @tail is asked
# about afterwards, so its row carries the caller's properties after it.
LOOP_INTO_LOOP = """
declare void @use(i32)

define internal i32 @sum(ptr %a, i32 %n) {
entry:
  %c0 = icmp sgt i32 %n, 0
  br i1 %c0, label %loop, label %done
loop:
  %i = phi i32 [ 0, %entry ], [ %i1, %loop ]
  %s = phi i32 [ 0, %entry ], [ %s1, %loop ]
  %p = getelementptr inbounds i32, ptr %a, i32 %i
  %v = load i32, ptr %p
  %s1 = add i32 %s, %v
  %i1 = add nuw nsw i32 %i, 1
  %c = icmp slt i32 %i1, %n
  br i1 %c, label %loop, label %done
done:
  %r = phi i32 [ 0, %entry ], [ %s1, %loop ]
  ret i32 %r
}

define void @tail(ptr %a, i32 %n) {
entry:
  call void @use(i32 %n)
  ret void
}

define void @outer(ptr %a, i32 %n, i32 %m) {
entry:
  %c0 = icmp sgt i32 %m, 0
  br i1 %c0, label %loop, label %exit
loop:
  %j = phi i32 [ 0, %entry ], [ %j1, %loop ]
  %q = getelementptr inbounds i32, ptr %a, i32 %j
  %s = call i32 @sum(ptr %q, i32 %n)
  call void @use(i32 %s)
  %j1 = add nuw nsw i32 %j, 1
  %c = icmp slt i32 %j1, %m
  br i1 %c, label %loop, label %exit
exit:
  call void @tail(ptr %a, i32 %n)
  ret void
}
"""

# Inlining @die (a trap) makes the caller's only loop, and the block after
# it, unreachable; @other in %b is asked about afterwards.
LOOP_DELETED = """
declare void @use(i32)
declare void @llvm.trap()

define internal void @die() {
entry:
  call void @llvm.trap()
  unreachable
}

define void @other(i32 %x) {
entry:
  call void @use(i32 %x)
  ret void
}

define void @f(i1 %p, i32 %n) {
entry:
  br i1 %p, label %a, label %b
a:
  call void @die()
  br label %loop
loop:
  %i = phi i32 [ 0, %a ], [ %i1, %loop ]
  call void @use(i32 %i)
  %i1 = add i32 %i, 1
  %c = icmp slt i32 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  call void @other(i32 %n)
  br label %b
b:
  call void @other(i32 0)
  ret void
}
"""


def _opt_both(llvm_tools, module, tmp_path, *flags, pipeline="default<Oz>"):
    """{upkeep: (training log bytes, optimized bitcode bytes)}."""
    out = {}
    for upkeep in UPKEEPS:
        log, bc = tmp_path / f"{module.stem}.{upkeep}.log", tmp_path / f"{module.stem}.{upkeep}.bc"
        opt(llvm_tools, module, bc, *opt_flags(training_log=log, overwrite_log=True), *flags,
            f"-mlopt-inline-features={upkeep}", pipeline=pipeline)
        out[upkeep] = (log.read_bytes(), bc.read_bytes())
    return out


def test_plugin_logs_and_bitcode_identical_on_corpus(llvm_tools, plugin, corpus_modules, tmp_path):
    """On every corpus module (lz4 + brotli): the training log and the
    optimized module are byte-identical with either upkeep."""
    rows = 0
    for path in corpus_modules:
        out = _opt_both(llvm_tools, path, tmp_path)
        assert out["mlopt"][0] == out["llvm"][0], f"{path.name}: training logs differ"
        assert out["mlopt"][1] == out["llvm"][1], f"{path.name}: optimized bitcode differs"
        rows += len(mlopt.read_log(out["mlopt"][0])[inliner.DECISION])
    assert rows > 2000


@pytest.fixture(scope="module")
def modules(llvm_tools, corpus_modules):
    return [mlopt.Module(p, opt_level="Oz", reloc_model="static", llvm=llvm_tools["major"]) for p in corpus_modules]


@pytest.fixture(scope="module")
def deciding_policy(modules, tmp_path_factory):
    """A compiled random MLP over a vocab of real features: it decides both ways."""
    heuristic = mlopt.compile_many(modules[:12], codegen=False, threads=2)
    vocab = mlopt.Vocab.from_logs([r.log for r in heuristic], num_buckets=200)
    policy = mlopt.InlinePolicy.random(vocab, hidden=(32, 16), seed=11)
    work = tmp_path_factory.mktemp("upkeep-policy")
    so = mlopt.compile_policy(policy.export(work / "model"), work / "policy.so")
    return mlopt.load_policy(so)


def test_engine_decisions_logs_objects_identical_with_a_policy(modules, deciding_policy):
    """In process, with a policy that departs from the heuristic (so more
    and different inlining than the heuristic's): the same decisions,
    logs and objects with either upkeep."""
    results = {u: mlopt.compile_many(modules, policy=deciding_policy, keep_object=True, threads=2,
                                     feature_upkeep=u) for u in UPKEEPS}
    departs = 0
    for m, a, b in zip(modules, results["llvm"], results["mlopt"]):
        assert np.array_equal(a.decisions, b.decisions), m.name
        assert a.log_bytes == b.log_bytes, m.name
        assert a.object == b.object, m.name
        assert not b.warnings, m.name
        departs += int((b.decisions != b.default_decisions).sum())
    assert departs > 100


def _logs(out):
    return {u: mlopt.read_log(out[u][0]) for u in UPKEEPS}


def _assert_same_values(logs):
    for name in (*inliner.FEATURES, inliner.DEFAULT_DECISION, inliner.DECISION):
        assert np.array_equal(logs["llvm"][name], logs["mlopt"][name]), name


def test_callee_with_loop_inlined_into_loop(llvm_tools, plugin, tmp_path):
    """@sum (a loop) is inlined into @outer's loop; the row asked next, in
    the same caller, sees the caller grown by @sum's blocks: every value is
    LLVM's."""
    module = tmp_path / "loop_into_loop.ll"
    module.write_text(LOOP_INTO_LOOP)
    out = _opt_both(llvm_tools, module, tmp_path)
    logs = _logs(out)
    _assert_same_values(logs)
    log = logs["mlopt"]
    decisions = log[inliner.DECISION][:, 0].tolist()
    assert decisions[:2] == [1, 1], decisions  # @sum, then @tail, into @outer
    before, after = log["caller_basic_block_count"][:2, 0]
    assert after > before  # the second row sees @sum's blocks
    assert out["mlopt"] == out["llvm"]


def test_inlining_deletes_the_callers_only_loop(llvm_tools, plugin, tmp_path):
    """Inlining @die makes @f's only loop unreachable (LLVM's walk drops
    it and what only it reached); the next row of @f sees that: every
    value is LLVM's."""
    module = tmp_path / "loop_deleted.ll"
    module.write_text(LOOP_DELETED)
    out = _opt_both(llvm_tools, module, tmp_path)
    logs = _logs(out)
    _assert_same_values(logs)
    log = logs["mlopt"]
    decisions = log[inliner.DECISION][:, 0].tolist()
    assert decisions[0] == 1, decisions  # @die
    before, after = log["caller_basic_block_count"][:2, 0]
    assert after < before  # loop and exit are gone from @f's count
    assert out["mlopt"] == out["llvm"]


# One callee asked about from many call sites whose contexts LLVM's cost
# analyses tell apart (the key of mlopt's InlineCostMemo): arguments with
# the same base and offset, other bases, one alloca at two offsets, other
# constants, a non-constant, a call before unreachable, and repeats of the
# same context in the same caller and in another one. @c8 differs from @c1
# only in whether its pointers share a base; @d2 from @d1 only in an alloca
# (LLVM marks an alloca argument nonnull, so @d1 says so of its own).
MEMO_CONTEXTS = """
declare void @use(i32)
declare void @stop() noreturn

define internal i32 @callee(ptr %p, ptr %q, i32 %n) {
entry:
  %same = icmp eq ptr %p, %q
  br i1 %same, label %early, label %rest
early:
  ret i32 0
rest:
  %x = load i32, ptr %p
  %big = icmp sgt i32 %n, 10
  br i1 %big, label %wide, label %narrow
wide:
  %m = mul i32 %x, %n
  %m2 = mul i32 %m, %x
  %m3 = xor i32 %m2, %n
  call void @use(i32 %m3)
  store i32 %m3, ptr %q
  ret i32 %m3
narrow:
  call void @use(i32 %x)
  ret i32 %x
}

define internal i32 @sink(ptr %p, i32 %n) {
  %x = load i32, ptr %p
  %y = add i32 %x, %n
  call void @use(i32 %y)
  ret i32 %y
}

define i32 @caller(ptr %a, ptr %b, i32 %k) {
entry:
  %buf = alloca [8 x i32]
  %b1 = getelementptr inbounds [8 x i32], ptr %buf, i64 0, i64 1
  %c1 = call i32 @callee(ptr %a, ptr %a, i32 5)
  %c8 = call i32 @callee(ptr %a, ptr %b, i32 5)
  %c9 = call i32 @callee(ptr %buf, ptr %b, i32 5)
  %d1 = call i32 @sink(ptr nonnull %a, i32 5)
  %d2 = call i32 @sink(ptr %buf, i32 5)
  %d3 = call i32 @sink(ptr %b, i32 5)
  %c2 = call i32 @callee(ptr %a, ptr %b1, i32 5)
  %c3 = call i32 @callee(ptr %buf, ptr %b1, i32 5)
  %c4 = call i32 @callee(ptr %a, ptr %b1, i32 20)
  %c5 = call i32 @callee(ptr %a, ptr %b1, i32 %k)
  %c6 = call i32 @callee(ptr %a, ptr %b1, i32 5)
  %s1 = add i32 %c1, %c2
  %s2 = add i32 %s1, %c3
  %s3 = add i32 %s2, %c4
  %s4 = add i32 %s3, %c5
  %s5 = add i32 %s4, %c6
  %s6 = add i32 %s5, %c8
  %s7 = add i32 %s6, %c9
  %s8 = add i32 %s7, %d1
  %s9 = add i32 %s8, %d2
  %s10 = add i32 %s9, %d3
  %z = icmp eq i32 %s10, 0
  br i1 %z, label %dead, label %out
dead:
  %c7 = call i32 @callee(ptr %a, ptr %b1, i32 5)
  call void @stop()
  unreachable
out:
  ret i32 %s10
}

define i32 @other(ptr %x) {
  %c = call i32 @callee(ptr %x, ptr %x, i32 5)
  %d = call i32 @callee(ptr %x, ptr %x, i32 5)
  %s = add i32 %c, %d
  ret i32 %s
}

define i32 @pair(ptr %p, i32 %k, {i32, i32} %s) {
  %v = extractvalue {i32, i32} %s, 0
  %big = icmp sgt i32 %v, 10
  br i1 %big, label %wide, label %narrow
wide:
  %m = mul i32 %v, %k
  call void @use(i32 %m)
  store i32 %m, ptr %p
  ret i32 %m
narrow:
  ret i32 %v
}

define i32 @pairs(ptr %p, i32 %k, {i32, i32} %opaque) {
  %e1 = call i32 @pair(ptr %p, i32 %k, {i32, i32} %opaque)
  %five = insertvalue {i32, i32} %opaque, i32 5, 0
  %e2 = call i32 @pair(ptr %p, i32 %k, {i32, i32} %five)
  %s = add i32 %e1, %e2
  ret i32 %s
}
"""


def _opt_memo_off_and_on(llvm_tools, ir: str, tmp_path):
    """(training log, bitcode) of `opt -Oz` on ir with the memo off, after
    asserting that they are the same with it on; and the memo's (hits,
    misses, call sites not memoized)."""
    module = tmp_path / "memo.ll"
    module.write_text(ir)
    out, stats = {}, {}
    for memo in ("0", "stats"):
        log, bc = tmp_path / f"memo{memo}.log", tmp_path / f"memo{memo}.bc"
        flags = opt_flags(training_log=log, overwrite_log=True, llvm=llvm_tools["major"])
        r = subprocess.run([llvm_tools["opt"], *flags, "-mlopt-inline-features=mlopt", "-passes=default<Oz>",
                            str(module), "-o", str(bc)], capture_output=True, text=True, check=True,
                           env={**os.environ, "MLOPT_INLINE_COST_MEMO": memo})
        out[memo] = (log.read_bytes(), bc.read_bytes())
        stats[memo] = r.stderr
    assert out["stats"] == out["0"]
    assert "inline cost memo" not in stats["0"]
    counts = re.search(r"inline cost memo: (\d+) hits, (\d+) misses, (\d+) call sites", stats["stats"]).groups()
    return out["0"], tuple(map(int, counts))


def test_inline_cost_memo_reuses_only_identical_contexts(llvm_tools, plugin, tmp_path):
    """With the memo and without it, the same training log and bitcode,
    while the memo answers the repeated contexts; the contexts it must tell
    apart do get different cost features from LLVM. @pairs passes @pair an
    opaque aggregate and one built by insertvalue: LLVM 22 folds @pair's
    extractvalue through the latter (not memoized), LLVM 19 sees the same
    context twice."""
    out, (hits, misses, unmemoized) = _opt_memo_off_and_on(llvm_tools, MEMO_CONTEXTS, tmp_path)
    log = mlopt.read_log(out[0])
    costs = ("sroa_savings", "cost_estimate", "dead_blocks", "simplified_instructions", "constant_args",
             "constant_offset_ptr_args", "callsite_cost", "last_call_to_static_bonus")
    rows = {tuple(int(log[c][i, 0]) for c in costs) for i in range(len(log[inliner.DECISION]))}
    assert len(rows) >= 5, rows  # LLVM's analyses tell the contexts apart
    # c6 repeats c2, @other's two calls repeat c1 (LLVM 19: e2 repeats e1): both analyses each
    if llvm_tools["major"] == 19:
        assert hits >= 8 and misses >= 2 * (len(rows) - 1) and unmemoized == 0, (hits, misses, unmemoized)
    else:
        assert hits >= 6 and misses >= 2 * (len(rows) - 2) and unmemoized >= 2, (hits, misses, unmemoized)
    pair_rows = {tuple(int(log[c][i, 0]) for c in costs) for i in range(len(log[inliner.DECISION]))
                 if int(log["callee_users"][i, 0]) == 3 and int(log["callee_basic_block_count"][i, 0]) == 3}
    assert len(pair_rows) == (1 if llvm_tools["major"] == 19 else 2), pair_rows


# @run's indirect call folds to @f when %m is true, and LLVM then analyses
# @f's body for the cost of that call. @f changes (@c1 is inlined into it)
# between the analyses of @c1's and @f's calls to @run, whose keys are equal.
MEMO_NESTED = """
target triple = "x86_64-pc-linux-gnu"
declare void @use(i32)

define void @run(i1 %m) {
  %fp = select i1 %m, ptr @f, ptr @g
  call void %fp()
  ret void
}
define void @c1() {
  call void @run(i1 true)
  ret void
}
define void @c2() {
  call void @run(i1 true)
  ret void
}
define void @f() {
  call void @c1()
  call void @use(i32 1)
  ret void
}
define void @g() {
  call void @use(i32 2)
  ret void
}
"""


def test_inline_cost_memo_skips_callees_that_analyse_other_functions(llvm_tools, plugin, tmp_path):
    """A callee whose indirect call may fold to another function is not
    memoized: that function's body is part of LLVM's answer and may change
    while the callee does not (the logs differ with such a callee memoized)."""
    _, (_, _, unmemoized) = _opt_memo_off_and_on(llvm_tools, MEMO_NESTED, tmp_path)
    assert unmemoized >= 2  # @c1's and @f's calls to @run


MEMO_LOADED = """
target triple = "x86_64-pc-linux-gnu"
declare void @use(i64)
@vt = constant [2 x ptr] [ptr @f, ptr @g]

define void @run(ptr %obj) {
  %fp = load ptr, ptr %obj
  call void %fp()
  %slot = getelementptr inbounds i8, ptr %obj, i64 8
  %gp = load ptr, ptr %slot
  %bits = ptrtoint ptr %gp to i64
  call void @use(i64 %bits)
  ret void
}
define void @c1() {
  call void @run(ptr @vt)
  ret void
}
define void @c2() {
  call void @run(ptr @vt)
  ret void
}
define void @f() {
  call void @c1()
  call void @use(i64 1)
  ret void
}
define void @g() {
  call void @use(i64 2)
  ret void
}
"""


def test_inline_cost_memo_keeps_callees_whose_pointers_come_from_memory(llvm_tools, plugin, tmp_path):
    """An indirect call through a loaded pointer (a vtable slot, here of a
    constant table naming @f, which changes as @c1 is inlined into it) and
    the address bits of a loaded pointer never fold in LLVM's analysis:
    such a callee is memoized, with the same log and bitcode as without."""
    _, (hits, _, unmemoized) = _opt_memo_off_and_on(llvm_tools, MEMO_LOADED, tmp_path)
    assert unmemoized == 0 and hits >= 2


# The call-site height and the module's node and edge counts come from the
# legacy CallGraph's SCCs reachable from its external calling node: @top
# (external) and @taken (its address stored) are roots; @cb is reached only
# through @broker's !callback edge, which also puts it in @top's SCC; @dead1
# and @dead2 call each other and nothing reaches them, so they get no level
# and are not nodes (the inliner alone, so that nothing deletes them first;
# the inliner does not visit them either).
LEVELS = """
@fp = global ptr @taken
declare !callback !0 void @broker(ptr, ptr)
declare void @ext(i32)
define internal void @leaf(i32 %x) {
  call void @ext(i32 %x)
  call void @ext(i32 %x)
  ret void
}
define internal void @mid(i32 %x) {
  call void @leaf(i32 %x)
  call void @leaf(i32 1)
  ret void
}
define void @top(i32 %x) {
  call void @mid(i32 %x)
  call void @broker(ptr @cb, ptr null)
  ret void
}
define internal void @cb(ptr %p) {
  call void @top(i32 3)
  call void @leaf(i32 2)
  ret void
}
define internal void @taken(i32 %x) {
  call void @mid(i32 %x)
  ret void
}
define internal void @dead1(i32 %x) {
  call void @dead2(i32 %x)
  call void @leaf(i32 %x)
  ret void
}
define internal void @dead2(i32 %x) {
  call void @dead1(i32 %x)
  call void @ext(i32 %x)
  ret void
}
!0 = !{!1}
!1 = !{i64 0, i64 1, i1 false}
"""


def test_call_site_heights_and_node_counts_follow_llvms_call_graph(llvm_tools, plugin, tmp_path):
    """mlopt computes the initial levels without building LLVM's CallGraph:
    callback edges, roots and unreachable functions as LLVM has them."""
    module = tmp_path / "levels.ll"
    module.write_text(LEVELS)
    out = _opt_both(llvm_tools, module, tmp_path, pipeline="inliner-wrapper")
    logs = _logs(out)
    _assert_same_values(logs)
    log = logs["mlopt"]
    # mid's two calls (height 1); top's, cb's two and taken's (height 2: cb shares top's SCC)
    assert log["callsite_height"][:, 0].tolist() == [1, 1, 2, 2, 2, 2]
    assert log["node_count"][0, 0] == 5  # leaf, mid, top, cb, taken: not dead1, dead2
    assert log["edge_count"][0, 0] == 6  # their calls to defined functions
    assert out["mlopt"] == out["llvm"]


def test_bad_upkeep_values_are_refused(llvm_tools, plugin, tmp_path):
    module = tmp_path / "loop_into_loop.ll"
    module.write_text(LOOP_INTO_LOOP)
    with pytest.raises(ValueError, match="feature_upkeep must be 'mlopt' or 'llvm'"):
        mlopt.compile(b"not even read", feature_upkeep="fast", llvm=llvm_tools["major"])
    r = opt(llvm_tools, module, tmp_path / "o.bc", *opt_flags(), "-mlopt-inline-features=fast", check=False)
    assert r.returncode != 0 and "mlopt-inline-features" in r.stderr


def test_mlopt_upkeep_runs_and_skips_the_callers_dominator_tree_and_loops(llvm_tools, plugin, tmp_path):
    """After @sum is inlined into @outer, LLVM's upkeep has the dominator tree
    and loop info of @outer computed again; mlopt's does not (on each major)."""
    module = tmp_path / "m.ll"
    module.write_text(LOOP_INTO_LOOP)
    runs = {}
    for upkeep in UPKEEPS:
        r = subprocess.run([llvm_tools["opt"], *opt_flags(llvm=llvm_tools["major"]), "-mlopt-inline-ml-advisor",
                            f"-mlopt-inline-features={upkeep}", "-passes=default<Oz>", "-debug-pass-manager",
                            str(module), "-o", str(tmp_path / "o.bc")], capture_output=True, text=True, check=True)
        runs[upkeep] = len(re.findall(r"Running analysis: (?:LoopAnalysis|DominatorTreeAnalysis) on outer",
                                      r.stdout + r.stderr))
    assert 0 < runs["mlopt"] < runs["llvm"], runs

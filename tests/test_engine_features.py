"""Exact inliner feature values on small hand-written modules.

Each module is run through LLVM's inliner alone (`inliner-wrapper`, the
ModuleInlinerWrapperPass the default pipelines use) in the in-process
compiler, with a Python policy that forces the decisions, so the call sites
are asked about in a known order (bottom-up: callees before callers) and
the expected values follow from the IR by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlopt
from mlopt.problems import inlining as inliner

pytestmark = pytest.mark.llvm  # the in-process engine (libLLVM-19)

HEADER = """target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"
"""

# leaf (1 block) <- mid (4 blocks, one conditional branch) <- top (external)
CHAIN = HEADER + """
declare i32 @opaque(i32)

define internal i32 @leaf(i32 %x) {
  %y = add i32 %x, 1
  ret i32 %y
}

define internal i32 @mid(i32 %x, i32 %c) {
entry:
  %t = icmp sgt i32 %c, 0
  br i1 %t, label %a, label %b
a:
  %r = call i32 @leaf(i32 %x)
  br label %exit
b:
  br label %exit
exit:
  %p = phi i32 [ %r, %a ], [ 0, %b ]
  ret i32 %p
}

define i32 @top(i32 %x) {
  %r = call i32 @mid(i32 %x, i32 5)
  %s = call i32 @opaque(i32 %r)
  ret i32 %s
}
"""

# CHAIN after inlining @leaf into @mid (what the inliner produces, by hand)
LEAF = """define internal i32 @leaf(i32 %x) {
  %y = add i32 %x, 1
  ret i32 %y
}
"""
assert LEAF in CHAIN
CHAIN_LEAF_INLINED = CHAIN.replace(LEAF, "").replace("%r = call i32 @leaf(i32 %x)", "%r = add i32 %x, 1")

# the branch of @pick depends on a parameter the call site does not fix
BRANCHY = HEADER + """
define internal i32 @pick(i32 %x, i32 %c) {
entry:
  %t = icmp sgt i32 %c, 0
  br i1 %t, label %a, label %b
a:
  %r = add i32 %x, 1
  br label %exit
b:
  br label %exit
exit:
  %p = phi i32 [ %r, %a ], [ 0, %b ]
  ret i32 %p
}

define i32 @user(i32 %x, i32 %c) {
  %r = call i32 @pick(i32 %x, i32 %c)
  ret i32 %r
}
"""

# an external callee called twice (once with a constant) and address-taken;
# a coldcc callee
SHARED = HEADER + """
@fp = global ptr @ext

define i32 @ext(i32 %x) {
  %y = mul i32 %x, 3
  ret i32 %y
}

define internal coldcc i32 @chilly(i32 %x) {
  %y = sub i32 %x, 2
  ret i32 %y
}

define i32 @twice(i32 %x) {
  %a = call i32 @ext(i32 %x)
  %b = call i32 @ext(i32 7)
  %c = call coldcc i32 @chilly(i32 %b)
  %d = add i32 %a, %c
  ret i32 %d
}
"""


def features(text: str, name: str, decision: int):
    m = mlopt.Module(text.encode(), name=name)
    log = mlopt.inline_features(m, policy=lambda row: decision, pipeline="inliner-wrapper")
    rows = [{f: int(log[f][i, 0]) for f in inliner.FEATURES} for i in range(len(log))]
    return m, rows


def cost_of(module, caller, callee, nth: int = 0) -> int:
    """getInliningCostEstimate of the nth call from caller to callee."""
    costs = mlopt.call_site_costs(module)
    sites = [i for i in range(len(costs["caller"])) if (costs["caller"][i], costs["callee"][i]) == (caller, callee)]
    assert costs["inlinable"][sites[nth]]
    return int(costs["cost_estimate"][sites[nth]])


def test_chain_without_inlining():
    m, (site1, site2) = features(CHAIN, "chain.ll", 0)
    # mid -> leaf: asked first (bottom-up)
    expect1 = dict(callee_basic_block_count=1, callsite_height=1, node_count=3, nr_ctant_params=0,
                   edge_count=2, caller_users=1, caller_conditionally_executed_blocks=2,
                   caller_basic_block_count=4, callee_conditionally_executed_blocks=0, callee_users=1,
                   is_callee_avail_external=0, is_caller_avail_external=0, is_multiple_blocks=0,
                   last_call_to_static_bonus=1, cold_cc_penalty=0, constant_args=0,
                   callsite_cost=-(5 + 5 + 25), dead_blocks=0)
    assert {k: site1[k] for k in expect1} == expect1
    assert site1["cost_estimate"] == cost_of(m, "mid", "leaf")
    # top -> mid: nothing was inlined, so module-wide counts are unchanged.
    # The constant argument folds mid's branch: block %b is dead, and the
    # only two-way terminator is never analyzed, so is_multiple_blocks = 0.
    expect2 = dict(callee_basic_block_count=4, callsite_height=2, node_count=3, nr_ctant_params=1,
                   edge_count=2, caller_users=1, caller_conditionally_executed_blocks=0,
                   caller_basic_block_count=1, callee_conditionally_executed_blocks=2, callee_users=1,
                   is_multiple_blocks=0, last_call_to_static_bonus=1, constant_args=1,
                   callsite_cost=-(5 + 2 * 5 + 25), dead_blocks=1)
    assert {k: site2[k] for k in expect2} == expect2
    assert site2["cost_estimate"] == cost_of(m, "top", "mid")


def test_unfolded_branch_counts_as_multiple_blocks():
    m, [site] = features(BRANCHY, "branchy.ll", 0)
    assert (site["is_multiple_blocks"], site["dead_blocks"], site["constant_args"], site["nr_ctant_params"]) == (1, 0, 0, 0)  # noqa: E501
    assert (site["callee_basic_block_count"], site["callee_conditionally_executed_blocks"]) == (4, 2)
    assert (site["node_count"], site["edge_count"], site["callsite_height"]) == (2, 1, 1)
    assert site["cost_estimate"] == cost_of(m, "user", "pick")


def test_chain_module_features_update_after_inlining():
    m, (site1, site2) = features(CHAIN, "chain.ll", 1)
    _, (never1, _) = features(CHAIN, "chain.ll", 0)
    assert site1 == never1  # the first decision sees the same IR either way
    # leaf was inlined into mid and deleted (internal, no uses left):
    # one node less; mid's edge to leaf is gone.
    expect2 = dict(node_count=2, edge_count=1, callee_basic_block_count=4, callsite_height=2,
                   callee_conditionally_executed_blocks=2, caller_basic_block_count=1, callee_users=1)
    assert {k: site2[k] for k in expect2} == expect2
    after = mlopt.Module(CHAIN_LEAF_INLINED.encode(), name="chain-after.ll")
    assert site2["cost_estimate"] == cost_of(after, "top", "mid")
    assert site2["cost_estimate"] != cost_of(m, "top", "mid")


def test_shared_and_coldcc_callees():
    m, rows = features(SHARED, "shared.ll", 0)
    assert len(rows) == 3  # twice -> ext, twice -> ext, twice -> chilly
    first, second, cold = rows
    # ext: 2 calls + the @fp initializer + 1 for external linkage
    for r in (first, second):
        assert (r["callee_users"], r["node_count"], r["edge_count"], r["callsite_height"]) == (4, 3, 3, 1)
        assert (r["last_call_to_static_bonus"], r["cold_cc_penalty"]) == (0, 0)
    assert (first["nr_ctant_params"], second["nr_ctant_params"]) == (0, 1)
    assert first["cost_estimate"] == cost_of(m, "twice", "ext", 0)
    assert second["cost_estimate"] == cost_of(m, "twice", "ext", 1)
    assert cold["cold_cc_penalty"] == 1 and cold["last_call_to_static_bonus"] == 1
    assert cold["callee_users"] == 1 and cold["caller_users"] == 1
    # inlining ext (external: it stays) removes one edge per inlined call
    _, (a1, a2, a3) = features(SHARED, "shared.ll", 1)
    assert (a1["edge_count"], a2["edge_count"], a3["edge_count"]) == (3, 2, 1)
    assert (a1["node_count"], a2["node_count"], a3["node_count"]) == (3, 3, 3)


def test_features_match_function_properties():
    """The caller/callee FPI features are the FunctionPropertiesInfo fields
    mlopt.function_properties reports for the untouched module."""
    m, (site1, site2) = features(CHAIN, "chain.ll", 0)
    fpi = mlopt.function_properties(m, detailed=False)
    row = {name: i for i, name in enumerate(fpi["function"])}
    assert list(fpi["function"]) == ["leaf", "mid", "top"]  # declarations excluded
    for site, caller, callee in ((site1, "mid", "leaf"), (site2, "top", "mid")):
        assert site["caller_basic_block_count"] == fpi["BasicBlockCount"][row[caller]]
        assert site["callee_basic_block_count"] == fpi["BasicBlockCount"][row[callee]]
        assert site["caller_users"] == fpi["Uses"][row[caller]]
        assert site["callee_users"] == fpi["Uses"][row[callee]]
        assert (site["callee_conditionally_executed_blocks"]
                == fpi["BlocksReachedFromConditionalInstruction"][row[callee]])
    assert site1["edge_count"] == fpi["DirectCallsToDefinedFunctions"].sum()


def test_no_inliner_in_pipeline_gives_empty_log():
    m = mlopt.Module(CHAIN.encode(), name="chain.ll")
    log = mlopt.inline_features(m, pipeline="function(instcombine)")
    assert len(log) == 0 and log.feature_names[-1] == inliner.DECISION
    r = mlopt.compile(m, pipeline="function(instcombine)")
    assert r.log is None and len(r.decisions) == 0 and r.text_size > 0


@pytest.mark.parametrize("decision", [0, 1])
def test_decisions_follow_the_policy(decision):
    m = mlopt.Module(CHAIN.encode(), name="chain.ll")
    r = mlopt.compile(m, policy=lambda row: decision, pipeline="inliner-wrapper", codegen=False)
    assert np.array_equal(r.decisions, [decision, decision])
    assert r.text_size == 0

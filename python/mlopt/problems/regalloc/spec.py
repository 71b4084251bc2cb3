"""The regalloc eviction problem's tensors: LLVM's ML eviction advisor
(``MLRegAllocEvictAdvisor.cpp``), unchanged from 19 to 22.

Per decision, 20 features of shape [1, 33] -- column c < 32 describes the
c-th physical register of the allocation order (its interfering live
ranges), column 32 the virtual register being allocated; all-zero where
``mask`` is 0 -- and ``progress`` (float [1]). Float [1, 33] features are
divided by their maximum over the columns by LLVM. The decision
``index_to_evict`` is a column with mask 1: c < 32 evicts the interferences
of that register, 32 evicts nothing (the candidate goes on to split or
spill). The reward of development mode is the function's RegAllocScore,
logged as float ``reward``."""

from __future__ import annotations

from ...log import TensorSpec
from ..base import Problem

CANDIDATES = 33  # 32 physical registers + the virtual register itself
NO_EVICTION = 32  # the column of the candidate: evict nothing

# name -> element type, in tensor order (all [1, 33])
COLUMN_FEATURES: tuple[tuple[str, str], ...] = (
    ("mask", "int64_t"), ("is_free", "int64_t"), ("nr_urgent", "float"), ("nr_broken_hints", "float"),
    ("is_hint", "int64_t"), ("is_local", "int64_t"), ("nr_rematerializable", "float"),
    ("nr_defs_and_uses", "float"), ("weighed_reads_by_max", "float"), ("weighed_writes_by_max", "float"),
    ("weighed_read_writes_by_max", "float"), ("weighed_indvars_by_max", "float"),
    ("hint_weights_by_max", "float"), ("start_bb_freq_by_max", "float"), ("end_bb_freq_by_max", "float"),
    ("hottest_bb_freq_by_max", "float"), ("liverange_size", "float"), ("use_def_density", "float"),
    ("max_stage", "int64_t"), ("min_stage", "int64_t"),
)
PROGRESS = "progress"
MASK = "mask"
FEATURES: tuple[str, ...] = (*(n for n, _ in COLUMN_FEATURES), PROGRESS)
DECISION = "index_to_evict"
REWARD = "reward"
LOGITS = "regalloc_logits"


def feature_specs() -> list[TensorSpec]:
    """The 21 input specs, in tensor order."""
    return [*(TensorSpec(n, t, [1, CANDIDATES]) for n, t in COLUMN_FEATURES), TensorSpec(PROGRESS, "float", [1])]


PROBLEM = Problem(
    name="regalloc",
    features=tuple(feature_specs()),
    decision=TensorSpec(DECISION, "int64_t", [1]),
    num_actions=CANDIDATES,
    reward=TensorSpec(REWARD, "float", [1]),
    description="register-allocation eviction (LLVM's ML eviction advisor, 21 features, decision: a column of 33)",
    objective="regalloc_score",
)

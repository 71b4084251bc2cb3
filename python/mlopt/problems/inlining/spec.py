"""The inlining problem's tensors: LLVM's 38 inliner features and its
decision, as the ML inline advisor defines them; on LLVM 22 with an IR2Vec
vocabulary, two float embeddings follow the 38 (``with_ir2vec``)."""

from __future__ import annotations

import numpy as np

from ...log import TensorSpec
from ...policy.batching import feature_matrix as _feature_matrix
from ..base import Problem

FEATURES: tuple[str, ...] = (
    "sroa_savings", "sroa_losses", "load_elimination", "call_penalty", "call_argument_setup",
    "load_relative_intrinsic", "lowered_call_arg_setup", "indirect_call_penalty",
    "jump_table_penalty", "case_cluster_penalty", "switch_default_dest_penalty",
    "switch_penalty", "unsimplified_common_instructions", "num_loops", "dead_blocks",
    "simplified_instructions", "constant_args", "constant_offset_ptr_args", "callsite_cost",
    "cold_cc_penalty", "last_call_to_static_bonus", "is_multiple_blocks", "nested_inlines",
    "nested_inline_cost_estimate", "threshold", "callee_basic_block_count", "callsite_height",
    "node_count", "nr_ctant_params", "cost_estimate", "edge_count", "caller_users",
    "caller_conditionally_executed_blocks", "caller_basic_block_count",
    "callee_conditionally_executed_blocks", "callee_users", "is_callee_avail_external",
    "is_caller_avail_external",
)
DECISION = "inlining_decision"
DEFAULT_DECISION = "inlining_default"
REWARD = "delta_size"
LOGITS = "inlining_logits"
# LLVM 22 appends these (float [D], D = the IR2Vec vocabulary's dimension).
EMBEDDINGS: tuple[str, ...] = ("callee_embedding", "caller_embedding")
IR2VEC = "inlining-ir2vec"


def feature_specs() -> list[TensorSpec]:
    """The 38 input specs, in tensor order."""
    return [TensorSpec(name, "int64_t", [1]) for name in FEATURES]


def decision_spec() -> TensorSpec:
    return TensorSpec(DECISION, "int64_t", [1])


def default_decision_spec() -> TensorSpec:
    return TensorSpec(DEFAULT_DECISION, "int64_t", [1])


def reward_spec() -> TensorSpec:
    return TensorSpec(REWARD, "int64_t", [1])


PROBLEM = Problem(
    name="inlining",
    features=tuple(feature_specs()),
    decision=decision_spec(),
    num_actions=2,
    default_decision=default_decision_spec(),
    reward=reward_spec(),
    description="inlining for size (LLVM's MLInlineAdvisor, 38 features, decision 0/1)",
)


def embedding_specs(dim: int) -> list[TensorSpec]:
    return [TensorSpec(name, "float", [dim]) for name in EMBEDDINGS]


def with_ir2vec(dim: int | str) -> Problem:
    """Inlining on LLVM 22 with IR2Vec: the 38 features, then
    ``callee_embedding`` and ``caller_embedding`` (float [dim]), z-scored per
    element by policies; a policy without them still runs (they are
    optional). Registered as ``inlining-ir2vec:<dim>``."""
    try:
        dim = int(dim)
    except ValueError:
        dim = 0
    if dim < 1:
        from ...errors import ProblemError

        raise ProblemError(f"{IR2VEC} needs the vocabulary's dimension, a positive integer "
                           f"({IR2VEC}:75), not {dim!r}")
    return Problem(
        name=f"{IR2VEC}:{dim}",
        features=(*PROBLEM.features, *embedding_specs(dim)),
        decision=PROBLEM.decision,
        num_actions=2,
        default_decision=PROBLEM.default_decision,
        reward=PROBLEM.reward,
        description=f"inlining for size with LLVM 22's IR2Vec embeddings ({dim}-d)",
        zscore_features=EMBEDDINGS,
        optional_features=EMBEDDINGS,
    )


def feature_matrix(batch) -> np.ndarray:
    """[n, 38] int64 from a Log/LogView, a dict of columns, or an [n, 38] array."""
    return _feature_matrix(batch, PROBLEM.features)

"""Register allocation with an eviction policy, in process (LLVM 19 builds
with regalloc support)::

    r = mlopt.allocate("x.bc", "eviction.so", pipeline="")   # already optimized IR
    r.score, r.scores["main"], r.text_size, r.log             # RegAllocScore, .text, training log

LLVM's own ML eviction advisor extracts the features; the policy answers
each question; an invalid answer (a masked or out-of-range column, a
runaway eviction count) gets LLVM's default advisor's choice and one warning.
Without a policy the default advisor decides everything (objects identical to
stock ``llc``) and the log holds its decisions: behavioral-cloning data.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .._native import engine
from ..corpus import Module
from ..errors import PolicyError
from ..log import Log, read_log
from ..policy import LoadedPolicy, MLPPolicy
from ..problems import load_policy, regalloc
from .compile import _as_module, _codegen_level, map_modules

PathLike = str | os.PathLike
NO_PIPELINE = "function(verify)"  # code generation only: the module is already optimized
# LLVM's RegAllocScore weights (-regalloc-copy-weight, ...), per weighted count.
SCORE_TERMS = ("copies", "loads", "stores", "load_stores", "cheap_remats", "expensive_remats")
LLVM_WEIGHTS = {"copies": 0.2, "loads": 4.0, "stores": 1.0, "load_stores": 5.0, "cheap_remats": 0.2,
                "expensive_remats": 1.0}


@dataclass
class AllocationResult:
    """What one compile with mlopt's eviction advisor produced.

    ``scores``: each function's RegAllocScore (LLVM's ``calculateRegAllocScore``
    right after rewriting: block-frequency-weighted copies, loads, stores and
    rematerializations; lower is better), in code-generation order;
    ``counts``: per function, those block-frequency-weighted counts by
    :data:`SCORE_TERMS` (:meth:`rescore` weighs them differently).
    ``log``: the eviction training log (LLVM's development-mode layout: 21
    features, ``index_to_evict``, ``reward`` = the function's score).
    ``questions``: decisions LLVM's advisor asked for; ``replaced``: answers
    the default advisor's choice replaced (invalid or guarded)."""

    module: str
    text_size: int
    scores: dict[str, float]
    counts: dict[str, dict[str, float]]
    log: Log | None
    log_bytes: bytes = field(repr=False)
    questions: int = 0
    replaced: int = 0
    object: bytes | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        """The module's RegAllocScore: the sum over its functions."""
        return float(sum(self.scores.values()))

    def rescore(self, weights: dict[str, float]) -> float:
        """The module's score with other weights (missing terms keep LLVM's:
        :data:`LLVM_WEIGHTS`; ``load_stores`` is LLVM's load + store weight)."""
        unknown = set(weights) - set(SCORE_TERMS)
        if unknown:
            raise ValueError(f"unknown RegAllocScore terms {sorted(unknown)}; the terms are {list(SCORE_TERMS)}")
        w = {**LLVM_WEIGHTS, **weights}
        if "load_stores" not in weights and ({"loads", "stores"} & set(weights)):
            w["load_stores"] = w["loads"] + w["stores"]
        return float(sum(w[t] * c[t] for c in self.counts.values() for t in SCORE_TERMS))


def regalloc_supported(llvm: int | str | None = None) -> bool:
    """Whether this installation's engine for ``llvm`` has the eviction advisor."""
    from .._native import resolve_llvm

    return bool(getattr(engine(resolve_llvm(llvm)), "regalloc_supported", False))


def regalloc_llvm(llvm: int | str | None = None):
    """``llvm``, or (None) the default major if it has the eviction advisor,
    else the first built major that has it."""
    if llvm is not None:
        return llvm
    from .._native import built_majors, default_llvm

    default = default_llvm()
    if regalloc_supported(default):
        return default
    return next((m for m in built_majors() if regalloc_supported(m)), default)


def _resolve(policy):
    """(C++ policy pool, python callable) for an eviction policy argument."""
    if policy is None:
        return None, None
    if isinstance(policy, (str, os.PathLike)):
        policy = load_policy(policy, regalloc.PROBLEM)
    # Any problem deciding LLVM's eviction (regalloc, regalloc-trace: other objectives).
    if isinstance(policy, LoadedPolicy):
        if policy.problem.decision.name != regalloc.DECISION:
            raise PolicyError(f"{policy.path} is a policy for {policy.problem.name!r}; allocate() needs a "
                              "regalloc eviction policy")
        return policy.pool, None
    if isinstance(policy, MLPPolicy):
        if policy.problem.decision.name != regalloc.DECISION:
            raise PolicyError(f"{policy!r} is a policy for {policy.problem.name!r}; allocate() needs a regalloc "
                              "eviction policy")
        return None, lambda obs, default: int(policy.decide({k: v.reshape(1, -1) for k, v in obs.items()})[0])
    if callable(policy):
        return None, policy
    raise TypeError(f"policy must be None, a path, a loaded policy, an EvictionPolicy or a callable, "
                    f"not {type(policy).__name__}")


def _allocate(module: Module, pool, callback, pipeline: str | None, log: bool, keep_object: bool,
              max_evictions: int, traceable: bool = False) -> AllocationResult:
    if max_evictions < 1:
        raise ValueError(f"max_evictions must be at least 1, not {max_evictions}")
    eng = engine(module.llvm)
    if not getattr(eng, "regalloc_supported", False):
        raise PolicyError(f"this mlopt build has no regalloc eviction advisor for LLVM {module.llvm} (LLVM 19 "
                          "builds fetch LLVM's private headers from Debian's source package at build time)")
    pipeline = module.default_pipeline() if pipeline is None else (pipeline or NO_PIPELINE)
    level = _codegen_level(module, pipeline)
    tri = lambda flag: -1 if flag is None else int(flag)  # noqa: E731
    raw = eng.compile(module._m, pipeline, level, module.target or "", module.reloc_model or "",
                      tri(module.loop_vectorize), tri(module.slp_vectorize), keep_object, False, None, None, None,
                      "", "", regalloc=True, regalloc_policy=pool, regalloc_callable=callback,
                      regalloc_max_evictions=max_evictions, traceable_codegen=traceable)
    log_bytes = raw["regalloc_log"]
    scores: dict[str, float] = {}
    counts: dict[str, dict[str, float]] = {}
    for name, value, terms in raw["regalloc_scores"]:
        scores[name] = scores.get(name, 0.0) + value
        mine = counts.setdefault(name, dict.fromkeys(SCORE_TERMS, 0.0))
        for t, c in zip(SCORE_TERMS, terms, strict=True):
            mine[t] += c
    return AllocationResult(module.name, raw["text_size"], scores, counts,
                            read_log(log_bytes) if log and log_bytes else None, log_bytes if log else b"",
                            raw["regalloc_questions"], raw["regalloc_replaced"], raw["object"],
                            list(raw["warnings"]))


def allocate(module: Module | PathLike | bytes, policy=None, pipeline: str | None = None, log: bool = True, *,
             keep_object: bool = False, llvm: int | str | None = None, max_evictions: int = 100,
             traceable: bool = False) -> AllocationResult:
    """Compile ``module`` (optimized with ``pipeline``: default the module's
    level, ``""`` for none) and allocate its registers with ``policy``
    deciding evictions: None (LLVM's default advisor), a path (``.tflite``,
    model directory, compiled ``.so``), a loaded policy, an
    :class:`mlopt.problems.regalloc.EvictionPolicy`, or a callable
    ``f(features, default_column) -> column`` (features: LLVM's 21 eviction
    tensors as numpy arrays; an exception it raises is re-raised after the
    compile). ``max_evictions``: after a policy made one virtual register
    evict this many times in a function, the default advisor decides for it.
    ``traceable``: generate code as ``mlopt reward build-flags`` makes clang
    do (basic-block address map, the allocation-dependent CFG passes off),
    so that the object can be costed from a trace (:mod:`mlopt.reward`);
    such compiles of one process run one at a time."""
    pool, callback = _resolve(policy)
    mod = _as_module(module, llvm if isinstance(module, Module) else regalloc_llvm(llvm))
    return _allocate(mod, pool, callback, pipeline, log, keep_object, max_evictions, traceable)


def allocate_many(modules: Iterable[Module | PathLike | bytes], policy=None, pipeline: str | None = None,
                  log: bool = True, *, threads: int | None = None, llvm: int | str | None = None,
                  max_evictions: int = 100, keep_object: bool = False, traceable: bool = False,
                  on_result: Callable[[int, AllocationResult], None] | None = None) -> list[AllocationResult]:
    """:func:`allocate` for every module, ``threads`` at a time (default: the
    number of CPUs); results in input order, identical to sequential runs."""
    mods: Sequence[Module] = [_as_module(m, regalloc_llvm(llvm) if not isinstance(m, Module) else llvm)
                              for m in modules]
    pool, callback = _resolve(policy)
    run = lambda m: _allocate(m, pool, callback, pipeline, log, keep_object, max_evictions, traceable)  # noqa: E731
    return map_modules(run, mods, threads, on_result)

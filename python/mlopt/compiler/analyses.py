"""Analyses of a module by LLVM itself, in process: the inliner's features
at every call site it asks about, FunctionPropertiesInfo per function,
getInliningCostEstimate per call."""

from __future__ import annotations

import numpy as np

from .._native import engine
from ..corpus import Module
from ..log import Log, LogWriter, read_log
from ..problems import inlining
from .compile import PathLike, PolicyLike, _as_module, compile


def inline_features(module: Module | PathLike | bytes, policy: PolicyLike = None,
                    pipeline: str | None = None) -> Log:
    """The features of every call site the inliner asks about (with the
    ``inlining_default`` and ``inlining_decision`` taken), as the training
    log :func:`mlopt.read_log` would return; no code generation. An empty log
    when the pipeline has no inliner."""
    result = compile(module, policy, pipeline, log=True, codegen=False)
    if result.log is None:
        w = LogWriter(None, inlining.feature_specs() + [inlining.default_decision_spec(),
                                                        inlining.decision_spec()])
        w.switch_context("")
        return read_log(w.getvalue())
    return result.log


def function_properties(module: Module | PathLike | bytes, detailed: bool = True) -> dict[str, np.ndarray]:
    """LLVM's FunctionPropertiesInfo for every defined function: a dict of
    columns, ``function`` (names) then one int64 array per field (LLVM's
    member names; with ``detailed`` also the fields LLVM computes under
    ``-enable-detailed-function-properties``)."""
    m = _as_module(module)
    functions, fields, values = engine(m.llvm).function_properties(m._m, detailed)
    table: dict[str, np.ndarray] = {"function": np.array(functions, dtype=object)}
    for j, f in enumerate(fields):
        table[f] = values[:, j].copy()
    return table


def call_site_costs(module: Module | PathLike | bytes) -> dict[str, np.ndarray]:
    """Every direct call between functions defined in the module, as it is
    now (no passes run): ``caller``, ``callee``, ``inlinable`` and
    ``cost_estimate`` (LLVM's getInliningCostEstimate, the ``cost_estimate``
    feature the ML inliner logs; 0 where not inlinable)."""
    m = _as_module(module)
    callers, callees, inlinable, costs = engine(m.llvm).call_site_costs(m._m)
    return {"caller": np.array(callers, dtype=object), "callee": np.array(callees, dtype=object),
            "inlinable": inlinable.astype(bool), "cost_estimate": costs}

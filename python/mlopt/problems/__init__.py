"""Optimization problems and their registry.

Each problem is a package here exposing ``PROBLEM`` (a :class:`Problem`:
feature specs, decision spec, number of actions, decision decoding),
``POLICY`` (its policy network, an ``MLPPolicy`` class) and whatever else
is specific to it (its feature helpers).
Generic code takes a Problem or its name::

    mlopt.problems.get("inlining").feature_names
    mlopt.problems.load_policy("policy.so", "regalloc")  # the problem layer of mlopt.load_policy
    mlopt.problems.load_weights("policy.npz")            # a trainable network's saved weights (not a runtime policy)

Adding a problem: a package ``problems/<name>/`` and one line in ``_PACKAGES``.
A problem family with a parameter (``inlining-ir2vec:75``: the IR2Vec
dimension) is a line in ``_PARAMETRIC``: name -> (package, function of the
parameter).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import ProblemError

if TYPE_CHECKING:
    from ..policy.loaded import LoadedPolicy
    from .base import Problem

DEFAULT = "inlining"
# name -> the package defining it (imported when first asked for)
_PACKAGES = {
    "inlining": "mlopt.problems.inlining",
    "inlining-default": "mlopt.problems.inlining_default",
    "inlining-linkage": "mlopt.problems.inlining_linkage",
    "inlining-linked": "mlopt.problems.inlining_linked",
    "inlining-lto": "mlopt.problems.inlining_lto",
    "inlining-thinlto": "mlopt.problems.inlining_thinlto",
    "regalloc": "mlopt.problems.regalloc",
    "regalloc-trace": "mlopt.problems.regalloc_trace",
    "regalloc-trace-cycles": "mlopt.problems.regalloc_trace_cycles",
}
_PARAMETRIC = {
    "inlining-ir2vec": ("mlopt.problems.inlining", "with_ir2vec"),
}


def names() -> list[str]:
    """The registered problems (a parametric one as ``name:<parameter>``)."""
    return [*_PACKAGES, *(f"{n}:<dim>" for n in _PARAMETRIC)]


def is_problem_name(name: str) -> bool:
    """Whether ``get(name)`` names a problem (checked without importing it)."""
    family, colon, parameter = name.partition(":")
    if family in _PARAMETRIC:
        return parameter.isdigit() and int(parameter) > 0
    return not colon and name in _PACKAGES


def get(problem: str | Problem | None = None) -> Problem:
    """A problem by name (default: inlining); a Problem is returned as it is."""
    from .base import Problem

    if isinstance(problem, Problem):
        return problem
    name = DEFAULT if problem is None else problem
    family, _, parameter = name.partition(":")
    if family in _PARAMETRIC:
        package, function = _PARAMETRIC[family]
        return getattr(importlib.import_module(package), function)(parameter)
    if name not in _PACKAGES:
        raise ProblemError(f"no optimization problem {name!r} (known: {', '.join(names())})")
    return importlib.import_module(_PACKAGES[name]).PROBLEM


def load_policy(path, problem: str | Problem | None = None, **kwargs) -> LoadedPolicy:
    """Load a policy (.tflite, model directory or compiled .so) for `problem`
    (default inlining); see :class:`mlopt.policy.LoadedPolicy`."""
    from ..policy.loaded import LoadedPolicy

    return LoadedPolicy(path, get(problem), **kwargs)


def load_weights(path, problem: str | Problem | None = None, *, known_vocabs: dict | None = None):
    """A policy's weights saved by ``save`` (.npz), as the network class of
    the problem they were saved for (``problem``, when given, must be it);
    ``known_vocabs``: see :meth:`mlopt.policy.MLPPolicy.load`."""
    from ..policy.mlp import saved_problem

    wanted = get(problem if problem is not None else saved_problem(path))
    package = importlib.import_module(_package_of(wanted.name))
    return package.POLICY.load(path, problem=wanted, known_vocabs=known_vocabs)


def _package_of(name: str) -> str:
    family = name.partition(":")[0]
    return _PARAMETRIC[family][0] if family in _PARAMETRIC else _PACKAGES[name]


def __getattr__(name: str):
    # The registry itself stays light (the CLI builds its parser from it);
    # the Problem class, with numpy behind it, loads when asked for.
    if name == "Problem":
        from .base import Problem

        return Problem
    raise AttributeError(f"module 'mlopt.problems' has no attribute {name!r}")


__all__ = ["DEFAULT", "Problem", "get", "is_problem_name", "load_policy", "load_weights", "names"]

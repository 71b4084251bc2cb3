"""mlopt: machine-learned compiler optimization policies (MLGO) for stock LLVM 19.

The log API needs no LLVM::

    import mlopt
    log = mlopt.read_log("inline.log")
    log["callee_users"]          # one contiguous ndarray [n_observations, 1]

The in-process compiler (LLVM 19's optimizer and codegen, no subprocess)::

    r = mlopt.compile(mlopt.Module("x.bc"), policy=mlopt.load_policy("p.so"))
    r.text_size, r.decisions, r.log

This module is only the public face: each name below lives in one
subpackage (see docs/architecture.md) and is imported when first used, so
``import mlopt`` loads neither numpy nor LLVM.
"""

from __future__ import annotations

import importlib

# public name -> the module that defines it
_EXPORTS = {
    # errors (every one derives from MloptError)
    **{name: "mlopt.errors" for name in (
        "MloptError", "CompileError", "CorpusError", "FeatureError", "InteractiveError", "LogFormatError",
        "LogUsageError", "ModelFormatError", "ModuleError", "NativeModuleError", "OutputExistsError",
        "PluginNotFoundError", "PolicyCompileError", "PolicyError", "ProblemError", "SpecError", "VocabError",
        "MloptWarning", "TruncatedLogWarning")},
    # logs
    **{name: "mlopt.log" for name in (
        "Log", "LogHeader", "LogStream", "LogView", "LogWriter", "Observation", "TensorSpec", "read_log")},
    # policies (problem-neutral) and problems
    **{name: "mlopt.policy" for name in ("LoadedPolicy", "MLPPolicy", "Vocab", "compile_policy")},
    "load_policy": "mlopt.problems",
    "Problem": "mlopt.problems",
    "InlinePolicy": "mlopt.problems.inlining",
    # modules and corpora
    "Module": "mlopt.corpus",
    "load_corpus": "mlopt.corpus",
    # the in-process compiler
    **{name: "mlopt.compiler" for name in (
        "CompileResult", "call_site_costs", "compile", "compile_many", "function_properties",
        "inline_features")},
}
_SUBPACKAGES = ("cli", "compiler", "corpus", "errors", "log", "policy", "problems", "tflite")

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name == "__version__":
        from ._native import version

        value = version()
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"mlopt.{name}")
    else:
        raise AttributeError(f"module 'mlopt' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *_SUBPACKAGES])

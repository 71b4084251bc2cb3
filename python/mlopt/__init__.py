"""mlopt: machine-learned compiler optimization policies (MLGO) for stock LLVM 19 and 22.

The log API needs no LLVM::

    import mlopt
    log = mlopt.read_log("inline.log")
    log["callee_users"]          # one contiguous ndarray [n_observations, 1]

The in-process compiler (LLVM 19's or 22's optimizer and codegen, no subprocess)::

    r = mlopt.compile(mlopt.Module("x.bc"), policy=mlopt.load_policy("p.so"))
    r.text_size, r.decisions, r.log

This module is only the public face: each name below lives in one
subpackage (see docs/architecture.md) and is imported when first used, so
``import mlopt`` loads neither numpy nor LLVM.
"""

from __future__ import annotations

import importlib

# the module that defines each public name
_HOMES = {
    "mlopt.errors": (  # every error derives from MloptError
        "MloptError", "CompileError", "CorpusError", "FeatureError", "IR2VecVocabError", "InteractiveError",
        "LogFormatError", "LogUsageError", "ModelFormatError", "ModuleError", "NativeModuleError", "OutputExistsError",
        "PluginNotFoundError", "PolicyCompileError", "PolicyError", "ProblemError", "RunDirError", "SpecError",
        "VocabError", "BBAddrMapError", "TraceError", "RewardToolError", "RewardUnsupportedError",
        "MloptWarning", "TruncatedLogWarning"),
    "mlopt.log": ("Log", "LogHeader", "LogStream", "LogView", "LogWriter", "Observation", "TensorSpec", "read_log"),
    "mlopt.policy": ("LoadedPolicy", "MLPPolicy", "Vocab", "compile_policy"),  # problem-neutral
    "mlopt.problems": ("Problem",),
    "mlopt.problems.inlining": ("InlinePolicy",),
    "mlopt.corpus": ("Module", "load_corpus"),
    "mlopt.compiler": ("AllocationResult", "CompileResult", "allocate", "allocate_many", "call_site_costs",
                       "compile", "compile_many", "function_properties", "inline_features", "load_policy"),
}
_EXPORTS = {name: module for module, names in _HOMES.items() for name in names}
_SUBPACKAGES = ("cli", "compiler", "corpus", "errors", "log", "policy", "problems", "reward", "tflite")

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

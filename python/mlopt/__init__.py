"""mlopt: machine-learned compiler optimization policies (MLGO) for stock LLVM 19.

The log API needs no LLVM::

    import mlopt
    log = mlopt.read_log("inline.log")
    log["callee_users"]          # one contiguous ndarray [n_observations, 1]

The in-process compiler (LLVM 19's optimizer and codegen, no subprocess)::

    r = mlopt.compile(mlopt.Module("x.bc"), policy=mlopt.load_policy("p.so"))
    r.text_size, r.decisions, r.log
"""

from . import inliner
from ._core import TensorSpec
from ._errors import (CompileError, LogFormatError, LogUsageError, ModuleError, PolicyError,
                      TruncatedLogWarning)
from .engine import (CompileResult, Module, call_site_costs, compile, compile_many,
                     function_properties, inline_features, load_corpus)
from .log import Log, LogHeader, LogStream, LogView, LogWriter, Observation, read_log
from .policy import InlinePolicy, LoadedPolicy, load_policy
from .policy_compiler import PolicyCompileError, compile_policy
from .vocab import Vocab, VocabError

__version__ = "0.1.0"

__all__ = [
    "CompileError",
    "CompileResult",
    "Module",
    "ModuleError",
    "call_site_costs",
    "compile",
    "compile_many",
    "function_properties",
    "inline_features",
    "load_corpus",
    "Log",
    "LogFormatError",
    "LogHeader",
    "LogStream",
    "LogUsageError",
    "LogView",
    "LogWriter",
    "InlinePolicy",
    "LoadedPolicy",
    "Observation",
    "PolicyCompileError",
    "PolicyError",
    "TensorSpec",
    "TruncatedLogWarning",
    "Vocab",
    "VocabError",
    "compile_policy",
    "inliner",
    "load_policy",
    "read_log",
]

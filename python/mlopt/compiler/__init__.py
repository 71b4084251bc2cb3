"""Running compilers with mlopt: the in-process compiler (``compile``,
``compile_many``, analyses), the pass plugin's flags for stock
``opt``/``clang`` (19 or 22), and the host for LLVM's interactive mode."""

from .allocate import AllocationResult, allocate, allocate_many, regalloc_supported
from .analyses import call_site_costs, function_properties, inline_features
from .compile import (
    CompileResult,
    TextSizeCache,
    compile,
    compile_many,
    inlining_problem,
    largest_first,
    load_policy,
)
from .plugin import clang_flags, clang_flags_string, opt_flags, plugin_path

__all__ = ["AllocationResult", "CompileResult", "TextSizeCache", "allocate", "allocate_many", "call_site_costs",
           "clang_flags", "clang_flags_string", "compile", "compile_many", "function_properties", "inline_features",
           "inlining_problem", "largest_first", "load_policy", "opt_flags", "plugin_path",
           "regalloc_supported"]

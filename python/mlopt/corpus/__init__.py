"""Modules and corpora: :class:`Module` (LLVM-checked bitcode + how clang
compiles it), ``.cmd`` command lines, ml-compiler-opt corpus directories."""

from .command_line import CODEGEN_LEVEL, parse_command_line, split_command_file
from .description import load_corpus
from .module import Module

__all__ = ["CODEGEN_LEVEL", "Module", "load_corpus", "parse_command_line", "split_command_file"]

"""Modules and corpora: :class:`Module` (LLVM-checked bitcode + how clang
compiles it), ``.cmd`` command lines, corpora in the layout of LLVM's
mlgo-utils (read, extract from a build, make from raw bitcode, fetch the
default corpus, split into train and held-out)."""

from .command_line import CODEGEN_LEVEL, parse_command_line, split_command_file
from .description import CorpusEntry, corpus_entries, load_corpus, read_description
from .extract import (
                      ExtractReport,
                      extract_corpus,
                      objects_from_compile_commands,
                      objects_from_list,
                      objects_in_directory,
)
from .fetch import PACKAGES, cache_dir, fetch_corpus, package_names
from .make import make_corpus
from .manifest import read_manifest
from .module import Module
from .split import package_of, split_corpus

__all__ = ["CODEGEN_LEVEL", "PACKAGES", "CorpusEntry", "ExtractReport", "Module", "cache_dir", "corpus_entries",
           "extract_corpus", "fetch_corpus", "load_corpus", "make_corpus", "objects_from_compile_commands",
           "objects_from_list", "objects_in_directory", "package_names", "parse_command_line",
           "package_of", "read_description", "read_manifest", "split_command_file", "split_corpus"]

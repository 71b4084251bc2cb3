"""Every error mlopt raises for bad input, under one base: :class:`MloptError`.

Each class also derives from the built-in exception a Python caller would
expect (``ValueError`` for bad data, ``FileExistsError`` for an output that
exists, ...), so ``except ValueError`` keeps working. The command line turns
any ``MloptError`` (and ``OSError``) into one ``mlopt: error: ...`` line with
exit code 1; anything else is a bug and shows its traceback.

The C++ extensions raise these same classes (``src/python/ErrorTranslator.h``).
This module imports nothing from mlopt: it is the bottom layer.
"""

from __future__ import annotations


class MloptError(Exception):
    """Base of every error mlopt raises because of its input or environment."""


class SpecError(MloptError, ValueError):
    """A tensor spec that is not valid (unknown type, bad shape, bad JSON)."""


class LogFormatError(MloptError, ValueError):
    """A training log or interactive stream is malformed.

    ``offset`` is the byte offset of the problem in the input, ``reason`` says
    what is wrong there and ``path`` names the input when it is a file.
    """

    def __init__(self, reason: str, offset: int, path: str | None = None):
        super().__init__(reason, offset, path)
        self.reason = reason
        self.offset = offset
        self.path = path

    def with_path(self, path) -> LogFormatError:
        return LogFormatError(self.reason, self.offset, str(path))

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{where}byte {self.offset}: {self.reason}"


class LogUsageError(MloptError, RuntimeError):
    """A log writer was called out of order (the log would be corrupt)."""


class PolicyError(MloptError, ValueError):
    """A policy model that cannot be used: unreadable, or whose inputs/outputs
    do not match the compiler's tensors (the message names the tensor)."""


class ModelFormatError(PolicyError):
    """A file that is not a readable .tflite model or model directory."""


class PolicyCompileError(MloptError, ValueError):
    """A .tflite model that ``mlopt policy compile`` cannot turn into a .so
    (unreadable, unsupported operator, no C++ compiler, ...)."""


class VocabError(MloptError, ValueError):
    """A vocabulary directory or file that cannot be used."""


class IR2VecVocabError(VocabError):
    """An IR2Vec vocabulary (LLVM 22's seed embeddings JSON) that LLVM cannot
    read, or asked of an LLVM without IR2Vec."""


class FeatureError(MloptError, KeyError):
    """A batch of features lacks a feature the policy needs, or has the wrong
    shape for it (the message names the feature)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ProblemError(MloptError, LookupError):
    """An optimization problem name that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModuleError(MloptError, ValueError):
    """An input module that LLVM cannot read or that fails verification; the
    message is LLVM's diagnostic, prefixed by the module's name."""


class CorpusError(MloptError, ValueError):
    """A corpus directory or corpus element that cannot be read
    (``corpus_description.json``, a ``.cmd`` file)."""


class CompileError(MloptError, RuntimeError):
    """LLVM reported an error while optimizing or generating code for a module
    (or the pipeline string is not one opt would accept)."""


class InteractiveError(MloptError, RuntimeError):
    """An interactive session with a compiler failed (the message says how)."""


class NativeModuleError(MloptError, ImportError):
    """A compiled part of mlopt is missing: built without LLVM 19, or not built."""


class PluginNotFoundError(MloptError, FileNotFoundError):
    """mlopt has no pass plugin (built without LLVM 19), or $MLOPT_PLUGIN is wrong."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class OutputExistsError(MloptError, FileExistsError):
    """An output file exists and replacing it was not asked for."""

    def __init__(self, path, hint: str = "pass overwrite=True to replace it"):
        super().__init__(f"{path} exists ({hint})")
        self.path = str(path)

    def __str__(self) -> str:
        return str(self.args[0])


class BBAddrMapError(MloptError, ValueError):
    """A binary whose basic-block address map (``.llvm_bb_addr_map``) is
    missing or malformed, or that cannot be read as x86-64 ELF."""


class TraceError(MloptError, ValueError):
    """A basic-block trace file that cannot be used: not a trace, truncated,
    or recorded of another program than the binary it is applied to."""


class RewardUnsupportedError(MloptError, ValueError):
    """The trace reward asked of an LLVM it was not verified for (it reads
    the version-2 BB address map LLVM 19 writes)."""


class RewardToolError(MloptError, RuntimeError):
    """A tool the trace reward runs (valgrind, llvm-objdump, llvm-mca) is
    missing or failed; the message says which and why."""


class RunDirError(MloptError, FileExistsError):
    """A training run directory that cannot be opened as asked: a run exists
    and neither starting over (``force``) nor resuming was asked, nothing to
    resume, or a non-empty directory that is not a run's. A usage error on
    the command line (exit 2)."""


class MloptWarning(UserWarning):
    """Base of mlopt's warnings."""


class TruncatedLogWarning(MloptWarning):
    """``allow_truncated=True`` dropped an incomplete last record."""


__all__ = [name for name, value in list(globals().items())
           if isinstance(value, type) and issubclass(value, (MloptError, MloptWarning))]

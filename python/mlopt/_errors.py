"""Exception types shared by the C++ core and the Python package."""

from __future__ import annotations


class LogFormatError(ValueError):
    """A training log or interactive stream is malformed.

    ``offset`` is the byte offset of the problem in the input, ``reason`` says
    what is wrong there and ``path`` names the input when it is a file.
    """

    def __init__(self, reason: str, offset: int, path: str | None = None):
        super().__init__(reason, offset, path)
        self.reason = reason
        self.offset = offset
        self.path = path

    def with_path(self, path) -> "LogFormatError":
        return LogFormatError(self.reason, self.offset, str(path))

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{where}byte {self.offset}: {self.reason}"


class LogUsageError(RuntimeError):
    """A log writer was called out of order (the log would be corrupt)."""


class TruncatedLogWarning(UserWarning):
    """``allow_truncated=True`` dropped an incomplete last record."""


class PolicyError(ValueError):
    """A policy model that cannot be used: unreadable, or whose inputs/outputs
    do not match the compiler's tensors (the message names the tensor)."""


class ModuleError(ValueError):
    """An input module that LLVM cannot read or that fails verification; the
    message is LLVM's diagnostic, prefixed by the module's name."""


class CompileError(RuntimeError):
    """LLVM reported an error while optimizing or generating code for a module
    (or the pipeline string is not one opt would accept)."""

"""The only loader of mlopt's compiled parts.

- ``core()``: ``mlopt._core``, the LLVM-free C++ core (tensor specs, logs,
  policy runtimes). Always built.
- ``engine()``: ``mlopt._engine``, the in-process compiler over libLLVM-19.
  Built only when LLVM 19 was found at build time.
- ``plugin_library()``: the pass plugin ``MLOptPlugin.so`` (same condition).

A missing part raises :class:`mlopt.errors.NativeModuleError` saying how to
get it, the first time it is needed (never at ``import mlopt``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from .errors import NativeModuleError

PLUGIN_NAME = "MLOptPlugin.so"
_REBUILD = "install llvm-19-dev (ci/install.sh does), then reinstall mlopt"


def core():
    try:
        return importlib.import_module("mlopt._core")
    except ImportError as e:
        raise NativeModuleError(f"mlopt's C++ core (mlopt._core) is not built: {e}; "
                                "reinstall mlopt (pip install .)") from e


def engine():
    core()  # the engine uses the core's types (policies, tensor specs)
    try:
        return importlib.import_module("mlopt._engine")
    except ImportError as e:
        raise NativeModuleError("mlopt was built without LLVM 19, so the in-process compiler "
                                f"is missing; {_REBUILD}") from e


def version() -> str:
    """The version CMake compiled in (taken from pyproject.toml)."""
    return core().__version__


def native_dir() -> Path:
    """The directory holding the compiled modules (the installed package)."""
    return Path(core().__file__).resolve().parent


def plugin_library() -> Path | None:
    """The built pass plugin, or None when mlopt was built without LLVM 19."""
    path = native_dir() / "lib" / PLUGIN_NAME
    return path if path.is_file() else None


def rebuild_hint() -> str:
    return _REBUILD

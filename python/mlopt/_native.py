"""The only loader of mlopt's compiled parts, and the LLVM version table.

- ``core()``: ``mlopt._core``, the LLVM-free C++ core (tensor specs, logs,
  policy runtimes). Always built.
- ``engine(llvm)``: ``mlopt._engine<major>``, the in-process compiler over
  that major's libLLVM. Built for every supported major found at build time.
- ``plugin_library(llvm)``: the pass plugin ``lib/llvm-<major>/MLOptPlugin.so``
  (same condition), for that major's stock ``opt``/``clang``/``llc``.

``LLVM_MAJORS`` is the version table: the majors this mlopt supports. Which
one a call uses: the ``llvm`` argument, else ``$MLOPT_LLVM``, else the
major of the ``clang`` (or ``opt``) on ``PATH`` when it is built, else the
newest built (:func:`default_llvm`).

A missing part raises :class:`mlopt.errors.NativeModuleError` saying how to
get it, the first time it is needed (never at ``import mlopt``).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
from pathlib import Path

from .errors import NativeModuleError

LLVM_MAJORS = (19, 22)  # oldest first; a new major is a row here, in CMakeLists.txt and in LLVMVersion.h
PLUGIN_NAME = "MLOptPlugin.so"


def rebuild_hint(major: int | None = None) -> str:
    majors = [major] if major else list(LLVM_MAJORS)
    packages = " / ".join(f"llvm-{m}-dev" for m in majors)
    return f"install {packages} (ci/install.sh does), then reinstall mlopt"


def core():
    try:
        module = importlib.import_module("mlopt._core")
    except ImportError as e:
        raise NativeModuleError(f"mlopt's C++ core (mlopt._core) is not built: {e}; "
                                "reinstall mlopt (pip install .)") from e
    _export_litert_library()
    return module


LITERT_LIBRARY_ENV = "MLOPT_LITERT_LIBRARY"


def litert_library() -> str | None:
    """LiteRT's runtime as mlopt's loaders find it: ``$MLOPT_LITERT_LIBRARY``,
    else ``libLiteRt.so`` of the ai-edge-litert wheel Python imports (wherever
    pip put it), else None (the C++ loaders then look beside mlopt's modules)."""
    given = os.environ.get(LITERT_LIBRARY_ENV)
    if given:
        return given
    return _wheel_litert_library()


@functools.cache
def _wheel_litert_library() -> str | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec("ai_edge_litert")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "libLiteRt.so"
        if candidate.is_file():
            return str(candidate)
    return None


def _export_litert_library() -> None:
    """The C++ loaders (this process's modules, its workers and the compilers it starts with the plugin)
    look for LiteRT at ``$MLOPT_LITERT_LIBRARY``, then beside mlopt's modules: a source checkout on
    PYTHONPATH has no wheel there. So, unless the user set it, the variable names the wheel Python imports."""
    if LITERT_LIBRARY_ENV not in os.environ:
        found = _wheel_litert_library()
        if found:
            os.environ[LITERT_LIBRARY_ENV] = found


def native_dir() -> Path:
    """The directory holding the compiled modules (the installed package)."""
    return Path(core().__file__).resolve().parent


def _engine_built(major: int) -> bool:
    return any(native_dir().glob(f"_engine{major}.*"))


@functools.cache
def built_majors() -> tuple[int, ...]:
    """The LLVM majors whose parts (engine or plugin) this installation has
    (looked up once per process: an installation does not change under it)."""
    return tuple(m for m in LLVM_MAJORS if _engine_built(m) or (native_dir() / "lib" / f"llvm-{m}" /
                                                                PLUGIN_NAME).is_file())


def _path_major() -> int | None:
    """The major of the ``clang`` (else ``opt``) on PATH, from where it lives
    (``/usr/lib/llvm-19/bin/clang``) or its name (``clang-19``)."""
    for tool in ("clang", "opt"):
        found = shutil.which(tool)
        if not found:
            continue
        for text in (os.path.realpath(found), found):
            m = re.search(r"llvm-(\d+)/|-(\d+)$", text)
            if m:
                return int(m.group(1) or m.group(2))
    return None


def check_llvm(llvm) -> int:
    """``llvm`` as a supported major (an int or a string like "22")."""
    try:
        major = int(str(llvm).split(".")[0])
    except ValueError:
        raise NativeModuleError(f"LLVM major must be a number like 19, not {llvm!r}") from None
    if major not in LLVM_MAJORS:
        raise NativeModuleError(f"LLVM {major} is not supported; this mlopt supports LLVM "
                                f"{', '.join(map(str, LLVM_MAJORS))}")
    return major


def default_llvm() -> int:
    """The major calls without ``llvm=`` use (see the module docstring)."""
    env = os.environ.get("MLOPT_LLVM")
    if env:
        return check_llvm(env)
    built = built_majors()
    if not built:
        raise NativeModuleError(f"mlopt was built without LLVM, so its LLVM parts are missing; {rebuild_hint()}")
    on_path = _path_major()
    return on_path if on_path in built else built[-1]


def resolve_llvm(llvm=None) -> int:
    return default_llvm() if llvm is None else check_llvm(llvm)


def engine(llvm=None):
    """The in-process compiler module for ``llvm`` (default: :func:`default_llvm`)."""
    core()  # the engine uses the core's types (policies, tensor specs)
    major = resolve_llvm(llvm)
    try:
        return importlib.import_module(f"mlopt._engine{major}")
    except ImportError as e:
        raise NativeModuleError(f"mlopt was built without LLVM {major}, so its in-process compiler "
                                f"is missing; {rebuild_hint(major)}") from e


def version() -> str:
    """The version CMake compiled in (taken from pyproject.toml)."""
    return core().__version__


def plugin_library(llvm=None) -> Path | None:
    """The built pass plugin for ``llvm``, or None when mlopt was built without it."""
    path = plugin_file(resolve_llvm(llvm))
    return path if path.is_file() else None


def plugin_file(major: int) -> Path:
    """Where the plugin for ``major`` is installed (whether or not it was built)."""
    return native_dir() / "lib" / f"llvm-{major}" / PLUGIN_NAME

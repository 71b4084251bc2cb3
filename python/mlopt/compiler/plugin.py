"""Where mlopt's pass plugin is, and the flags that load it into opt/clang.

The plugin (built for each supported LLVM major found at build time) gives
stock ``opt`` / ``clang`` of that major MLGO's inline advisor with mlopt's
runners::

    opt-19 -load-pass-plugin=$(mlopt plugin-path) -mlopt-inline-training-log=x.log \\
        -passes='default<Oz>' in.bc -o out.bc
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from .. import _native
from ..errors import PluginNotFoundError


def plugin_path(llvm=None) -> Path:
    """Absolute path of the plugin for LLVM ``llvm`` (default: the major
    mlopt uses, see :func:`mlopt._native.default_llvm`); $MLOPT_PLUGIN
    overrides."""
    override = os.environ.get("MLOPT_PLUGIN")
    if override:
        path = Path(override).resolve()
        if not path.is_file():
            raise PluginNotFoundError(f"MLOPT_PLUGIN={override}: no such file")
        return path
    major = _native.resolve_llvm(llvm)
    path = _native.plugin_library(major)
    if path is None:
        raise PluginNotFoundError(
            f"{_native.plugin_file(major)} is missing: mlopt was built without LLVM {major} "
            f"({_native.rebuild_hint(major)})")
    return path


def _mlopt_options(training_log=None, model=None, overwrite_log=False, ir2vec_vocab=None,
                   regalloc_model=None, replay=None, log_callee_linkage=False,
                   callee_decisions=None) -> list[str]:
    options = []
    if regalloc_model is not None:
        options.append(f"-mlopt-regalloc-model={Path(regalloc_model).resolve()}")
    if ir2vec_vocab is not None:
        options.append(f"-mlopt-inline-ir2vec-vocab={Path(ir2vec_vocab).resolve()}")
    if model is not None:
        options.append(f"-mlopt-inline-model={Path(model).resolve()}")
    if training_log is not None:
        options.append(f"-mlopt-inline-training-log={os.fspath(training_log)}")
        if overwrite_log:
            options.append("-mlopt-inline-training-log-overwrite")
        if log_callee_linkage:
            options.append("-mlopt-inline-log-callee-linkage")
    if replay is not None:
        options.append(f"-mlopt-inline-replay={os.fspath(replay)}")
    if callee_decisions is not None:
        options.append(f"-mlopt-inline-callee-decisions={Path(callee_decisions).resolve()}")
    return options


def opt_flags(*, training_log=None, model=None, overwrite_log: bool = False, llvm=None,
              ir2vec_vocab=None, replay=None, log_callee_linkage: bool = False,
              callee_decisions=None) -> list[str]:
    """Arguments that load the plugin into ``opt-<llvm>`` (options after the plugin).

    ``model``: a .tflite file, a model directory or a compiled policy .so.
    ``training_log``: see :func:`clang_flags`. ``ir2vec_vocab`` (LLVM 22):
    an IR2Vec vocabulary; the inliner's inputs then end with the callee and
    caller embeddings. ``replay``, ``log_callee_linkage``, ``callee_decisions``: see :func:`clang_flags`.
    """
    return [f"-load-pass-plugin={plugin_path(llvm)}",
            *_mlopt_options(training_log, model, overwrite_log, ir2vec_vocab, replay=replay,
                            log_callee_linkage=log_callee_linkage, callee_decisions=callee_decisions)]


def clang_flags(*, training_log=None, model=None, overwrite_log: bool = False, llvm=None,
                ir2vec_vocab=None, regalloc_model=None, replay=None,
                log_callee_linkage: bool = False, callee_decisions=None) -> list[str]:
    """Arguments that load the plugin into ``clang-<llvm>`` with its options.

    ``-fpass-plugin`` runs the plugin; ``-Xclang -load`` makes its
    ``-mllvm`` options known to clang's command line.

    ``training_log``: a file, a directory ending in ``/`` (one
    ``<module>.log`` per translation unit, e.g. ``src_a.c.log``), or a
    pattern where ``%m`` is the module's source file and ``%p`` the process
    id. An existing log is an error unless ``overwrite_log``: in a build of
    many files, one plain file would otherwise keep only the last one's log.
    ``regalloc_model``: an eviction policy (.tflite, model directory or
    compiled .so) deciding the register allocator's evictions.
    ``replay``: a file of '0'/'1' characters (``%m`` as for the log) that
    forces the inliner's first decisions, in the order it asks; the model
    (or the heuristic) decides the rest and is still evaluated.
    ``log_callee_linkage``: the training log also has ``callee_linkage``
    (the inlining-linkage problem's 40th input) before ``inlining_default``.
    ``callee_decisions``: a file of ``<0|1> <callee name>`` lines; every site
    calling a named function gets its decision (``mlopt corpus call-sites
    --callee-decisions`` writes a package's one-site-linkonce rule as one).
    """
    path = plugin_path(llvm)
    flags = [f"-fpass-plugin={path}", "-Xclang", "-load", "-Xclang", str(path)]
    for option in _mlopt_options(training_log, model, overwrite_log, ir2vec_vocab, regalloc_model, replay,
                                 log_callee_linkage, callee_decisions):
        flags += ["-mllvm", option]
    return flags


def clang_flags_string(**kwargs) -> str:
    return shlex.join(clang_flags(**kwargs))

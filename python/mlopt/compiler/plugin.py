"""Where mlopt's pass plugin is, and the flags that load it into opt/clang.

The plugin (built for each supported LLVM major found at build time) gives
stock ``opt`` / ``clang`` of that major MLGO's inline advisor with mlopt's
runners::

    opt-19 -load-pass-plugin=$(mlopt plugin-path) -mlopt-inline-training-log=x.log \\
        -passes='default<Oz>' in.bc -o out.bc

and the LTO backends of stock ``ld.lld`` (:func:`lld_flags`, :func:`clang_flags`
with ``lto=``).
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


LTO_MODES = ("full", "thin")


def lld_flags(*, training_log=None, model=None, overwrite_log: bool = False, llvm=None,
              ir2vec_vocab=None, regalloc_model=None, replay=None, log_callee_linkage: bool = False,
              callee_decisions=None, save_lto_modules=None) -> list[str]:
    """Arguments that run the plugin in ``ld.lld-<llvm>``'s LTO backends (full
    LTO and in-process ThinLTO), for lld's own command line.

    lld parses ``-mllvm`` before it loads pass plugins, so its options would
    be unknown there: ``-mllvm -load=P`` loads the plugin first (its options
    become known), ``--load-pass-plugin=P`` then runs it in each backend.
    Options as for :func:`clang_flags`; at link time ``%m`` (and a directory
    log) names a module after the link's output: ``logs/libz.so.lto.log`` for
    full LTO, ``logs/libz.so.thinlto/<source>.log`` per ThinLTO backend.
    ``save_lto_modules``: a directory where each module LTO optimizes is saved
    with the link's facts (``mlopt corpus extract DIR OUT --lto`` makes a
    corpus of them); link-time only.
    """
    path = plugin_path(llvm)
    flags = ["-mllvm", f"-load={path}"]
    options = _mlopt_options(training_log, model, overwrite_log, ir2vec_vocab, regalloc_model, replay,
                             log_callee_linkage, callee_decisions)
    if save_lto_modules is not None:
        options.append(f"-mlopt-save-lto-modules={Path(save_lto_modules).resolve()}")
    for option in options:
        flags += ["-mllvm", option]
    return [*flags, f"--load-pass-plugin={path}"]


def clang_flags(*, training_log=None, model=None, overwrite_log: bool = False, llvm=None,
                ir2vec_vocab=None, regalloc_model=None, replay=None,
                log_callee_linkage: bool = False, callee_decisions=None, lto=None,
                save_lto_modules=None) -> list[str]:
    """Arguments that load the plugin into ``clang-<llvm>`` with its options.

    ``-fpass-plugin`` runs the plugin; ``-Xclang -load`` makes its
    ``-mllvm`` options known to clang's command line.

    ``lto``: ``"full"`` or ``"thin"``: flags for an LTO build, the same on
    the compile and the link command line (``-flto=<lto> -fuse-ld=lld``, the
    plugin in the pre-link compile and, through ``-Wl,``, in lld's LTO
    backends: :func:`lld_flags`); each half is unused on the other command
    and ``-Wno-unused-command-line-argument`` keeps clang quiet about it.
    A training log must then be a directory or a pattern with ``%m``: the
    compile and the link write one log each. ``save_lto_modules`` (with
    ``lto``): see :func:`lld_flags`.

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
    if lto is not None and lto not in LTO_MODES:
        raise ValueError(f"lto={lto!r}: expected one of {', '.join(LTO_MODES)}")
    path = plugin_path(llvm)
    flags = [f"-fpass-plugin={path}", "-Xclang", "-load", "-Xclang", str(path)]
    options = _mlopt_options(training_log, model, overwrite_log, ir2vec_vocab, regalloc_model, replay,
                             log_callee_linkage, callee_decisions)
    for option in options:
        flags += ["-mllvm", option]
    if lto is None:
        if save_lto_modules is not None:
            raise ValueError("save_lto_modules needs lto='full' or 'thin' (LTO modules exist at link time)")
        return flags
    link = lld_flags(training_log=training_log, model=model, overwrite_log=overwrite_log, llvm=llvm,
                     ir2vec_vocab=ir2vec_vocab, regalloc_model=regalloc_model, replay=replay,
                     log_callee_linkage=log_callee_linkage, callee_decisions=callee_decisions,
                     save_lto_modules=save_lto_modules)
    return [f"-flto={lto}", "-fuse-ld=lld", *flags, *wl_flags(link), "-Wno-unused-command-line-argument"]


def wl_flags(flags: list[str]) -> list[str]:
    """lld's own arguments as clang passes them on a link line: ``-Wl,F``,
    ``-mllvm X`` as one ``-Wl,-mllvm,X``. A flag with a comma cannot pass
    (``-Wl,`` splits at commas): ValueError."""
    for flag in flags:
        if "," in flag:
            raise ValueError(f"{flag}: a path with ',' cannot pass through clang's -Wl, (which splits at commas); "
                             "use lld_flags() on lld's own command line, or a path without ','")
    out, it = [], iter(flags)
    for flag in it:
        out.append(f"-Wl,{flag},{next(it)}" if flag == "-mllvm" else f"-Wl,{flag}")
    return out


def clang_flags_string(**kwargs) -> str:
    return shlex.join(clang_flags(**kwargs))

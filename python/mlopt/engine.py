"""The in-process compiler: LLVM 19's optimizer and code generator inside
Python, with the plugin's inline advisor and policy runners.

    import mlopt
    m = mlopt.Module("lz4.bc")                       # .bc/.ll path or bytes
    r = mlopt.compile(m, policy=mlopt.load_policy("policy.so"))
    r.text_size, r.decisions, r.log["callee_users"]

``compile`` does what ``opt-19 -passes=<pipeline>`` followed by ``llc-19
-filetype=obj`` does (same object bytes), without processes, files or
pipes. The GIL is released while LLVM runs, so ``compile_many(...,
threads=N)`` compiles N modules at once; each compile has its own
LLVMContext and gives the same bytes as a sequential run.
"""

from __future__ import annotations

import json
import os
import shlex
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from . import inliner
from .log import Log, read_log

PathLike = str | os.PathLike

# clang's codegen level for each -O level (clang/lib/CodeGen/BackendUtil).
_CODEGEN_LEVEL = {"O0": 0, "O1": 1, "O2": 2, "O3": 3, "Os": 2, "Oz": 2}


def _engine():
    try:
        from . import _engine as engine
    except ImportError as e:  # built without LLVM 19
        raise ImportError(
            "mlopt was built without LLVM 19, so the in-process compiler is missing; "
            "install llvm-19-dev (ci/install.sh does) and reinstall mlopt") from e
    return engine


class Module:
    """One LLVM module, checked and held as bitcode.

    ``source`` is a path to a ``.bc`` or ``.ll`` file, or the bytes of one.
    Unreadable or invalid IR raises :class:`mlopt.ModuleError` with LLVM's
    diagnostic. ``opt_level`` ("O0".."O3", "Os", "Oz"), ``target`` (a triple)
    and ``reloc_model`` ("static", "pic", ...) say how clang would compile the
    module; :meth:`from_corpus` reads them from an ml-compiler-opt corpus
    element's ``.cmd``. Without them, :func:`compile` runs ``default<Oz>``
    and codegen as plain ``llc-19`` does.
    """

    def __init__(self, source: PathLike | bytes | bytearray | memoryview, *, name: str | None = None,
                 opt_level: str | None = None, target: str | None = None,
                 reloc_model: str | None = None):
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            name = name or "<bytes>"
            self.path: Path | None = None
        else:
            self.path = Path(source)
            try:
                data = self.path.read_bytes()
            except OSError as e:
                raise FileNotFoundError(e.errno, f"cannot read module: {e.strerror}", str(self.path)) from None
            name = name or str(self.path)
        if opt_level is not None and opt_level not in _CODEGEN_LEVEL:
            raise ValueError(f"opt_level must be one of {', '.join(_CODEGEN_LEVEL)}, not {opt_level!r}")
        self._m = _engine().Module(data, name)
        self.opt_level = opt_level
        self.target = target
        self.reloc_model = reloc_model

    @classmethod
    def from_corpus(cls, path: PathLike) -> "Module":
        """A corpus element: ``x.bc`` with its compile command in ``x.cmd``
        (arguments separated by NUL, as ml-compiler-opt's extract_ir writes
        them, or by spaces). The -O level, the target (``-triple``,
        ``--target=``, ``-target``) and the relocation model
        (``-mrelocation-model``, ``-fPIC``/``-fno-pic``...) are taken from it."""
        path = Path(path)
        cmd_path = path.with_suffix(".cmd")
        try:
            text = cmd_path.read_bytes().decode("utf-8", "surrogateescape")
        except OSError as e:
            raise FileNotFoundError(e.errno, f"corpus element has no command line: {e.strerror}",
                                    str(cmd_path)) from None
        args = [a for a in text.split("\0") if a] if "\0" in text else shlex.split(text)
        flags = parse_command_line(args)
        return cls(path, **flags)

    @property
    def name(self) -> str:
        return self._m.name

    @property
    def triple(self) -> str:
        """The target triple compiles use (``target`` if given, else the module's)."""
        return self.target or self._m.triple

    @property
    def bitcode(self) -> bytes:
        return self._m.bitcode

    def default_pipeline(self) -> str:
        return f"default<{self.opt_level or 'Oz'}>"

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in
                        (("opt_level", self.opt_level), ("target", self.target),
                         ("reloc_model", self.reloc_model)) if v)
        return f"Module({self.name!r}, triple={self.triple!r}{extra})"


def parse_command_line(args: Sequence[str]) -> dict:
    """``opt_level``, ``target`` and ``reloc_model`` from a clang driver or
    ``-cc1`` command line (unknown arguments are ignored)."""
    opt_level = target = reloc = None
    cc1 = "-cc1" in args
    pic: bool | None = None
    it = iter(range(len(args)))
    for i in it:
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a.startswith("-O"):
            level = a[2:]
            opt_level = {"": "O1", "0": "O0", "1": "O1", "2": "O2", "3": "O3", "s": "Os", "z": "Oz",
                         "fast": "O3", "g": "O1", "4": "O3"}.get(level, opt_level)
        elif a in ("-triple", "-target", "--target") and nxt is not None:
            target = nxt
            next(it, None)
        elif a.startswith("--target=") or a.startswith("-triple="):
            target = a.split("=", 1)[1]
        elif a == "-mrelocation-model" and nxt is not None:
            reloc = nxt
            next(it, None)
        elif a in ("-fPIC", "-fpic", "-fPIE", "-fpie"):
            pic = True
        elif a in ("-fno-PIC", "-fno-pic", "-fno-PIE", "-fno-pie", "-static"):
            pic = False
    if reloc is None and not cc1:
        if pic is None:
            # clang-19 as Debian ships it defaults to PIE on Linux targets.
            pic = "linux" in (target or "linux")
        reloc = "pic" if pic else "static"
    return {"opt_level": opt_level, "target": target, "reloc_model": reloc}


def load_corpus(directory: PathLike) -> list[Module]:
    """The modules of an ml-compiler-opt corpus (``corpus_description.json``
    listing ``modules``; each ``<m>.bc`` with its ``<m>.cmd``)."""
    directory = Path(directory)
    desc_path = directory / "corpus_description.json"
    try:
        desc = json.loads(desc_path.read_text())
    except OSError as e:
        raise FileNotFoundError(e.errno, f"not a corpus: {e.strerror}", str(desc_path)) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{desc_path}: invalid JSON: {e}") from None
    modules = desc.get("modules") if isinstance(desc, dict) else None
    if not isinstance(modules, list):
        raise ValueError(f"{desc_path}: no 'modules' list")
    return [Module.from_corpus(directory / f"{m}.bc") for m in modules]


@dataclass
class CompileResult:
    """What one in-process compile produced.

    ``text_size``: bytes of ``.text`` in the object code (0 without codegen).
    ``decisions``: the inliner's decision at every call site it asked the
    policy about, in order (int64; the log's ``inlining_decision``).
    ``default_decisions``: the stock heuristic's answer for the same sites.
    ``log``: the training log (the plugin's development-mode layout), or
    None when ``log=False`` or the pipeline has no inliner.
    """

    module: str
    text_size: int
    decisions: np.ndarray
    default_decisions: np.ndarray
    log: Log | None
    log_bytes: bytes = field(repr=False)
    object: bytes | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)


PolicyLike = object  # None | LoadedPolicy | InlinePolicy | path | callable


def _resolve_policy(policy):
    """(engine pool, python callable) for a policy argument."""
    from .policy import InlinePolicy, LoadedPolicy

    if policy is None:
        return None, None
    if isinstance(policy, (str, os.PathLike)):
        policy = LoadedPolicy(policy)
    if isinstance(policy, LoadedPolicy):
        return policy._engine_pool(), None
    if isinstance(policy, InlinePolicy):
        return None, _decision_callable(policy.decide)
    if callable(policy):
        return None, _decision_callable(policy)
    raise TypeError(f"policy must be None, a loaded policy, a path, an InlinePolicy or a callable, "
                    f"not {type(policy).__name__}")


def _decision_callable(fn: Callable) -> Callable:
    def call(row: np.ndarray):
        answer = fn(row)
        a = np.asarray(answer)
        if a.size == 1 and a.dtype.kind in "biu":
            return int(a.reshape(()))
        return answer  # not a decision: the engine reports it with its repr

    return call


def _as_module(m) -> Module:
    return m if isinstance(m, Module) else Module(m)


def _codegen_level(module: Module, pipeline: str) -> int:
    if module.opt_level:
        return _CODEGEN_LEVEL[module.opt_level]
    if pipeline.startswith("default<") and pipeline.endswith(">"):
        return _CODEGEN_LEVEL.get(pipeline[8:-1], 2)
    return 2  # llc's default


def _compile(module: Module, pool, callback, pipeline: str | None, log: bool, codegen: bool,
             keep_object: bool) -> CompileResult:
    pipeline = pipeline or module.default_pipeline()
    level = _codegen_level(module, pipeline) if codegen else -1
    raw = _engine().compile(module._m, pipeline, level, module.target or "", module.reloc_model or "",
                            keep_object, pool, callback)
    log_bytes = raw["log"]
    parsed = read_log(log_bytes) if log_bytes else None
    if parsed is not None:
        decisions = parsed[inliner.DECISION].reshape(-1).copy()
        defaults = parsed[inliner.DEFAULT_DECISION].reshape(-1).copy()
    else:
        decisions = defaults = np.zeros(0, np.int64)
    return CompileResult(module.name, raw["text_size"], decisions, defaults,
                         parsed if log else None, log_bytes if log else b"",
                         raw["object"], list(raw["warnings"]))


def compile(module: Module | PathLike | bytes, policy: PolicyLike = None, pipeline: str | None = None,
            log: bool = True, *, codegen: bool = True, keep_object: bool = False) -> CompileResult:
    """Optimize ``module`` with ``pipeline`` (default ``default<Oz>``, or the
    corpus element's level) with ``policy`` deciding inlining, then generate
    object code in memory at the level clang would use for it.

    ``policy``: None (LLVM's heuristic), a :func:`mlopt.load_policy` result
    or a path (``.tflite``, model directory, compiled ``.so``), an
    :class:`mlopt.InlinePolicy`, or a callable receiving one call site's 38
    features (int64 array in ``mlopt.inliner.FEATURES`` order) and returning
    0 or 1 -- the slow path, for experiments. An exception raised by the
    callable stops further calls (the heuristic decides the rest) and is
    re-raised when the compile ends.
    """
    pool, callback = _resolve_policy(policy)
    return _compile(_as_module(module), pool, callback, pipeline, log, codegen, keep_object)


def compile_many(modules: Iterable[Module | PathLike | bytes], policy: PolicyLike = None,
                 pipeline: str | None = None, log: bool = True, *, threads: int | None = None,
                 codegen: bool = True, keep_object: bool = False,
                 on_result: Callable[[int, CompileResult], None] | None = None) -> list[CompileResult]:
    """:func:`compile` for every module, ``threads`` at a time (default: the
    number of CPUs); results in input order, identical to sequential runs.
    Larger modules start first, so one big module does not finish alone at
    the end while the other threads idle. ``on_result(index, result)`` is
    called in the calling thread as each module finishes (for progress)."""
    mods = [_as_module(m) for m in modules]
    pool, callback = _resolve_policy(policy)
    threads = max(1, threads or os.cpu_count() or 1)
    run = lambda m: _compile(m, pool, callback, pipeline, log, codegen, keep_object)  # noqa: E731
    results: list[CompileResult | None] = [None] * len(mods)
    if threads == 1 or len(mods) <= 1:
        for i, m in enumerate(mods):
            results[i] = run(m)
            if on_result:
                on_result(i, results[i])
        return results  # type: ignore[return-value]
    with ThreadPoolExecutor(max_workers=threads) as ex:
        futures = {ex.submit(run, mods[i]): i for i in largest_first(mods)}
        for f in as_completed(futures):
            i = futures[f]
            results[i] = f.result()
            if on_result:
                on_result(i, results[i])
    return results  # type: ignore[return-value]


def largest_first(modules: Sequence[Module]) -> list[int]:
    """Indices of ``modules`` by decreasing bitcode size (ties: input order)."""
    sizes = [m._m.size for m in modules]
    return sorted(range(len(modules)), key=lambda i: (-sizes[i], i))


def inline_features(module: Module | PathLike | bytes, policy: PolicyLike = None,
                    pipeline: str | None = None) -> Log:
    """The features of every call site the inliner asks about (with the
    ``inlining_default`` and ``inlining_decision`` taken), as the training
    log :func:`mlopt.read_log` would return; no code generation. An empty log
    when the pipeline has no inliner."""
    result = compile(module, policy, pipeline, log=True, codegen=False)
    if result.log is None:
        from .log import LogWriter

        w = LogWriter(None, inliner.feature_specs() + [inliner.default_decision_spec(),
                                                       inliner.decision_spec()])
        w.switch_context("")
        return read_log(w.getvalue())
    return result.log


def function_properties(module: Module | PathLike | bytes, detailed: bool = True) -> dict[str, np.ndarray]:
    """LLVM's FunctionPropertiesInfo for every defined function: a dict of
    columns, ``function`` (names) then one int64 array per field (LLVM's
    member names; with ``detailed`` also the fields LLVM computes under
    ``-enable-detailed-function-properties``)."""
    m = _as_module(module)
    functions, fields, values = _engine().function_properties(m._m, detailed)
    table: dict[str, np.ndarray] = {"function": np.array(functions, dtype=object)}
    for j, f in enumerate(fields):
        table[f] = values[:, j].copy()
    return table


def call_site_costs(module: Module | PathLike | bytes) -> dict[str, np.ndarray]:
    """Every direct call between functions defined in the module, as it is
    now (no passes run): ``caller``, ``callee``, ``inlinable`` and
    ``cost_estimate`` (LLVM's getInliningCostEstimate, the ``cost_estimate``
    feature the ML inliner logs; 0 where not inlinable)."""
    m = _as_module(module)
    callers, callees, inlinable, costs = _engine().call_site_costs(m._m)
    return {"caller": np.array(callers, dtype=object), "callee": np.array(callees, dtype=object),
            "inlinable": inlinable.astype(bool), "cost_estimate": costs}

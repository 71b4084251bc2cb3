"""One LLVM module, checked by LLVM and held as bitcode, with how clang
would compile it (-O level, target, relocation model)."""

from __future__ import annotations

import os
from pathlib import Path

from .._native import engine, resolve_llvm
from ..errors import CorpusError
from .command_line import CODEGEN_LEVEL, clang_vectorizers, parse_command_line, split_command_file

PathLike = str | os.PathLike


class Module:
    """One LLVM module, checked and held as bitcode.

    ``source`` is a path to a ``.bc`` or ``.ll`` file, or the bytes of one.
    Unreadable or invalid IR raises :class:`mlopt.ModuleError` with LLVM's
    diagnostic. ``opt_level`` ("O0".."O3", "Os", "Oz"), ``target`` (a triple)
    and ``reloc_model`` ("static", "pic", ...) say how clang would compile the
    module; :meth:`from_corpus` reads them from an ml-compiler-opt corpus
    element's ``.cmd``. A module given without them is compiled the way
    ``clang-19 -Oz -c`` compiles by default: ``default<Oz>``, codegen -O2 and,
    on Linux targets, position-independent code (Debian's clang-19 builds PIE
    by default); :attr:`notes` says so. Pass ``reloc_model="static"`` for
    what plain ``llc-19`` does.

    ``llvm``: the LLVM major that checks and compiles it (19 or 22; default
    :func:`mlopt._native.default_llvm`); :attr:`llvm` says which.

    ``lto``: ``"full"`` for the merged module of a full-LTO link (lld's
    ``--save-temps`` ``<output>.0.2.internalize.bc``, or mlopt's LTO corpus),
    ``"thin"`` for a ThinLTO backend's post-import module
    (``<object>.3.import.bc``): compiled as lld's LTO backend compiles it,
    ``lto<O2>`` / ``thinlto<O2>`` (``lto_level``: lld's ``--lto-O``) with
    the vectorizers on, a section per function and datum and the
    address-significance table, position-independent unless
    ``reloc_model="static"`` (a non-PIE executable). Its object's code is the
    code lld links into the binary.

    :attr:`notes` also warns when the bitcode was already optimized (an
    ``-Oz -emit-llvm`` module re-optimized is not a training sample) or is
    ``optnone`` (-O0: the inliner is never asked).
    """

    def __init__(self, source: PathLike | bytes | bytearray | memoryview, *, name: str | None = None,
                 opt_level: str | None = None, target: str | None = None,
                 reloc_model: str | None = None, loop_vectorize: bool | None = None,
                 slp_vectorize: bool | None = None, llvm: int | str | None = None,
                 lto: str | None = None, lto_level: str = "O2"):
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
        if lto not in (None, "full", "thin"):
            raise CorpusError(f"lto must be 'full', 'thin' or None, not {lto!r}")
        if lto_level not in ("O0", "O1", "O2", "O3"):
            raise CorpusError(f"lto_level must be O0..O3 (lld's --lto-O), not {lto_level!r}")
        if opt_level is not None and opt_level not in CODEGEN_LEVEL:
            raise CorpusError(f"opt_level must be one of {', '.join(CODEGEN_LEVEL)}, not {opt_level!r}")
        self._name = name
        # LLVM takes UTF-8: a name that is not (a non-UTF-8 path) is shown escaped in its messages.
        self.llvm = resolve_llvm(llvm)  # the LLVM major that loaded it and compiles it
        self._m = engine(self.llvm).Module(data, name.encode("utf-8", "backslashreplace").decode("utf-8"))
        self.opt_level = opt_level
        self.target = target
        self.notes: list[str] = []  # how it is compiled when nothing said so, and doubts about the input
        self.lto = lto
        self.lto_level = lto_level
        if lto is not None:
            vectorize = lto_level in ("O2", "O3")  # lld: the vectorizers above --lto-O1
            loop_vectorize = vectorize if loop_vectorize is None else loop_vectorize
            slp_vectorize = vectorize if slp_vectorize is None else slp_vectorize
            reloc_model = reloc_model or clang_default_reloc_model(self._m.triple)
        elif opt_level is None and target is None and reloc_model is None:
            reloc_model = clang_default_reloc_model(self._m.triple)
            loop_default, slp_default = clang_vectorizers("Oz")
            loop_vectorize = loop_default if loop_vectorize is None else loop_vectorize
            slp_vectorize = slp_default if slp_vectorize is None else slp_vectorize
            self.notes.append(f"{name}: no compile command; compiled as clang-19 -Oz -c would by default "
                              f"(default<Oz>, {reloc_model} code, SLP vectorizer on)")
        self.reloc_model = reloc_model
        self.loop_vectorize = loop_vectorize
        self.slp_vectorize = slp_vectorize
        self.notes += optimization_notes(name, self._m)

    @classmethod
    def from_corpus(cls, path: PathLike, command: list[str] | tuple[str, ...] | None = None,
                    name: str | None = None, llvm: int | str | None = None) -> Module:
        """A corpus element: ``x.bc`` with its compile command in ``x.cmd``
        (arguments separated by NUL, as ml-compiler-opt's extract_ir writes
        them, or by spaces), or ``command`` (a corpus' global command line
        override). The -O level, the target (``-triple``, ``--target=``,
        ``-target``), the relocation model (``-mrelocation-model``,
        ``-fPIC``/``-fno-pic``...) and the vectorizers are taken from it."""
        path = Path(path)
        if command is not None:
            args = list(command)
        else:
            cmd_path = path.with_suffix(".cmd")
            try:
                text = cmd_path.read_bytes().decode("utf-8", "surrogateescape")
            except OSError as e:
                raise FileNotFoundError(e.errno, f"corpus element has no command line: {e.strerror}",
                                        str(cmd_path)) from None
            try:
                args = split_command_file(text)
            except ValueError as e:  # shlex: unbalanced quotes
                raise CorpusError(f"{cmd_path}: cannot split the command line: {e}") from None
        flags = parse_command_line(args)
        if not args:  # an empty override: how clang compiles by default
            return cls(path, name=name, llvm=llvm)
        return cls(path, name=name, llvm=llvm, **flags)

    @property
    def already_optimized(self) -> bool:
        """The bitcode carries attributes only LLVM's optimizer sets."""
        return self._m.optimized_functions > 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def triple(self) -> str:
        """The target triple compiles use (``target`` if given, else the module's)."""
        return self.target or self._m.triple

    @property
    def bitcode(self) -> bytes:
        return self._m.bitcode

    def default_pipeline(self) -> str:
        if self.lto is not None:
            return f"{'lto' if self.lto == 'full' else 'thinlto'}<{self.lto_level}>"
        return f"default<{self.opt_level or 'Oz'}>"

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in
                        (("opt_level", self.opt_level), ("target", self.target),
                         ("reloc_model", self.reloc_model), ("lto", self.lto)) if v)
        return f"Module({self.name!r}, triple={self.triple!r}{extra}, llvm={self.llvm})"

    @property
    def size(self) -> int:
        """Bytes of bitcode."""
        return self._m.size


def clang_default_reloc_model(triple: str) -> str:
    """What clang-19 as Debian ships it uses without -fPIC/-fno-pic flags:
    PIE (``pic``) on Linux targets, ``static`` elsewhere."""
    return "pic" if "linux" in (triple or "linux") else "static"


def optimization_notes(name: str, m) -> list[str]:
    notes = []
    if m.optimized_functions:
        notes.append(f"{name}: already optimized ({m.optimized_functions} of {m.defined_functions} functions "
                     "carry attributes only LLVM's optimizer sets): re-optimizing it is not what a build does; "
                     "use the bitcode of clang -Oz -Xclang -disable-llvm-passes -emit-llvm or of "
                     "-fembed-bitcode=all")
    if m.optnone_functions:
        notes.append(f"{name}: {m.optnone_functions} of {m.defined_functions} functions are optnone (built at "
                     "-O0): the inliner is not asked about their calls")
    return notes

"""LTO corpora: the modules lld's LTO backends optimize, in ml-compiler-opt's
layout, from a build directory.

What a build leaves, and what each gives (found in this order):

- the plugin's ``-mlopt-save-lto-modules=DIR`` (``mlopt clang-flags --lto MODE
  --save-lto-modules DIR``): every module as the backend receives it,
  ``<name>.bc`` with the link's facts in ``<name>.link.json`` (relocation model,
  LTO level, output), for full LTO and ThinLTO, one per binary;
- lld's ``--save-temps=import --thinlto-emit-index-files`` (LLVM's ThinLTO
  layout, what ml-compiler-opt's ``extract_ir --thinlto_build=local`` reads):
  ``<object>.3.import.bc`` and its index ``<object>.thinlto.bc``;
- lld's ``--save-temps`` of a full-LTO link: ``<output>.0.2.internalize.bc``.

The corpus has ``<m>.bc`` per module (and ``<m>.thinlto.bc``, ``<m>.link.json``
when the build had them), and ``corpus_description.json`` with
``has_thinlto`` (ThinLTO), ``"lto"`` (mlopt's: ``"full"`` or ``"thin"``) and,
as ``extract_ir`` writes for a local ThinLTO build, ``global_command_override``
``["<UNSPECIFIED>"]``: LTO modules are compiled as lld compiles them
(:class:`mlopt.Module` ``lto=``), not by a clang command. Modules are named by
their path in the build directory less the suffix (``extract_ir``'s names), or,
for saved modules, by their binary's path in the build
(``lib/libz.so.lto``, ``lib/libz.so.thinlto/<source>``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorpusError
from .layout import DESCRIPTION, link_or_copy, prepare_output

PathLike = str | os.PathLike
UNSPECIFIED = ["<UNSPECIFIED>"]
FACTS = ".link.json"
IMPORT = ".3.import.bc"
INDEX = ".thinlto.bc"
INTERNALIZE = ".0.2.internalize.bc"


@dataclass
class LtoExtractReport:
    lto: str  # "full" | "thin"
    source: str  # "saved" (the plugin) | "save-temps" (lld)
    modules: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}


def _saved(build: Path) -> list[Path]:
    return sorted(p for p in build.rglob(f"*{FACTS}") if p.is_file())


def _facts(path: Path) -> dict:
    try:
        facts = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CorpusError(f"{path}: unreadable link facts: {e}") from None
    if not isinstance(facts, dict) or facts.get("lto") not in ("full", "thin"):
        raise CorpusError(f"{path}: not a module's link facts (no 'lto': 'full' or 'thin')")
    return facts


def _output(facts: dict) -> Path:
    return Path(facts.get("output_path") or Path(facts.get("cwd", ".")) / facts.get("output", "a.out"))


def _binary_name(facts: dict, root: Path) -> str:
    """The module's binary as a path under ``root`` (its absolute path when outside it)."""
    out = _output(facts)
    try:
        return out.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return out.as_posix().lstrip("/")


def _flat(path: str) -> str:
    return path.lstrip("./").replace("/", "_") if path else "module"


def native_object_of(facts: dict) -> Path | None:
    """Where lld's ``--save-temps=prelink`` wrote the object of a saved module:
    ``<output>.lto.o`` (full LTO), ``<output name>.lto.<module stem>.o`` next to a
    ThinLTO module's input (``a.lo`` -> ``.lto.a.o``; an archive member keeps its
    whole name, ``lib.a(a.o at 12)`` -> ``.lto.lib.a(a.o at 12).o``), as lld names them."""
    output = _output(facts)
    if facts.get("lto") == "full":
        return output.with_name(output.name + ".lto.o")
    module = Path(facts.get("module", ""))
    if not module.name:
        return None
    if not module.is_absolute():
        module = Path(facts.get("cwd", ".")) / module
    base = module.name if module.name.endswith(")") else module.stem
    return module.with_name(f"{output.name}.lto.{base}.o")


def lto_module_facts(bitcode: Path) -> dict | None:
    """The link facts saved with an LTO corpus module (``<m>.link.json``), or None."""
    path = bitcode.with_name(bitcode.name.removesuffix(".bc") + FACTS)
    return _facts(path) if path.exists() else None


def extract_lto_corpus(build: PathLike, output: PathLike, *, lto: str | None = None, root: PathLike | None = None,
                       force: bool = False) -> LtoExtractReport:
    """An LTO corpus in ``output`` from what the build in ``build`` left (see
    the module docstring); ``lto`` picks the mode when the build has both.
    Saved modules are named by their binary's path under ``root`` (default:
    the directory all the binaries are in). Raises CorpusError when the build
    has no LTO module."""
    build = Path(build)
    if not build.is_dir():
        raise CorpusError(f"{build}: not a directory")
    if lto not in (None, "full", "thin"):
        raise CorpusError(f"lto must be 'full' or 'thin', not {lto!r}")
    saved = [(p, _facts(p)) for p in _saved(build)]
    if lto is not None:
        saved = [(p, f) for p, f in saved if f["lto"] == lto]
    modes = {f["lto"] for _, f in saved}
    if len(modes) > 1:
        raise CorpusError(f"{build}: the build saved full-LTO and ThinLTO modules: choose one (--lto full|thin)")
    out = prepare_output(output, force)
    if saved:
        report = LtoExtractReport(modes.pop(), "saved")
        # a link whose binary is gone was a configure or CMake check's (its program removed after the test)
        # (when every binary is gone, the build moved: all are kept)
        # (CMake's compiler identification keeps its a.out, under CMakeFiles/ as all its checks)
        gone = [(p, f) for p, f in saved if f.get("output_path") and
                (not Path(f["output_path"]).exists() or "/CMakeFiles/" in f["output_path"])]
        if len(gone) < len(saved):
            report.skipped += [{"path": str(p), "reason": f"its binary {f['output_path']} is gone or CMake's "
                                                          "(a configure or CMake check's link)"} for p, f in gone]
            saved = [(p, f) for p, f in saved if (p, f) not in gone]
        if root is None:
            root = Path(os.path.commonpath([str(_output(f).parent) for _, f in saved]))
        names: dict[str, Path] = {}
        for facts_path, facts in saved:
            bitcode = facts_path.with_name(facts_path.name.removesuffix(FACTS) + ".bc")
            if not bitcode.is_file():
                report.skipped.append({"path": str(facts_path), "reason": "no module next to its link facts"})
                continue
            binary = _binary_name(facts, Path(root))
            name = f"{binary}.lto" if facts["lto"] == "full" else f"{binary}.thinlto/{_flat(facts.get('source', ''))}"
            if name in names:
                raise CorpusError(f"{build}: {facts_path} and {names[name]} are both module {name!r}")
            names[name] = facts_path
            link_or_copy(bitcode, out / f"{name}.bc")
            link_or_copy(facts_path, out / f"{name}{FACTS}")
            report.modules.append(name)
    else:
        imports = sorted(p for p in build.rglob(f"*{IMPORT}") if p.is_file())
        if imports and lto != "full":
            report = LtoExtractReport("thin", "save-temps")
            for p in imports:
                index = p.with_name(p.name.removesuffix(IMPORT) + INDEX)
                name = p.relative_to(build).as_posix().removesuffix(IMPORT)
                if not index.is_file():
                    report.skipped.append({"path": str(p), "reason": f"no index {index.name} (link with "
                                                                      "-Wl,--thinlto-emit-index-files)"})
                    continue
                link_or_copy(p, out / f"{name}.bc")
                link_or_copy(index, out / f"{name}{INDEX}")
                report.modules.append(name)
        else:
            merged = sorted(p for p in build.rglob(f"*{INTERNALIZE}") if p.is_file())
            if not merged or lto == "thin":
                raise CorpusError(f"{build}: no LTO module: link with the plugin's -mlopt-save-lto-modules=DIR "
                                  "(mlopt clang-flags --lto MODE --save-lto-modules DIR), or lld's "
                                  "--save-temps=import --thinlto-emit-index-files (ThinLTO) / --save-temps (full)")
            report = LtoExtractReport("full", "save-temps")
            for p in merged:
                name = p.relative_to(build).as_posix().removesuffix(INTERNALIZE) + ".lto"
                link_or_copy(p, out / f"{name}.bc")
                report.modules.append(name)
    if not report.modules:
        raise CorpusError(f"{build}: no LTO module could be taken ({report.skipped[0]['reason']})")
    write_lto_description(out, report.lto, report.modules)
    return report


def write_lto_description(out: Path, lto: str, modules: list[str]) -> None:
    desc = {"global_command_override": UNSPECIFIED, "has_thinlto": lto == "thin", "lto": lto, "modules": modules}
    (out / DESCRIPTION).write_text(json.dumps(desc, indent=2) + "\n")

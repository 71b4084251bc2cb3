"""``mlopt corpus extract``: a corpus from a build compiled with
``-Xclang -fembed-bitcode=all``, in the layout of LLVM's mlgo-utils
``extract_ir`` (one ``.bc`` + ``.cmd`` per object, ``corpus_description.json``).

Inputs: a ``compile_commands.json``, a directory of objects, or a list of
object paths. Objects without the sections (assembly, objects built without
the flag, not ELF) and objects merged by a partial link (``ld -r``: several
modules in one section) are skipped and counted, with the reason per file
in the report; names and command lines that are not UTF-8 do not stop it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorpusError
from .bitcode import bitcode_streams
from .elf import read_sections
from .layout import prepare_output, safe_module_name, write_description, write_element

BITCODE_SECTION = ".llvmbc"
COMMAND_SECTION = ".llvmcmd"


@dataclass
class ObjectRef:
    """One object of the build and the module name it gets in the corpus."""

    path: Path
    name: str


@dataclass
class ExtractReport:
    output: Path
    modules: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {"object", "reason"}

    @property
    def total(self) -> int:
        return len(self.modules) + len(self.skipped)

    def to_json(self) -> dict:
        return {"output": str(self.output), "objects": self.total, "extracted": len(self.modules),
                "skipped": len(self.skipped), "skipped_objects": self.skipped}


def _output_of(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("-o") and len(a) > 2 and not a.startswith("-objc"):
            return a[2:]
    return None


def _relative_name(obj: str, base: Path) -> str:
    p = Path(obj)
    if p.is_absolute():
        try:
            return safe_module_name(os.fsdecode(p.relative_to(base)))
        except ValueError:
            return safe_module_name(os.fsdecode(p))
    return safe_module_name(os.fsdecode(p))


def objects_from_compile_commands(path: str | os.PathLike) -> list[ObjectRef]:
    """Every compile command's object (``output`` or ``-o``), named as the
    build wrote it relative to the entry's directory (as extract_ir does)."""
    path = Path(path)
    try:
        entries = json.loads(path.read_bytes().decode("utf-8", "surrogateescape"))
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}: invalid JSON at byte {e.pos}: {e.msg}") from None
    if not isinstance(entries, list):
        raise CorpusError(f"{path}: expected a JSON list of compile commands")
    refs, seen = [], set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "directory" not in entry:
            raise CorpusError(f"{path}: entry {i} has no 'directory'")
        if "arguments" in entry:
            args = list(entry["arguments"])
        elif "command" in entry:
            try:
                args = shlex.split(entry["command"])
            except ValueError as e:
                raise CorpusError(f"{path}: entry {i}: cannot split the command: {e}") from None
        else:
            raise CorpusError(f"{path}: entry {i} has neither 'arguments' nor 'command'")
        obj = entry.get("output") or _output_of(args)
        if obj is None:
            continue  # not a compile to an object (e.g. a preprocessing step)
        base = Path(entry["directory"])
        full = Path(obj) if os.path.isabs(obj) else base / obj
        if full in seen:
            continue
        seen.add(full)
        refs.append(ObjectRef(full, _relative_name(obj, base)))
    return refs


def objects_in_directory(directory: str | os.PathLike) -> list[ObjectRef]:
    base = Path(directory)
    if not base.is_dir():
        raise NotADirectoryError(20, "not a directory", str(base))
    paths = sorted(p for p in base.rglob("*") if p.suffix in (".o", ".obj") and p.is_file())
    return [ObjectRef(p, safe_module_name(os.fsdecode(p.relative_to(base)))) for p in paths]


def objects_from_list(paths: Iterable[str | os.PathLike], base: str | os.PathLike | None = None) -> list[ObjectRef]:
    base = Path(base or os.getcwd())
    refs = []
    for p in paths:
        full = Path(p) if os.path.isabs(p) else base / p
        refs.append(ObjectRef(full, _relative_name(os.fspath(p), base)))
    return refs


def _matches(command: bytes, pattern: re.Pattern | None) -> bool:
    if pattern is None:
        return True
    args = command.decode("utf-8", "surrogateescape").split("\0")
    return any(pattern.search(a) for a in args)


def _extract_one(ref: ObjectRef, out: Path, pattern: re.Pattern | None) -> str | None:
    """None when extracted, else why the object was skipped."""
    try:
        sections = read_sections(ref.path, {BITCODE_SECTION, COMMAND_SECTION})
    except FileNotFoundError:
        return "no such file"
    except OSError as e:
        return f"cannot read: {e.strerror}"
    except CorpusError as e:
        return str(e).split(": ", 1)[-1]
    if BITCODE_SECTION not in sections:
        return f"no {BITCODE_SECTION} section (built without -Xclang -fembed-bitcode=all, or from assembly)"
    if COMMAND_SECTION not in sections:
        return f"no {COMMAND_SECTION} section (bitcode embedded with -fembed-bitcode=bitcode?)"
    if not sections[BITCODE_SECTION]:
        return f"empty {BITCODE_SECTION} section (-fembed-bitcode=marker)"
    if not _matches(sections[COMMAND_SECTION], pattern):
        return "command line does not match the filter"
    modules = bitcode_streams(sections[BITCODE_SECTION])
    if modules is not None and modules > 1:
        return (f"{modules} bitcode modules in one {BITCODE_SECTION} section (a partial link, ld -r, merged "
                "several compiles; a corpus module is one compile)")
    write_element(out, ref.name, sections[BITCODE_SECTION], sections[COMMAND_SECTION])
    return None


def extract_corpus(objects: list[ObjectRef], output: str | os.PathLike, *, cmd_filter: str | None = None,
                   threads: int | None = None, force: bool = False,
                   on_progress: Callable[[int, int], None] | None = None) -> ExtractReport:
    """Extracts every object's bitcode and command line into ``output``.
    Modules keep the objects' order in the description; two objects with
    the same module name are an error (nothing is written)."""
    names = [r.name for r in objects]
    dupes = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) != len(names) else []
    if dupes:
        raise CorpusError(f"two objects map to the module name {dupes[0]!r}")
    pattern = re.compile(cmd_filter) if cmd_filter else None
    out = prepare_output(output, force)
    report = ExtractReport(out)
    reasons: list[str | None] = [None] * len(objects)
    done = 0
    with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as ex:
        for i, reason in zip(range(len(objects)), ex.map(lambda r: _extract_one(r, out, pattern), objects)):
            reasons[i] = reason
            done += 1
            if on_progress:
                on_progress(done, len(objects))
    for ref, reason in zip(objects, reasons):
        if reason is None:
            report.modules.append(ref.name)
        else:
            report.skipped.append({"object": os.fsdecode(ref.path), "reason": reason})
    write_description(out, report.modules)
    (out / "extract_report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report

"""A CMake build's linked binaries and the objects each one links, read
from CMake's File API: module names ``<binary>/<source path>``, so that
everything keyed on a module's package (its first path component: the
one-site-linkonce rule, splits, the package-linked estimate) sees one
package per linked binary instead of ``CMakeFiles`` or a source directory.

Contract:

- Input: a build directory configured with the File API's codemodel query
  (an empty file ``BUILD/.cmake/api/v1/query/codemodel-v2`` written before
  ``cmake`` ran) and ``-DCMAKE_EXPORT_COMPILE_COMMANDS=ON`` (the reply names
  each target's sources, not its objects; ``compile_commands.json`` maps a
  source to the object it was compiled to). Without either: one
  :class:`mlopt.CorpusError` line saying what to pass at configure time.
- Binaries are the executables, shared libraries and modules
  (``add_library(MODULE)``). Binary B links its own objects, those of every
  static library on its link line (CMake writes the whole closure there,
  transitive ones included) and of every object library among its sources
  or theirs. Every object of a listed archive counts, though a linker may
  leave out a member nothing references.
- :func:`objects_by_binary` gives one module per (binary, object): an
  object linked into several binaries (a static library's, in two
  executables) becomes one module in each, with the same bitcode, because
  each binary has its own copy of that code. A split by package can then
  put one source on two sides; the rule and the linked estimate count it
  where it is linked. A static or object library that no binary of the
  build links is a package of its own (its file name, or the target's
  name for an object library).
- Names: the package is the binary's file name (``libgeom.so``,
  ``shapes``), or the target's name when two binaries share a file name;
  then the source's path relative to the top source directory (relative to
  the build directory for a generated source; the object's path there for
  a source outside both, and for two objects of one binary that would get
  the same name).
- A compiled source whose object cannot be told (not in
  ``compile_commands.json``, or compiled by several targets none of whose
  objects is under its target's ``<name>.dir/``) is left out and listed,
  with the reason, in :attr:`CMakeBuild.unmapped`.
- :func:`compiler_major` is the LLVM major of the build's clang (from
  CMake's own record of its compilers), so flags that load mlopt's plugin
  can be checked against the compiler that will load it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorpusError
from .extract import ObjectRef
from .layout import safe_module_name

QUERY = Path(".cmake/api/v1/query/codemodel-v2")
REPLY = Path(".cmake/api/v1/reply")
LINKED = ("EXECUTABLE", "SHARED_LIBRARY", "MODULE_LIBRARY")
COMPILED = (*LINKED, "STATIC_LIBRARY", "OBJECT_LIBRARY")
CONFIGURE_HINT = ("write an empty file BUILD/.cmake/api/v1/query/codemodel-v2 before configuring, and configure "
                  "with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON")


@dataclass
class CMakeObject:
    """One compiled object: its path, the target that compiled it, its source (absolute)."""

    path: Path
    target: str
    source: Path


@dataclass
class CMakeTarget:
    name: str
    type: str
    artifact: Path | None          # absolute: the binary or archive (None for an object library)
    build_dir: Path                # the target's directory in the build tree
    objects: list[CMakeObject] = field(default_factory=list)   # compiled by this target
    links: list[str] = field(default_factory=list)             # compile targets whose objects it links

    @property
    def file_name(self) -> str:
        return self.artifact.name if self.artifact is not None else self.name


@dataclass
class CMakeBuild:
    build_dir: Path
    source_dir: Path
    targets: dict[str, CMakeTarget]
    unmapped: list[str] = field(default_factory=list)  # compiled sources whose object is unknown, and why

    @property
    def binaries(self) -> list[CMakeTarget]:
        return [t for t in self.targets.values() if t.type in LINKED]

    def packages(self) -> dict[str, str]:
        """Package name of every binary, and of every static or object library no binary links
        (target name -> package)."""
        linked_somewhere = {c for b in self.binaries for c in b.links}
        units = [*self.binaries, *(t for t in self.targets.values() if t.type in ("STATIC_LIBRARY", "OBJECT_LIBRARY")
                                   and t.name not in linked_somewhere)]
        counts: dict[str, int] = {}
        for t in units:
            counts[t.file_name] = counts.get(t.file_name, 0) + 1
        return {t.name: t.file_name if counts[t.file_name] == 1 else t.name for t in units}

    def binaries_of(self) -> dict[str, list[str]]:
        """For every compile target, the packages its objects are linked into (sorted)."""
        packages = self.packages()
        out: dict[str, set[str]] = {t: set() for t in self.targets if self.targets[t].objects}
        for unit, package in packages.items():
            for compiled in self.targets[unit].links:
                out.setdefault(compiled, set()).add(package)
        return {t: sorted(p) for t, p in out.items()}


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="surrogateescape"))
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}: invalid JSON at byte {e.pos}: {e.msg}") from None


def has_reply(build_dir: str | os.PathLike) -> bool:
    """Whether CMake wrote a File API reply with the codemodel in ``build_dir``."""
    try:
        _codemodel(Path(build_dir))
    except CorpusError:
        return False
    return True


def _codemodel(build: Path) -> tuple[Path, dict]:
    reply = build / REPLY
    indexes = sorted(reply.glob("index-*.json")) if reply.is_dir() else []
    if not indexes:
        why = "configured before the query was written" if (build / QUERY).exists() else "no query"
        raise CorpusError(f"{build}: no CMake File API reply ({why}): {CONFIGURE_HINT.replace('BUILD', str(build))},"
                          " then run cmake again")
    index = _load(indexes[-1])
    files = [o["jsonFile"] for o in index.get("objects", []) if o.get("kind") == "codemodel"]
    if not files:
        raise CorpusError(f"{indexes[-1]}: no codemodel in the File API reply: write an empty file "
                          f"{build / QUERY} and run cmake again")
    return reply, _load(reply / files[0])


def _compile_commands(build: Path) -> dict[Path, list[Path]]:
    """Absolute source -> absolute objects compiled from it."""
    path = build / "compile_commands.json"
    if not path.is_file():
        raise CorpusError(f"{build}: no compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON; "
                          "the Makefile and Ninja generators write it)")
    out: dict[Path, list[Path]] = {}
    for entry in _load(path):
        directory = Path(entry.get("directory", build))
        obj = entry.get("output")
        if obj is None:
            args = entry.get("arguments") or shlex.split(entry.get("command", ""))
            obj = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-o"), None)
        if obj is None or "file" not in entry:
            continue
        source = Path(os.path.realpath(directory / entry["file"]))
        # CMake's Makefile generator writes "output" relative to the top of the build, not to "directory"
        candidates = [Path(os.path.normpath(base / obj)) for base in (directory, build)]
        out.setdefault(source, []).append(next((c for c in candidates if c.is_file()), candidates[-1]))
    return out


def _absolute(base: Path, path: str) -> Path:
    return Path(os.path.normpath(base / path))


def _raw_targets(build_dir: str | os.PathLike) -> tuple[Path, dict, dict[str, dict]]:
    """(build directory, codemodel, the reply's compiled targets by id)."""
    build = Path(build_dir).resolve()
    if not build.is_dir():
        raise CorpusError(f"{build_dir}: not a directory (expected a CMake build directory)")
    reply, model = _codemodel(build)
    configurations = model.get("configurations", [])
    if len(configurations) != 1:
        names = ", ".join(c.get("name") or "''" for c in configurations)
        raise CorpusError(f"{build}: {len(configurations)} configurations ({names}): a multi-configuration "
                          "generator is not supported; configure with a single-configuration one (Ninja, Makefiles)")
    raw = {}
    for ref in configurations[0]["targets"]:
        target = _load(reply / ref["jsonFile"])
        if target.get("type") in COMPILED:
            raw[target["id"]] = target
    return build, model, raw


def _artifact(build: Path, target: dict) -> Path | None:
    artifacts = [_absolute(build, a["path"]) for a in target.get("artifacts", [])]
    on_disk = target.get("nameOnDisk")
    return next((a for a in artifacts if a.name == on_disk), artifacts[0] if artifacts else None)


def linked_binaries(build_dir: str | os.PathLike) -> dict[str, Path]:
    """Package name -> file of every linked binary of the build (from the File API reply alone), in name order."""
    build, _, raw = _raw_targets(build_dir)
    found = [(t["name"], _artifact(build, t)) for t in raw.values() if t["type"] in LINKED]
    names = [a.name for _, a in found if a is not None]
    return dict(sorted((a.name if names.count(a.name) == 1 else name, a) for name, a in found if a is not None))


def read_build(build_dir: str | os.PathLike) -> CMakeBuild:
    """The build's targets, their objects and what each binary links (see the module's docstring)."""
    build, model, raw = _raw_targets(build_dir)
    source_root = Path(model["paths"]["source"])
    commands = _compile_commands(build)
    targets: dict[str, CMakeTarget] = {}
    unmapped: list[str] = []
    owner: dict[Path, str] = {}  # object path -> the object library that compiled it
    for t in raw.values():
        entry = CMakeTarget(t["name"], t["type"], _artifact(build, t) if t["type"] != "OBJECT_LIBRARY" else None,
                            _absolute(build, t.get("paths", {}).get("build", ".")))
        for s in t.get("sources", []):
            if s.get("compileGroupIndex") is None:
                continue
            source = _absolute(source_root, s["path"])
            candidates = commands.get(Path(os.path.realpath(source)), [])
            if len(candidates) > 1:  # one source in several targets: CMake's object directory names the target
                candidates = [c for c in candidates if f"{t['name']}.dir" in c.parts]
                if len(candidates) != 1:
                    unmapped.append(f"{t['name']}: {s['path']}: compiled by several targets, and no object of it is "
                                    f"under {t['name']}.dir/")
                    continue
            if not candidates:
                unmapped.append(f"{t['name']}: {s['path']}: not in compile_commands.json")
                continue
            entry.objects.append(CMakeObject(candidates[0], t["name"], source))
        if t["type"] == "OBJECT_LIBRARY":
            for o in entry.objects:
                owner[o.path] = t["name"]
        targets[t["name"]] = entry
    archives = {t.artifact: t.name for t in targets.values() if t.type == "STATIC_LIBRARY" and t.artifact}
    for t in raw.values():
        entry = targets[t["name"]]
        linked = [entry.name] if entry.objects else []
        for s in t.get("sources", []):  # object libraries' objects are sources of the targets that use them
            if s.get("compileGroupIndex") is None:
                lib = owner.get(_absolute(source_root, s["path"]))
                if lib is not None and lib not in linked:
                    linked.append(lib)
        if entry.type in LINKED:
            for fragment in t.get("link", {}).get("commandFragments", []):
                if fragment.get("role") != "libraries":
                    continue
                try:
                    tokens = shlex.split(fragment["fragment"])
                except ValueError:
                    tokens = [fragment["fragment"]]
                for token in tokens:  # relative to the link's directory: the target's (Makefiles) or the top (Ninja)
                    for base in (entry.build_dir, build):
                        lib = archives.get(_absolute(base, token))
                        if lib is not None:
                            break
                    if lib is not None and lib not in linked:
                        linked.append(lib)
        entry.links = linked
    for entry in targets.values():  # an archive's own object libraries go where the archive goes
        if entry.type in LINKED:
            for lib in list(entry.links):
                for sub in targets[lib].links:
                    if sub not in entry.links:
                        entry.links.append(sub)
    return CMakeBuild(build, source_root, targets, unmapped)


def _source_name(build: CMakeBuild, obj: CMakeObject) -> str:
    for root in (build.source_dir, build.build_dir):
        try:
            return obj.source.relative_to(root).as_posix()
        except ValueError:
            continue
    return obj.path.relative_to(build.build_dir).as_posix()


def objects_by_binary(build: CMakeBuild) -> list[ObjectRef]:
    """One :class:`ObjectRef` per (package, object), named ``<package>/<source path>``, packages in name order."""
    refs: list[ObjectRef] = []
    packages = build.packages()
    for unit in sorted(packages, key=packages.get):
        package = packages[unit]
        objects = [o for lib in build.targets[unit].links for o in build.targets[lib].objects]
        names = [_source_name(build, o) for o in objects]
        for o, name in zip(objects, names):
            if names.count(name) > 1:
                name = o.path.relative_to(build.build_dir).as_posix()
            refs.append(ObjectRef(o.path, safe_module_name(f"{package}/{name}")))
    return refs


_VERSION = re.compile(r'set\(CMAKE_(C|CXX)_COMPILER_(ID|VERSION) "([^"]*)"\)')


def compiler_major(build_dir: str | os.PathLike) -> int:
    """The LLVM major of the build's C and C++ compilers (CMake's ``CMakeFiles/<version>/CMake<LANG>Compiler.cmake``);
    a compiler other than clang, or C and C++ of different majors, is a :class:`mlopt.CorpusError`."""
    build = Path(build_dir)
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(build.glob("CMakeFiles/*/CMake*Compiler.cmake")):
        values: dict[tuple[str, str], str] = {}
        for lang, key, value in _VERSION.findall(path.read_text(errors="replace")):
            values[(lang, key)] = value
        for lang in ("C", "CXX"):
            if (lang, "ID") in values:
                found[lang] = (values[(lang, "ID")], values.get((lang, "VERSION"), ""))
    if not found:
        raise CorpusError(f"{build}: no CMakeFiles/<version>/CMake<LANG>Compiler.cmake (not a configured CMake build)")
    majors = set()
    for lang, (ident, version) in sorted(found.items()):
        if ident != "Clang":
            clang = "clang++" if lang == "CXX" else "clang"
            raise CorpusError(f"{build}: the {lang} compiler is {ident} {version}: mlopt's plugin loads into clang "
                              f"(configure with -DCMAKE_{lang}_COMPILER={clang}-19 or {clang}-22)")
        majors.add(int(version.split(".")[0]))
    if len(majors) != 1:
        listed = ", ".join(map(str, sorted(majors)))
        raise CorpusError(f"{build}: C and C++ compilers of different LLVM majors ({listed})")
    return majors.pop()

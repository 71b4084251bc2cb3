"""Writing corpora in the layout of LLVM's ``mlgo-utils`` (``extract_ir``,
``make_corpus``): ``<dir>/<module>.bc`` with its NUL-separated command line
in ``<dir>/<module>.cmd``, listed in ``corpus_description.json`` as
``{"has_thinlto": false, "modules": [...]}`` (plus
``"global_command_override"`` when every module shares one command line).
Module names are relative paths such as ``lib/a.c.o``; they never escape the
corpus directory."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path, PurePosixPath

from ..errors import CorpusError, OutputExistsError

DESCRIPTION = "corpus_description.json"


def safe_module_name(name: str) -> str:
    """``name`` as a relative path inside the corpus: leading ``/`` and
    ``./`` dropped, ``..`` components refused."""
    parts = [p for p in PurePosixPath(name.replace(os.sep, "/")).parts if p not in ("/", ".")]
    if not parts or ".." in parts:
        raise CorpusError(f"module name {name!r} does not name a file inside the corpus")
    return "/".join(parts)


def link_or_copy(src: Path, dest: Path) -> None:
    """``dest`` (its directories made, a file there replaced) as a hard link to ``src``, or a copy
    across file systems."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        dest.unlink()
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def prepare_output(directory: str | os.PathLike, force: bool) -> Path:
    """The output directory, created; an existing corpus there is refused
    unless ``force`` (then its description is replaced, files are kept)."""
    out = Path(directory)
    if (out / DESCRIPTION).exists() and not force:
        raise OutputExistsError(str(out / DESCRIPTION))
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_element(out: Path, name: str, bitcode: bytes, command: bytes | None) -> None:
    bc = out / f"{name}.bc"
    bc.parent.mkdir(parents=True, exist_ok=True)
    bc.write_bytes(bitcode)
    if command is not None:
        (out / f"{name}.cmd").write_bytes(command)


def write_description(out: Path, modules: list[str], global_command: list[str] | None = None) -> Path:
    desc: dict = {}
    if global_command is not None:
        desc["global_command_override"] = list(global_command)
    desc["has_thinlto"] = False
    desc["modules"] = list(modules)
    path = out / DESCRIPTION
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(desc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path

"""``mlopt corpus make``: a corpus from a directory of raw ``.bc`` files that
share one command line (mlgo-utils' ``make_corpus``): the files are copied,
the command line becomes ``global_command_override``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import CorpusError
from .layout import prepare_output, safe_module_name, write_description


def make_corpus(bitcode_dir: str | os.PathLike, output: str | os.PathLike, command: list[str] | None = None,
                *, force: bool = False) -> list[str]:
    """Copies every ``*.bc`` under ``bitcode_dir`` (sorted) into ``output``;
    module names are the relative paths without ``.bc``. ``command`` (default:
    none, i.e. how clang-19 -Oz -c compiles) is recorded for all modules."""
    src = Path(bitcode_dir)
    if not src.is_dir():
        raise NotADirectoryError(20, "not a directory", str(src))
    files = sorted(src.rglob("*.bc"))
    if not files:
        raise CorpusError(f"{src}: no .bc files")
    out = prepare_output(output, force)
    if out.resolve() == src.resolve():
        raise CorpusError(f"{out}: the output must not be the input directory")
    names = []
    for f in files:
        name = safe_module_name(os.fsdecode(f.relative_to(src))[: -len(".bc")])
        dest = out / f"{name}.bc"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
        names.append(name)
    write_description(out, names, command if command is not None else [])
    return names

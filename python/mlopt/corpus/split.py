"""``mlopt corpus split``: a deterministic train / held-out split by module.

A module's side depends only on its name (SHA-256 of the name and the
seed), so adding modules to a corpus never moves the others, and the split
is the same on every machine. Each side is a corpus directory of its own
(files hard-linked, or copied across file systems)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ..errors import CorpusError
from .description import read_description
from .layout import prepare_output, write_description


def split_value(name: str, seed: int = 0) -> float:
    """A module's position in [0, 1): it is held out at fractions above it."""
    digest = hashlib.sha256(f"{seed}\0{name}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def held_out(name: str, fraction: float, seed: int = 0) -> bool:
    return split_value(name, seed) < fraction


def _link(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        dest.unlink()
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def split_corpus(corpus: str | os.PathLike, output: str | os.PathLike, heldout_fraction: float = 0.2,
                 seed: int = 0, *, force: bool = False) -> dict[str, list[str]]:
    """Writes ``output/train`` and ``output/heldout``; returns their module names."""
    if not 0 < heldout_fraction < 1:
        raise CorpusError(f"the held-out fraction must be between 0 and 1, not {heldout_fraction}")
    corpus = Path(corpus)
    desc = read_description(corpus)
    sides: dict[str, list[str]] = {"train": [], "heldout": []}
    for m in desc["modules"]:
        sides["heldout" if held_out(m, heldout_fraction, seed) else "train"].append(m)
    if not sides["train"] or not sides["heldout"]:
        raise CorpusError(f"{corpus}: {len(desc['modules'])} modules are too few to split at {heldout_fraction}")
    override = desc.get("global_command_override")
    for side, names in sides.items():
        out = prepare_output(Path(output) / side, force)
        for m in names:
            _link(corpus / f"{m}.bc", out / f"{m}.bc")
            if override is None:
                _link(corpus / f"{m}.cmd", out / f"{m}.cmd")
        write_description(out, names, override)
    return sides

"""``mlopt corpus split``: deterministic train / validation / test splits,
by package (no package on two sides) or by module.

A unit's side (a package's, or a module's with ``by="module"``) depends only
on its name and the seed: SHA-256 of ``seed\\0name`` gives a position in
[0, 1), and the cumulative fractions cut that interval into sides. Adding
packages to a corpus never moves the others, and the split is the same on
every machine. ``assign`` pins packages to sides (a small corpus of a few
packages needs that to fill every side). Each side is a corpus directory of
its own (files hard-linked, or copied across file systems), with a manifest
(:mod:`.manifest`) restricted to its packages when the corpus has one.

Module names in corpora mlopt builds are ``PKG/path/in/build``: the package
is the first path component (:func:`package_of`)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import CorpusError
from .description import read_description
from .layout import link_or_copy, prepare_output, write_description
from .manifest import read_manifest, write_manifest

DEFAULT_FRACTIONS = {"train": 0.7, "validation": 0.15, "test": 0.15}
SPLIT_BY = ("package", "module", "auto")


def split_value(name: str, seed: int = 0) -> float:
    """A name's position in [0, 1)."""
    digest = hashlib.sha256(f"{seed}\0{name}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def package_of(module: str) -> str:
    """The package of a module named ``PKG/path/in/build``."""
    return module.split("/", 1)[0]


def side_of(name: str, fractions: Mapping[str, float], seed: int = 0) -> str:
    """The side whose share of [0, 1) holds ``name``'s position (sides in
    the order given)."""
    value, edge = split_value(name, seed), 0.0
    sides = list(fractions.items())
    for side, fraction in sides:
        edge += fraction
        if value < edge:
            return side
    return sides[-1][0]


def check_fractions(fractions: Mapping[str, float]) -> dict[str, float]:
    fractions = dict(fractions)
    if len(fractions) < 2:
        raise CorpusError(f"a split needs at least two sides, not {list(fractions)}")
    bad = [f"{s}={f}" for s, f in fractions.items() if not 0 < f < 1]
    if bad:
        raise CorpusError(f"side fractions must be between 0 and 1 ({', '.join(bad)})")
    if abs(sum(fractions.values()) - 1) > 1e-6:
        raise CorpusError(f"side fractions must add up to 1, not {sum(fractions.values()):g}")
    for side in fractions:
        if not side or "/" in side or side.startswith("."):
            raise CorpusError(f"{side!r} cannot name a side (a directory of the output)")
    return fractions


def resolve_by(by: str, corpus: Path, modules: list[str]) -> str:
    if by not in SPLIT_BY:
        raise CorpusError(f"split by {by!r}: expected one of {', '.join(SPLIT_BY)}")
    if by != "auto":
        return by
    has_manifest = read_manifest(corpus) is not None
    return "package" if has_manifest or (modules and all("/" in m for m in modules)) else "module"


def assign_sides(modules: list[str], fractions: Mapping[str, float], *, by: str = "package", seed: int = 0,
                 assign: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Module names per side, in the corpus's order (no file is touched)."""
    fractions = check_fractions(fractions)
    assign = dict(assign or {})
    unknown_sides = sorted({s for s in assign.values() if s not in fractions})
    if unknown_sides:
        raise CorpusError(f"assigned to unknown side {unknown_sides[0]!r} (sides: {', '.join(fractions)})")
    if by == "module" and assign:
        raise CorpusError("packages can only be assigned to sides in a split by package")
    sides: dict[str, list[str]] = {s: [] for s in fractions}
    packages = {package_of(m) for m in modules}
    missing = sorted(set(assign) - packages)
    if missing:
        raise CorpusError(f"assigned package {missing[0]!r} is not in the corpus")
    for m in modules:
        unit = package_of(m) if by == "package" else m
        side = assign.get(unit) if by == "package" else None
        sides[side or side_of(unit, fractions, seed)].append(m)
    return sides


def split_corpus(corpus: str | os.PathLike, output: str | os.PathLike, fractions: Mapping[str, float] | None = None,
                 *, by: str = "auto", seed: int = 0, assign: Mapping[str, str] | None = None,
                 force: bool = False, exclude: Iterable[str] = ()) -> dict[str, list[str]]:
    """Writes one corpus directory per side under ``output`` (``train``,
    ``validation``, ``test`` by default); returns their module names.
    ``by``: "package" (no package on two sides), "module", or "auto"
    (package when the corpus has a manifest or every module name has a
    package prefix). ``exclude``: packages left out of every side."""
    corpus = Path(corpus)
    desc = read_description(corpus)
    excluded = set(exclude)
    modules = [m for m in desc["modules"] if package_of(m) not in excluded]
    by = resolve_by(by, corpus, modules)
    sides = assign_sides(modules, fractions or DEFAULT_FRACTIONS, by=by, seed=seed, assign=assign)
    empty = [s for s, names in sides.items() if not names]
    if empty:
        units = len({package_of(m) for m in modules}) if by == "package" else len(modules)
        raise CorpusError(f"{corpus}: side {empty[0]!r} gets no module ({units} {by}s split at "
                          + ", ".join(f"{s}={f:g}" for s, f in (fractions or DEFAULT_FRACTIONS).items())
                          + "): pin packages with assign/--assign, or change the fractions or seed")
    override = desc.get("global_command_override")
    lto = desc.get("lto")
    manifest = read_manifest(corpus)
    for side, names in sides.items():
        out = prepare_output(Path(output) / side, force)
        for m in names:
            link_or_copy(corpus / f"{m}.bc", out / f"{m}.bc")
            # an LTO module's link facts and ThinLTO index, where it has them; else its compile command
            for suffix in ((".link.json", ".thinlto.bc") if lto else () if override is not None else (".cmd",)):
                if not lto or (corpus / f"{m}{suffix}").exists():
                    link_or_copy(corpus / f"{m}{suffix}", out / f"{m}{suffix}")
        if lto:
            from .lto import write_lto_description

            write_lto_description(out, lto, names)
        else:
            write_description(out, names, override)
        if manifest is not None:
            keep = {package_of(m) for m in names}
            write_manifest(out, {**manifest, "split": {"side": side, "by": by, "seed": seed, "of": str(corpus)},
                                 "packages": [p for p in manifest["packages"] if p["name"] in keep]})
    return sides

"""PackageCallSites: per package, how often each ``linkonce_odr`` callee is
called in its modules' ``-Oz`` compiles, and the rule that reads it: inline
a ``linkonce`` callee the heuristic declines when the call is the only one
in its whole package and its ``cost_estimate - threshold`` is at most
``MAX_MARGIN`` ("one-site linkonce").

    sites = PackageCallSites.from_compiles({module: [(callee, linkage, heuristic_decision, margin), ...]})
    sites.decisions("pkg/dir/a.o")      # {callee: 1, ...}: the rule's forced decisions for that module
    sites.save("sites.npz"); PackageCallSites.load("sites.npz")

Why: LLVM gives a local function's last call a bonus (inlining it deletes
the body) but not a ``linkonce_odr`` one, since other translation units
may keep a copy; within a package a linker keeps one copy of it, so when
the package has a single call of it, inlining that call deletes the body
from the linked package. Only a package-wide count can tell; a module's
compile cannot (``callee_users`` is this module's). Measured on the Debian
corpus's validation packages (benchmarks/README.md, "A package's call
sites"): -1.20% linked
``.text`` vs ``-Oz``, no package larger; without the margin cap -1.01%
(three huge callees, ``cost_estimate - threshold`` over 1,000, grow it).

Rollouts apply the rule to every policy's compile (never to the heuristic's
own, the baseline) when ``$MLOPT_PACKAGE_CALL_SITES`` names a table
(``--package-call-sites FILE``). The table is an input, not an outcome:
it comes from one ``-Oz`` compile of each of the package's modules, a
pre-pass a user runs on their own package before building it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ...corpus.split import package_of
from ...errors import TraceError

PACKAGE_CALL_SITES_ENV = "MLOPT_PACKAGE_CALL_SITES"
_FORMAT = "mlopt-package-call-sites-1"
LINKONCE = 2  # callee_linkage's class of linkonce_odr callees (problems.inlining_linkage.LINKAGE_CLASSES)
MAX_MARGIN = 1000  # the rule's cap on cost_estimate - threshold (chosen on the Debian corpus's validation packages)


class PackageCallSites:
    """``counts[package][callee] = (sites, heuristic_inlined, module, margin)``: the callee's call sites in the
    package's ``-Oz`` compiles, how many of them the heuristic inlined, the module they are all in ("" if
    several), and the largest ``cost_estimate - threshold`` of its sites."""

    def __init__(self, counts: Mapping[str, Mapping[str, tuple[int, int, str, int]]],
                 where: str = "package call sites"):
        self.counts = {p: dict(c) for p, c in counts.items()}
        self.where = where
        self._by_module: dict[str, dict[str, int]] | None = None

    @classmethod
    def from_compiles(cls, sites: Mapping[str, Iterable[tuple[str, int, int, int]]]) -> PackageCallSites:
        """From each module's inlining decisions under ``-Oz`` (module name -> (callee, callee_linkage,
        heuristic decision, cost_estimate - threshold) per decision): every package of those modules,
        ``linkonce`` callees only."""
        counts: dict[str, dict[str, list]] = {}
        for module in sorted(sites):
            package = counts.setdefault(package_of(module), {})
            for callee, linkage, decision, margin in sites[module]:
                if int(linkage) != LINKONCE:
                    continue
                c = package.setdefault(callee, [0, 0, module, int(margin)])
                c[0] += 1
                c[1] += int(decision)
                if c[2] != module:
                    c[2] = ""
                c[3] = max(c[3], int(margin))
        return cls({p: {c: tuple(v) for c, v in cs.items()} for p, cs in counts.items()})

    @property
    def packages(self) -> list[str]:
        return sorted(self.counts)

    def decisions(self, module: str) -> dict[str, int]:
        """The one-site-linkonce rule's forced decisions for ``module``: inline (1) every ``linkonce`` callee
        whose only call in the package is in this module, was declined by the heuristic and has
        ``cost_estimate - threshold`` at most ``MAX_MARGIN``. A module of a
        package the table does not have raises :class:`mlopt.TraceError` naming it and the table."""
        if self._by_module is None:
            by: dict[str, dict[str, int]] = {}
            for cs in self.counts.values():
                for callee, (n, inlined, where, margin) in cs.items():
                    if n == 1 and inlined == 0 and where and margin <= MAX_MARGIN:
                        by.setdefault(where, {})[callee] = 1
            self._by_module = by
        if package_of(module) not in self.counts:
            raise TraceError(f"{self.where}: no package {package_of(module)!r} (module {module}): build the table "
                             f"over every package the run compiles")
        return dict(self._by_module.get(module, {}))

    def package_decisions(self, package: str) -> dict[str, int]:
        """The rule's forced decisions over all of ``package``'s modules: what one build of the package needs
        (``-mlopt-inline-callee-decisions``); a one-site callee has no site in the package's other modules."""
        if package not in self.counts:
            raise TraceError(f"{self.where}: no package {package!r}")
        return {c: 1 for c, (n, inlined, where, margin) in self.counts[package].items()
                if n == 1 and inlined == 0 and where and margin <= MAX_MARGIN}

    def write_callee_decisions(self, package: str, path: str | os.PathLike) -> int:
        """The package's rule as a plugin callee-decision file (``<0|1> <callee name>`` lines); how many."""
        decisions = self.package_decisions(package)
        lines = [f"# mlopt one-site-linkonce rule for package {package}: inline each linkonce_odr callee the "
                 f"heuristic declines at its only call in the package", *(f"{d} {c}" for c, d in
                                                                          sorted(decisions.items()))]
        Path(path).write_text("\n".join(lines) + "\n")
        return len(decisions)

    def save(self, path: str | os.PathLike) -> None:
        """An ``.npz``: names as UTF-8 blobs with end offsets (mangled C++ names are long; fixed-width
        string arrays of them are hundreds of megabytes), the counts as int64 columns."""
        index = {p: i for i, p in enumerate(self.packages)}
        rows = [(p, c, *self.counts[p][c]) for p in self.packages for c in sorted(self.counts[p])]
        modules = sorted({r[4] for r in rows} - {""})
        where = {m: i for i, m in enumerate(modules)}
        arrays = {"format": np.array(_FORMAT), "package": np.array([index[r[0]] for r in rows], dtype=np.int64),
                  "sites": np.array([r[2] for r in rows], dtype=np.int64),
                  "inlined": np.array([r[3] for r in rows], dtype=np.int64),
                  "module": np.array([where.get(r[4], -1) for r in rows], dtype=np.int64),
                  "margin": np.array([r[5] for r in rows], dtype=np.int64)}
        for key, names in (("packages", self.packages), ("callee", [r[1] for r in rows]), ("modules", modules)):
            arrays[key], arrays[key + "_ends"] = _packed(names)
        with open(path, "wb") as f:
            np.savez_compressed(f, **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> PackageCallSites:
        where = os.fspath(path)
        keys = ("packages", "packages_ends", "callee", "callee_ends", "modules", "modules_ends", "package", "sites",
                "inlined", "module", "margin")
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError) as e:
            raise TraceError(f"{where}: cannot read the package call-site table: {e}") from None
        if str(arrays.get("format", "")) != _FORMAT or not set(keys) <= set(arrays):
            raise TraceError(f"{where}: not a package call-site table ({_FORMAT})")
        try:
            names, callee, modules = (_unpacked(arrays[k], arrays[k + "_ends"]) for k in
                                      ("packages", "callee", "modules"))
        except ValueError as e:
            raise TraceError(f"{where}: inconsistent package call-site table: {e}") from None
        package, sites, inlined, module, margin = (arrays[k] for k in ("package", "sites", "inlined", "module",
                                                                       "margin"))
        n = len(callee)
        if any(len(a) != n for a in (package, sites, inlined, module, margin)) or \
                (n and (int(package.min()) < 0 or int(package.max()) >= len(names) or int(sites.min()) < 1
                        or bool((inlined < 0).any()) or bool((inlined > sites).any())
                        or int(module.min()) < -1 or int(module.max()) >= len(modules))):
            raise TraceError(f"{where}: inconsistent package call-site table ({len(names)} packages, {n} callees)")
        counts: dict[str, dict[str, tuple[int, int, str, int]]] = {str(p): {} for p in names}
        for p, c, s, i, m, d in zip(package.tolist(), callee, sites.tolist(), inlined.tolist(), module.tolist(),
                                    margin.tolist()):
            counts[names[p]][c] = (s, i, modules[m] if m >= 0 else "", d)
        return cls(counts, where)

    def __eq__(self, other) -> bool:
        return isinstance(other, PackageCallSites) and self.counts == other.counts


def _packed(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [n.encode() for n in names]
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), np.cumsum([len(b) for b in encoded], dtype=np.int64)


def _unpacked(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    if len(ends) and (int(ends[-1]) != len(blob) or bool((np.diff(ends, prepend=0) < 0).any())):
        raise ValueError(f"{len(ends)} names do not end where the {len(blob)} bytes of them do")
    data, starts = blob.tobytes(), [0, *ends[:-1].tolist()]
    return [data[a:b].decode() for a, b in zip(starts, ends.tolist())]


def load_from_env() -> PackageCallSites | None:
    """The table ``$MLOPT_PACKAGE_CALL_SITES`` names, or None when it is unset."""
    path = os.environ.get(PACKAGE_CALL_SITES_ENV, "")
    return PackageCallSites.load(Path(path)) if path else None

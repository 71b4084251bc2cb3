"""LinkedShares: per package, how many of its modules' ``-Oz`` objects have
each grouped code section (COMDAT; keyed by the engine's section-name hash,
``mlopt.compiler.section_name_hash``), and what each module is charged.

    shares = LinkedShares.from_heuristic({module: grouped_code, ...})
    shares.charged(module, text_size, grouped_code)   # the objective linked_share
    shares.save("shares.npz"); LinkedShares.load("shares.npz")

``charged`` = ``text_size`` minus, for each grouped section of the object,
``size * (1 - 1/k)``, with ``k`` the count of its name in the module's
package (1 for a name no ``-Oz`` object of the package has: a copy the
policy added is charged in full). A package missing from the table raises
:class:`mlopt.TraceError` naming it and the file: the table must cover every
package a rollout compiles.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ...corpus.split import package_of
from ...errors import TraceError

# The table rollouts of the linked_share objective read (--linked-shares sets it; worker processes see it).
LINKED_SHARES_ENV = "MLOPT_LINKED_SHARES"
_FORMAT = "mlopt-linked-shares-1"


class LinkedShares:
    def __init__(self, counts: Mapping[str, Mapping[int, int]], where: str = "linked shares"):
        self.counts = {p: dict(c) for p, c in counts.items()}
        self.where = where

    @classmethod
    def from_heuristic(cls, grouped: Mapping[str, Iterable[tuple[int, int]]]) -> LinkedShares:
        """From each module's ``-Oz`` grouped code (module name -> (hash, size) pairs): every package of
        those modules, each name counted once per module."""
        counts: dict[str, dict[int, int]] = {}
        for module in sorted(grouped):
            package = counts.setdefault(package_of(module), {})
            for h in {int(h) for h, _ in grouped[module]}:
                package[h] = package.get(h, 0) + 1
        return cls(counts)

    @property
    def packages(self) -> list[str]:
        return sorted(self.counts)

    def charged(self, module: str, text_size: int, grouped: Iterable[tuple[int, int]]) -> float:
        """The module's charge: its code with every grouped section at 1/k of its size."""
        package = package_of(module)
        counts = self.counts.get(package)
        if counts is None:
            raise TraceError(f"{self.where}: no package {package!r} (module {module}); build the table over "
                             f"every corpus the run compiles (mlopt.rollouts.build_linked_shares)")
        discount = 0.0
        for h, size in grouped:
            k = counts.get(int(h), 1)
            discount += size * (1.0 - 1.0 / k)
        return float(text_size) - discount

    def save(self, path: str | os.PathLike) -> None:
        names = self.packages
        sizes = np.array([len(self.counts[p]) for p in names], dtype=np.int64)
        hashes = np.array([h for p in names for h in sorted(self.counts[p])], dtype=np.uint64)
        counts = np.array([self.counts[p][h] for p in names for h in sorted(self.counts[p])], dtype=np.int64)
        with open(path, "wb") as f:
            np.savez(f, format=np.array(_FORMAT), packages=np.array(names, dtype=str), sizes=sizes,
                     hashes=hashes, counts=counts)

    @classmethod
    def load(cls, path: str | os.PathLike) -> LinkedShares:
        where = os.fspath(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError) as e:
            raise TraceError(f"{where}: cannot read the linked-shares table: {e}") from None
        if str(arrays.get("format", "")) != _FORMAT or not {"packages", "sizes", "hashes", "counts"} <= set(arrays):
            raise TraceError(f"{where}: not a linked-shares table ({_FORMAT})")
        names, sizes, hashes, counts = (arrays[k] for k in ("packages", "sizes", "hashes", "counts"))
        if len(sizes) != len(names) or int(sizes.sum()) != len(hashes) or len(hashes) != len(counts) or \
                (len(counts) and int(counts.min()) < 1):
            raise TraceError(f"{where}: inconsistent linked-shares table ({len(names)} packages, "
                             f"{int(sizes.sum())} names declared, {len(hashes)} hashes, {len(counts)} counts)")
        out, at = {}, 0
        for name, n in zip(names, sizes):
            out[str(name)] = dict(zip(hashes[at:at + n].tolist(), counts[at:at + n].tolist()))
            at += int(n)
        return cls(out, where)

    def __eq__(self, other) -> bool:
        return isinstance(other, LinkedShares) and self.counts == other.counts


def load_from_env() -> LinkedShares:
    """The table ``$MLOPT_LINKED_SHARES`` names (a typed error when unset)."""
    path = os.environ.get(LINKED_SHARES_ENV, "")
    if not path:
        raise TraceError(f"the linked_share objective needs a table of the packages' -Oz COMDAT code: pass "
                         f"--linked-shares FILE (or set ${LINKED_SHARES_ENV})")
    return LinkedShares.load(Path(path))

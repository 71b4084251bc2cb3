"""Progress for long runs: a tqdm bar with ETA on a terminal, nothing when
``quiet`` (or when stderr is not a terminal, unless forced)."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, desc: str, *, quiet: bool = False, unit: str = "module"):
        self._bar = None
        if not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, leave=False)

    def update(self, n: int = 1, **postfix) -> None:
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""Running many compiles: a local process pool (default) or a Ray cluster,
behind one interface (``map(fn, items, order=..., on_result=...)`` ->
:class:`TaskResult` per item, in item order). Trace, eval and the trainer
all use it."""

from __future__ import annotations

from .local import LocalPool
from .progress import Progress
from .task import TaskResult


def make_pool(workers: int | None = None, *, ray: str | None = None, timeout: float | None = None,
              retries: int = 1):
    """A :class:`LocalPool`, or a :class:`RayPool` when ``ray`` is ``"auto"``,
    an address, or ``"local"``."""
    if ray:
        from .ray_pool import RayPool

        return RayPool(ray, workers, timeout=timeout, retries=retries)
    return LocalPool(workers, timeout=timeout, retries=retries)


__all__ = ["LocalPool", "Progress", "TaskResult", "make_pool"]

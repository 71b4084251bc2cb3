"""The same pool on a Ray cluster (``pip install mlopt[ray]``).

``address`` is ``"auto"`` (the cluster this machine belongs to), a cluster
address, or ``"local"`` (start a local instance with ``workers`` CPUs). Each
task is a Ray task of one CPU; a task whose worker dies is retried by Ray
``retries`` times, then reported as ``crash``; one past ``timeout`` is
cancelled and reported as ``timeout``. Results are identical to the local
pool's: the tasks are deterministic and results are returned in item order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..errors import MloptError
from .task import TaskResult, call_task


def _import_ray():
    try:
        import ray
    except ImportError:
        raise MloptError("Ray is not installed: pip install 'mlopt[ray]' (or ray)") from None
    return ray


class RayPool:
    kind = "ray"

    def __init__(self, address: str = "auto", workers: int | None = None, *, timeout: float | None = None,
                 retries: int = 1):
        ray = _import_ray()
        self._ray = ray
        self.timeout = timeout
        self.retries = retries
        self._owns = False
        if not ray.is_initialized():
            kwargs = {"num_cpus": workers} if address == "local" else {"address": address}
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **kwargs)
            self._owns = True
        self.workers = workers or int(ray.cluster_resources().get("CPU", 1))
        self._remote = ray.remote(num_cpus=1, max_retries=retries)(call_task)
        self.restarts = 0

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False

    def map(self, fn: Callable, items: Sequence, *, order: Sequence[int] | None = None,
            on_result: Callable[[TaskResult], None] | None = None,
            affinity: Sequence | None = None) -> list[TaskResult]:
        """Results in item order. At most one task per worker CPU is in
        flight, so a task's time is counted from when it starts.
        ``affinity`` is accepted for LocalPool's signature; Ray places tasks
        itself."""
        ray = self._ray
        fn_ref = ray.put(fn)
        queue = list(order if order is not None else range(len(items)))[::-1]
        refs: dict = {}
        started: dict[int, float] = {}
        results: list[TaskResult | None] = [None] * len(items)

        def finish(r: TaskResult) -> None:
            results[r.index] = r
            if on_result:
                on_result(r)

        while queue or refs:
            while queue and len(refs) < self.workers:
                i = queue.pop()
                refs[self._remote.remote(fn_ref, items[i])] = i
                started[i] = time.monotonic()
            wait_for = 1.0 if self.timeout is None else min(1.0, self.timeout)
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=wait_for)
            for ref in ready:
                i = refs.pop(ref)
                try:
                    ok, value = ray.get(ref)
                    finish(TaskResult(i, value if ok else None, None if ok else "error", "" if ok else value,
                                      seconds=time.monotonic() - started[i]))
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.RayTaskError,
                        ray.exceptions.TaskCancelledError) as e:
                    finish(TaskResult(i, failure="crash", message=str(e).splitlines()[0],
                                      attempts=self.retries + 1))
            if self.timeout is not None:
                now = time.monotonic()
                for ref, i in list(refs.items()):
                    if now - started[i] > self.timeout:
                        ray.cancel(ref, force=True)
                        refs.pop(ref)
                        finish(TaskResult(i, failure="timeout", message=f"still running after {self.timeout:g} s"))
        return results  # type: ignore[return-value]

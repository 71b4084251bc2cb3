"""A local pool of worker processes, one LLVM per process.

Each worker runs one task at a time. A task that runs past ``timeout``
seconds has its worker killed and restarted and is reported as ``timeout``;
a worker that dies (a crash in native code, a kill) is restarted and its
task retried up to ``retries`` times, then reported as ``crash``. The run
itself never hangs and never stops early: every item gets a result.
Workers are fresh interpreters (``python -m mlopt.workers.worker``: no
forked LLVM state, and unlike multiprocessing's spawn they never re-run the
caller's ``__main__``), talking over two pipes; they live until
:meth:`close` (or the ``with`` block ends), so their caches (loaded
policies, modules) serve many tasks.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from multiprocessing.connection import Connection, wait

from .task import TaskResult

_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class _Worker:
    def __init__(self):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        for threads in _BLAS_THREADS:  # a worker is one core: a threaded BLAS only contends with the others
            env.setdefault(threads, "1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mlopt.workers.worker", str(to_child_r), str(from_child_w)],
            pass_fds=(to_child_r, from_child_w), env=env, stdin=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.send_conn = Connection(to_child_w, readable=False)
        self.conn = Connection(from_child_r, writable=False)
        self.sentinel = _ExitWatch(self.process)
        self.task: int | None = None
        self.started = 0.0

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()
        self.send_conn.close()
        self.conn.close()


class _ExitWatch:
    """A waitable that becomes ready when the process exits (pidfd)."""

    def __init__(self, process: subprocess.Popen):
        self.fd = os.pidfd_open(process.pid)

    def fileno(self) -> int:
        return self.fd

    def __del__(self):
        with contextlib.suppress(OSError):
            os.close(self.fd)


class LocalPool:
    """``workers`` processes (default: the number of CPUs)."""

    kind = "local"

    def __init__(self, workers: int | None = None, *, timeout: float | None = None, retries: int = 1):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.timeout = timeout
        self.retries = retries
        self._pool: list[_Worker] = []
        self._owner: dict[Hashable, int] = {}  # affinity key -> the worker (index) that ran it last
        self.restarts = 0

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for w in self._pool:
            w.stop()
        self._pool = []

    def map(self, fn: Callable, items: Sequence, *, order: Sequence[int] | None = None,
            on_result: Callable[[TaskResult], None] | None = None,
            affinity: Sequence[Hashable] | None = None) -> list[TaskResult]:
        """Results in item order; tasks start in ``order`` (e.g. largest first).
        ``affinity``: a key per item; a free worker takes the first pending
        item whose key it ran last (or no worker has run), else the first
        pending item, so items of one key keep meeting the same worker's
        caches (over calls too). Scheduling only: results do not depend on it."""
        pending = deque(order if order is not None else range(len(items)))
        attempts = [0] * len(items)
        results: list[TaskResult | None] = [None] * len(items)
        while len(self._pool) < min(self.workers, len(items)):
            self._pool.append(_Worker())
        busy: dict[int, _Worker] = {}

        def finish(r: TaskResult) -> None:
            results[r.index] = r
            if on_result:
                on_result(r)

        def replace(w: _Worker) -> None:
            w.stop()
            self.restarts += 1
            self._pool[self._pool.index(w)] = _Worker()

        def take(k: int) -> int:
            """The next item for worker k (see affinity)."""
            if affinity is None:
                return pending.popleft()
            at = next((j for j, i in enumerate(pending) if self._owner.get(affinity[i], k) == k), 0)
            i = pending[at]
            del pending[at]
            self._owner[affinity[i]] = k
            return i

        while pending or busy:
            for k, w in enumerate(self._pool):
                if w.task is None and pending:
                    i = take(k)
                    attempts[i] += 1
                    w.task, w.started = i, time.monotonic()
                    w.send_conn.send((i, fn, items[i]))
                    busy[i] = w
            waits = [w.conn for w in busy.values()] + [w.sentinel for w in busy.values()]
            limit = None
            if self.timeout is not None:
                soonest = min(w.started for w in busy.values()) + self.timeout
                limit = max(0.0, soonest - time.monotonic())
            ready = set(wait(waits, timeout=limit))
            for i, w in list(busy.items()):
                if w.conn in ready:
                    try:
                        index, ok, value, seconds = w.conn.recv()
                    except (EOFError, OSError):
                        ready.add(w.sentinel)  # died while answering
                    else:
                        w.task = None
                        del busy[i]
                        finish(TaskResult(index, value if ok else None, None if ok else "error",
                                          "" if ok else value, attempts[index], seconds))
                        continue
                if w.sentinel in ready or not w.alive():
                    del busy[i]
                    w.process.wait()
                    code = w.process.returncode
                    replace(w)
                    if attempts[i] <= self.retries:
                        pending.appendleft(i)
                    else:
                        finish(TaskResult(i, failure="crash", message=f"worker exited with code {code}",
                                          attempts=attempts[i]))
                elif self.timeout is not None and time.monotonic() - w.started > self.timeout:
                    del busy[i]
                    replace(w)
                    finish(TaskResult(i, failure="timeout", message=f"still running after {self.timeout:g} s",
                                      attempts=attempts[i], seconds=self.timeout))
        return results  # type: ignore[return-value]

"""A worker process of :class:`LocalPool`: ``python -m mlopt.workers.worker
READ_FD WRITE_FD``. Receives ``(index, fn, item)``, answers ``(index, ok,
value, seconds)``; exits, quietly, when the parent closes its pipe or is gone."""

from __future__ import annotations

import sys
import time
from multiprocessing.connection import Connection

from .task import call_task


def main(read_fd: int, write_fd: int) -> None:
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    while True:
        try:
            index, fn, item = inbox.recv()
        except (EOFError, OSError):
            return
        start = time.perf_counter()
        ok, value = call_task(fn, item)
        try:
            outbox.send((index, ok, value, time.perf_counter() - start))
        except OSError:  # the parent is gone (killed, interrupted): nobody to answer, nothing to report
            return
        except Exception as e:  # e.g. an unpicklable value: the task's error
            try:
                outbox.send((index, False, f"cannot return the result: {type(e).__name__}: {e}", 0.0))
            except OSError:
                return


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))

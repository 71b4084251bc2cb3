"""Task functions for pool tests (importable by worker processes)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def square(x: int) -> int:
    return x * x


def die_once(item: tuple[int, str]) -> int:
    """Kills its own worker the first time it runs for an item (a marker
    file remembers), then answers."""
    x, marker_dir = item
    marker = Path(marker_dir) / f"{x}.ran"
    if not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def always_die(x: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return x


def hang(x: int) -> int:
    if x == 1:
        time.sleep(600)
    return x


def fail(x: int) -> int:
    if x == 2:
        raise ValueError("two is not allowed")
    return x


def worker_pid(item) -> int:
    """The process that ran the item."""
    time.sleep(0.05)
    return os.getpid()

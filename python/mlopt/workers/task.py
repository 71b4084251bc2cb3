"""What a pool runs and what it gives back: a task is a picklable function
and one item; its :class:`TaskResult` holds the value or why there is none
(``error``: the task raised; ``crash``: its worker died, after retries;
``timeout``: it ran past the time limit and its worker was stopped)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class TaskResult:
    index: int
    value: Any = None
    failure: str | None = None  # None, "error", "crash" or "timeout"
    message: str = ""
    attempts: int = 1
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None

    def describe(self) -> str:
        return {"error": "failed", "crash": "crashed its worker", "timeout": "timed out"}.get(
            self.failure or "", "ok") + (f": {self.message}" if self.message else "")


def call_task(fn, item) -> tuple[bool, Any]:
    """Runs one task in a worker: (True, value) or (False, "Type: message")."""
    try:
        return True, fn(item)
    except Exception as e:  # reported to the parent, never lost
        return False, f"{type(e).__name__}: {e}"

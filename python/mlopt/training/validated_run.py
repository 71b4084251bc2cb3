"""What the rollout trainers (ES, PPO) share around their
iterations: the starting policy validated first (the one to beat, kept as
``best/`` unless an iteration does better), ``metrics.jsonl`` a line per
iteration, each validated policy kept as ``validated/<iteration>.npz`` on
request, and ``best/policy.npz`` the best by validation delta.

A trainer sets ``run_dir``, ``config`` (with ``iterations`` and
``keep_validated``), ``iteration``, ``best`` and ``start_validation``, and
sets ``env``, ``validation`` and ``baseline``, and defines ``step()`` (one
iteration; its metrics) and ``current_policy()`` (the policy it produces
now, the one validated)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from .environment import total_delta_percent


class ValidatedRun:
    def validate_current(self, work: Path) -> float | None:
        """Total objective delta (%) of ``current_policy()`` against the heuristic on the validation
        modules (None without them)."""
        if not self.validation:
            return None
        costs = self.env.costs([self.current_policy()], [(0, e) for e in self.validation], work)
        return total_delta_percent(costs, [self.baseline[e.name] for e in self.validation])

    def _validated(self, val: float | None) -> None:
        """After an iteration's validation (None: not validated this iteration): keep the snapshot if
        asked, and ``best/`` if it is the best so far."""
        if val is None:
            return
        if self.config.keep_validated:
            (self.run_dir / "validated").mkdir(exist_ok=True)
            self.current_policy().save(self.run_dir / "validated" / f"{self.iteration:04d}.npz", overwrite=True)
        if self.best is None or val < self.best:
            self.best = val
            self._save_best()

    def _save_best(self) -> None:
        best = self.run_dir / "best"
        best.mkdir(exist_ok=True)
        self.current_policy().save(best / "policy.npz", overwrite=True)

    def run(self, on_iteration: Callable[[dict], None] | None = None):
        """Iterations up to ``config.iterations``; returns the policy the run produces."""
        if self.iteration == 0 and self.best is None and self.validation:
            # The starting policy is the one to beat: it stays best if no iteration does better.
            work = self.run_dir / "work"
            work.mkdir(parents=True, exist_ok=True)
            self.best = self.start_validation = self.validate_current(work)
            if self.best is not None:
                self._save_best()
            shutil.rmtree(work, ignore_errors=True)
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps({"iteration": 0, "validation_delta_percent": self.best}, sort_keys=True) + "\n")
        while self.iteration < self.config.iterations:
            m = self.step()
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(m, sort_keys=True) + "\n")
            if on_iteration:
                on_iteration(m)
        return self.current_policy()

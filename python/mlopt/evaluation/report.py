"""Per-module results of a policy against the heuristic, and the summary a
compiler engineer reads first: total and per-package ``.text`` delta,
wins and losses, geometric mean of the size ratio."""

from __future__ import annotations

import csv
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path


def package_name(module: str) -> str:
    """A module's package: the first component of its name (``PKG/path/in/build``)."""
    return module.split("/", 1)[0] if "/" in module else "(root)"


@dataclass
class ModuleResult:
    module: str
    heuristic_text: int
    policy_text: int
    decisions: int
    inlined: int
    heuristic_inlined: int

    @property
    def delta(self) -> int:
        return self.policy_text - self.heuristic_text

    @property
    def delta_percent(self) -> float:
        return 100.0 * self.delta / self.heuristic_text if self.heuristic_text else 0.0

    @property
    def package(self) -> str:
        return package_name(self.module)


CSV_FIELDS = ["module", "heuristic_text", "policy_text", "delta", "delta_percent", "decisions", "inlined",
              "heuristic_inlined"]


def write_csv(rows: list[ModuleResult], path: str | os.PathLike) -> Path:
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8", errors="surrogateescape") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            d = asdict(r)
            w.writerow([d["module"], r.heuristic_text, r.policy_text, r.delta, f"{r.delta_percent:.4f}",
                        r.decisions, r.inlined, r.heuristic_inlined])
    return path


def _totals(rows: list[ModuleResult]) -> dict:
    h = sum(r.heuristic_text for r in rows)
    p = sum(r.policy_text for r in rows)
    ratios = [r.policy_text / r.heuristic_text for r in rows if r.heuristic_text and r.policy_text]
    return {"modules": len(rows), "heuristic_text": h, "policy_text": p, "delta": p - h,
            "delta_percent": 100.0 * (p - h) / h if h else 0.0,
            "wins": sum(r.delta < 0 for r in rows), "losses": sum(r.delta > 0 for r in rows),
            "ties": sum(r.delta == 0 for r in rows),
            "geomean_ratio": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else 1.0}


def summarize(rows: list[ModuleResult], failed: list[tuple[str, str]] = ()) -> dict:
    packages = sorted({r.package for r in rows})
    return {"total": _totals(rows),
            "packages": {p: _totals([r for r in rows if r.package == p]) for p in packages},
            "failed": [{"module": m, "reason": why} for m, why in failed]}


def format_summary(summary: dict) -> str:
    """The table; its first line names the LLVM major (``summary["llvm"]``,
    when there) and the sign convention."""
    llvm = f"LLVM {summary['llvm']}: " if summary.get("llvm") is not None else ""
    baseline = {"full": "-Oz + full LTO", "thin": "-Oz + ThinLTO"}.get(summary.get("lto"), "-Oz")
    lines = [f"{llvm}.text delta vs {baseline} (heuristic), negative = smaller",
             f"{'package':<20}{'modules':>8}{'heuristic':>12}{'policy':>12}{'delta':>10}{'delta %':>9}"
             f"{'wins':>6}{'losses':>7}{'geomean':>9}"]

    def line(name: str, t: dict) -> str:
        return (f"{name:<20}{t['modules']:>8}{t['heuristic_text']:>12}{t['policy_text']:>12}{t['delta']:>+10}"
                f"{t['delta_percent']:>+8.2f}%{t['wins']:>6}{t['losses']:>7}{t['geomean_ratio']:>9.4f}")

    for name, t in summary["packages"].items():
        lines.append(line(name, t))
    lines.append(line("total", summary["total"]))
    if "linked" in summary:  # evaluation/linked.py
        lines.append("package-linked estimate (each package's COMDAT code counted once, as a linker keeps it):")
        for name, t in [*summary["linked"]["packages"].items(), ("total", summary["linked"]["total"])]:
            lines.append(f"{name:<20}{'':>8}{t['heuristic_text']:>12}{t['policy_text']:>12}{t['delta']:>+10}"
                         f"{t['delta_percent']:>+8.2f}%")
    for f in summary["failed"]:
        lines.append(f"failed: {f['module']}: {f['reason']}")
    return "\n".join(lines)

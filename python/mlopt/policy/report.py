"""What a policy decides on logged decisions: the rate of each action, and
its agreement with the compiler's heuristic overall and per quantile bucket
of every feature (where does the policy depart from the heuristic?)."""

from __future__ import annotations

import numpy as np

from .batching import feature_matrix


def decision_report(policy, rows: dict[str, np.ndarray], buckets: int = 4) -> dict:
    """``policy``: anything with ``problem`` and ``evaluate(batch)`` or
    ``decide(batch)``; ``rows``: feature columns (+ the default decision)."""
    problem = policy.problem
    if hasattr(policy, "evaluate"):
        decided = policy.evaluate(rows)[problem.decision.name]
    else:
        decided = policy.decide(rows)
    decided = np.asarray(decided).reshape(-1)
    n = len(decided)
    out: dict = {"rows": n, "policy_rates": {str(a): float(np.mean(decided == a)) if n else 0.0
                                             for a in range(problem.num_actions)}}
    default = problem.default_decision.name if problem.default_decision else None
    if default is None or default not in rows or n == 0:
        return out
    heuristic = np.asarray(rows[default]).reshape(-1)
    agree = decided == heuristic
    out["heuristic_rates"] = {str(a): float(np.mean(heuristic == a)) for a in range(problem.num_actions)}
    out["agreement"] = float(agree.mean())
    x = feature_matrix(rows, problem.features).astype(np.float64)
    per_feature = {}
    at = 0
    for spec, width in zip(problem.features, problem.feature_widths):
        values = x[:, at:at + width].mean(axis=1) if width > 1 else x[:, at]
        at += width
        edges = np.unique(np.quantile(values, np.linspace(0, 1, buckets + 1)))
        index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, max(len(edges) - 2, 0))
        rows_out = []
        for b in range(max(len(edges) - 1, 1)):
            mask = index == b
            if mask.any():
                rows_out.append({"low": float(edges[b]), "high": float(edges[min(b + 1, len(edges) - 1)]),
                                 "rows": int(mask.sum()), "agreement": float(agree[mask].mean()),
                                 "policy_rate_1": float(np.mean(decided[mask] == 1)),
                                 "heuristic_rate_1": float(np.mean(heuristic[mask] == 1))})
        per_feature[spec.name] = rows_out
    out["per_feature"] = per_feature
    return out


def format_decision_report(report: dict, top: int = 8) -> str:
    lines = [f"{report['rows']} decisions; policy: "
             + ", ".join(f"action {a} {100 * r:.1f}%" for a, r in report["policy_rates"].items())]
    if "agreement" not in report:
        lines.append("(no heuristic decisions in the input: no agreement)")
        return "\n".join(lines)
    lines.append("heuristic: " + ", ".join(f"action {a} {100 * r:.1f}%" for a, r in report["heuristic_rates"].items())
                 + f"; agreement {100 * report['agreement']:.2f}%")
    worst = sorted(report["per_feature"].items(), key=lambda kv: min(b["agreement"] for b in kv[1]))[:top]
    lines.append(f"{'feature':<34}{'bucket':>24}{'rows':>8}{'agree':>8}{'policy 1':>10}{'heur. 1':>9}")
    for name, bks in worst:
        for b in bks:
            span = "[{:g}, {:g}]".format(b["low"], b["high"])
            lines.append(f"{name:<34}{span:>24}{b['rows']:>8}{100 * b['agreement']:>7.1f}%"
                         f"{100 * b['policy_rate_1']:>9.1f}%{100 * b['heuristic_rate_1']:>8.1f}%")
            name = ""
    return "\n".join(lines)

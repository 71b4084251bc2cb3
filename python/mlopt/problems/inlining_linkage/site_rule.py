"""A fixed rule over the inlining-linkage problem's inputs: inline where the
-Oz heuristic does, and also at the sites it declines whose callee is of
one of the given linkage classes, has at most ``max_users`` users
(``callee_users``) and ``cost_estimate - threshold < margin``:

    decision = inlining_default or (callee_linkage in linkages
                                    and callee_users <= max_users
                                    and cost_estimate - threshold < margin)

Why (benchmarks/README.md, stops 74-75): with ``linkonce`` callees (C++
inline functions and template instances) the rule inlines the last few
calls of a function each module would otherwise keep a copy of. On the
validation packages of splits149 it is -1.7% ``.text`` per module with
``2:2:100``. A ``SiteRule`` is a callable policy (``mlopt.compile`` passes
it the heuristic's decision and the linkage as inputs 39 and 40), and its
:meth:`labels` are what :mod:`mlopt.training.rule_start` teaches a network.

    rule = SiteRule.parse("linkonce:2:100")      # or "2:2:100"; classes comma-separated
    mlopt.compile(module, rule)                  # the rule as a policy
    rule.labels(trace.columns)                   # its decision per logged row
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..inlining.spec import DEFAULT_DECISION, FEATURES
from . import LINKAGE, LINKAGE_CLASSES

_USERS, _COST, _THRESHOLD = (list(FEATURES).index(f) for f in ("callee_users", "cost_estimate", "threshold"))
# the columns labels() reads
COLUMNS = (DEFAULT_DECISION, LINKAGE, "callee_users", "cost_estimate", "threshold")


@dataclass(frozen=True)
class SiteRule:
    linkages: frozenset[int]
    max_users: int
    margin: int

    takes_default = True  # as a policy: mlopt.compile passes the heuristic's decision as input 39
    takes_linkage = True  # and the callee's linkage class as input 40

    @classmethod
    def parse(cls, spec: str) -> SiteRule:
        """``"L:U:D"``: linkage classes ``L`` (names or numbers, comma-separated), at most ``U`` users,
        ``cost_estimate - threshold < D``. ValueError says what is wrong."""
        parts = spec.split(":")
        if len(parts) != 3:
            raise ValueError(f"rule {spec!r}: expected LINKAGES:MAX_USERS:MARGIN (e.g. linkonce:2:100)")
        links, users, margin = parts
        classes = set()
        for item in links.split(","):
            item = item.strip()
            if item in LINKAGE_CLASSES:
                classes.add(LINKAGE_CLASSES.index(item))
            elif item.isdigit() and int(item) < len(LINKAGE_CLASSES):
                classes.add(int(item))
            else:
                raise ValueError(f"rule {spec!r}: linkage {item!r} is not one of {', '.join(LINKAGE_CLASSES)} "
                                 f"(or 0-{len(LINKAGE_CLASSES) - 1})")
        try:
            return cls(frozenset(classes), int(users), int(margin))
        except ValueError:
            raise ValueError(f"rule {spec!r}: MAX_USERS and MARGIN must be integers") from None

    def __str__(self) -> str:
        links = ",".join(LINKAGE_CLASSES[k] for k in sorted(self.linkages))
        return f"{links}:{self.max_users}:{self.margin}"

    def __call__(self, row) -> int:
        """The decision at one site (a row of the 38 features, the heuristic's decision, the linkage)."""
        if int(row[len(FEATURES)]):
            return 1
        return int(int(row[len(FEATURES) + 1]) in self.linkages and int(row[_USERS]) <= self.max_users
                   and int(row[_COST]) - int(row[_THRESHOLD]) < self.margin)

    def labels(self, columns) -> np.ndarray:
        """Its decision (int64 0/1) for every row of a trace's or log's columns (``callee_linkage`` among
        them: ``mlopt trace --callee-linkage``). KeyError names a missing column."""
        for name in COLUMNS:
            if name not in columns:
                raise KeyError(name)
        col = {name: np.asarray(columns[name]).reshape(-1).astype(np.int64) for name in COLUMNS}
        added = (np.isin(col[LINKAGE], sorted(self.linkages)) & (col["callee_users"] <= self.max_users)
                 & (col["cost_estimate"] - col["threshold"] < self.margin))
        return ((col[DEFAULT_DECISION] == 1) | added).astype(np.int64)

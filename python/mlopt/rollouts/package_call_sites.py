"""The table the one-site-linkonce rule reads (problems/inlining_linked/call_sites.py):
every module compiled once with the heuristic, each inlining decision's
callee, its linkage class and the heuristic's answer, counted per package.

    sites = build_package_call_sites(entries, pool=pool)   # PackageCallSites
    sites.save("sites.npz")   # rollouts read it as $MLOPT_PACKAGE_CALL_SITES (--package-call-sites)

Give it every module of every package a run compiles: a package's counts
need all of its modules. A module whose compile fails is left out, and
named in the error unless ``skip_failed``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..corpus import CorpusEntry
from ..errors import TraceError
from ..log import read_log
from ..problems.inlining_linked.call_sites import PackageCallSites
from .runner import failures_of, run_rollouts
from .tasks import RolloutTask


def _decisions(rollout) -> list[tuple[str, int, int, int]]:
    """(callee, callee_linkage, heuristic decision, cost_estimate - threshold) of each of a heuristic
    compile's decisions."""
    if not rollout.call_sites:
        return []
    log = read_log(rollout.log_bytes)
    linkage = np.asarray(log["callee_linkage"]).reshape(-1)
    decision = np.asarray(log["inlining_default"]).reshape(-1)
    margin = np.asarray(log["cost_estimate"]).reshape(-1) - np.asarray(log["threshold"]).reshape(-1)
    if not len(linkage) == len(decision) == len(rollout.call_sites):
        raise TraceError(f"{rollout.module}: {len(rollout.call_sites)} call sites but {len(decision)} logged "
                         f"decisions")
    return [(callee, int(k), int(d), int(m))
            for (_, callee), k, d, m in zip(rollout.call_sites, linkage, decision, margin)]


def build_package_call_sites(entries: Sequence[CorpusEntry], *, pool=None, workers: int | None = None,
                             quiet: bool = True, skip_failed: bool = False) -> PackageCallSites:
    """The packages' call-site table from one heuristic compile of every module in ``entries``."""
    tasks = [RolloutTask(e, None, log=True, call_sites=True, callee_linkage=True, cache=False) for e in entries]
    results = run_rollouts(tasks, pool=pool, workers=workers, quiet=quiet, desc="-Oz call sites")
    failed = failures_of(tasks, results)
    if failed and not skip_failed:
        module, reason = failed[0]
        raise TraceError(f"package call sites: {len(failed)} module(s) failed to compile, first {module}: {reason}")
    return PackageCallSites.from_compiles({t.entry.name: _decisions(r.value)
                                           for t, r in zip(tasks, results) if r.ok})

"""Rules that read a package's -Oz call-site counts, on a split, by the
linked share: how the one-site-linkonce rule (problems/inlining_linked/
call_sites.py) was chosen, and what its neighbours do.

Every rule forces decisions by callee on top of a policy (``-Oz`` or a
model): ``inline:LO:HI:CAP`` inlines each ``linkonce_odr`` callee the
heuristic declines at all of its package's sites when it has LO..HI sites
in the package and ``cost_estimate - threshold`` at most CAP at every one;
``inline1:LO:HI:CAP`` the same, all sites in one module; ``decline:LO:CAP``
declines each ``linkonce_odr`` callee the heuristic inlines at LO or more
sites in two or more modules, margins at most CAP (``declinenear:LO:FLOOR``:
each it inlines at all of its LO or more sites, the largest margin at least
FLOOR, i.e. a copy close to the threshold); ``budget:B:CAP`` inlines
each declined ``linkonce_odr`` callee with n sites whose largest margin m
is at most CAP and (n - 1) * m at most B (``budget1``: its sites in one
module): a callee's body is deleted when all n of its calls are inlined,
and each of the n - 1 further copies costs about its margin. ``A+B`` applies
both (A's decision wins where they meet). The one-site-linkonce rule is
``inline:1:1:1000``. Figures: the split's linked share vs -Oz in
percent (negative = smaller) and its largest package growth. Run it on a
validation split; the rule was chosen there.

    python3 benchmarks/package_site_rules.py splits149/validation --table sites.npz \\
        --linked-shares shares/linked-shares.npz --policy=-Oz --policy start-s0=models/start-s0 \\
        --rule inline:1:1:1000 --rule inline:1:1:100 --rule inline:1:2:1000000 --rule decline:10:1000000
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.corpus.split import package_of  # noqa: E402
from mlopt.problems.inlining_linked.call_sites import PackageCallSites  # noqa: E402
from mlopt.rollouts import RolloutTask, run_rollouts  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402


def rule_decisions(table: PackageCallSites, rule: str) -> dict[str, dict[str, int]]:
    """module -> {callee: decision} of ``rule`` (module docstring; ``A+B``: both, A's decisions first) over the
    table's packages."""
    if "+" in rule:
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for part in reversed(rule.split("+")):
            for key, decisions in rule_decisions(table, part).items():
                out[key].update(decisions)
        return out
    kind, *numbers = rule.split(":")
    values = [int(v) for v in numbers]
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for package, callees in table.counts.items():
        for callee, (sites, inlined, module, margin) in callees.items():
            if kind in ("inline", "inline1") and len(values) == 3:
                lo, hi, cap = values
                if inlined == 0 and lo <= sites <= hi and margin <= cap and (module or kind == "inline"):
                    if module:
                        out[module][callee] = 1
                    else:  # sites in several modules: every module of the package that calls it
                        out[f"{package}/*"][callee] = 1
            elif kind in ("budget", "budget1") and len(values) == 2:
                budget, cap = values
                if inlined == 0 and margin <= cap and (sites - 1) * max(margin, 0) <= budget and \
                        (module or kind == "budget"):
                    out[module or f"{package}/*"][callee] = 1
            elif kind == "declinenear" and len(values) == 2:
                lo, floor = values
                if inlined == sites >= lo and margin >= floor:
                    out[module or f"{package}/*"][callee] = 0
            elif kind == "decline" and len(values) == 2:
                lo, cap = values
                if inlined >= lo and not module and margin <= cap:
                    out[f"{package}/*"][callee] = 0
            else:
                raise SystemExit(f"package_site_rules: rule {rule!r}: expected inline:LO:HI:CAP, "
                                 "inline1:LO:HI:CAP, budget:B:CAP, budget1:B:CAP, decline:LO:CAP or "
                                 "declinenear:LO:FLOOR")
    return out


def forced_for(decisions: dict[str, dict[str, int]], module: str) -> tuple[tuple[str, int], ...]:
    both = {**decisions.get(f"{package_of(module)}/*", {}), **decisions.get(module, {})}
    return tuple(sorted(both.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--table", type=Path, required=True, help="mlopt corpus call-sites over the split's packages")
    ap.add_argument("--linked-shares", type=Path, required=True, help="the linked-shares table of its packages")
    ap.add_argument("--policy", action="append", default=[], metavar="NAME=PATH", help="-Oz, or NAME=model path")
    ap.add_argument("--rule", action="append", default=[], metavar="RULE")
    ap.add_argument("--workers", type=int)
    args = ap.parse_args()
    os.environ["MLOPT_LINKED_SHARES"] = str(args.linked_shares.resolve())  # before the workers start
    table = PackageCallSites.load(args.table)
    entries = corpus_entries(args.corpus)
    rules = {r: rule_decisions(table, r) for r in args.rule}
    policies = [(p, None) if p == "-Oz" else tuple(p.split("=", 1)) for p in args.policy or ["-Oz"]]
    print(f"LLVM {default_llvm()}, {args.corpus}: {len(entries)} modules; linked share vs -Oz (negative = smaller)")
    print("| policy | rule | forced callees | linked share | largest package growth |")
    print("|---|---|---|---|---|")
    with make_pool(args.workers, timeout=600) as pool:
        def costs(path, forced):
            tasks = [RolloutTask(e, path, problem="inlining-linked", cache=False, forced_callees=forced(e.name))
                     for e in entries]
            results = run_rollouts(tasks, pool=pool, quiet=True)
            bad = [(t.entry.name, r.describe()) for t, r in zip(tasks, results) if not r.ok]
            if bad:
                raise SystemExit(f"{len(bad)} compiles failed, first {bad[0][0]}: {bad[0][1]}")
            return {t.entry.name: r.value.cost for t, r in zip(tasks, results)}, sum(len(t.forced_callees)
                                                                                     for t in tasks)

        oz, _ = costs(None, lambda m: ())
        total = sum(oz.values())
        for name, path in policies:
            for rule in ["none", *args.rule]:
                got, n = costs(path, (lambda m: ()) if rule == "none" else (lambda m, r=rule: forced_for(rules[r], m)))
                per = defaultdict(lambda: [0.0, 0.0])
                for m, c in got.items():
                    per[package_of(m)][0] += c
                    per[package_of(m)][1] += oz[m]
                worst = max(per.items(), key=lambda kv: kv[1][0] / kv[1][1])
                print(f"| {name} | {rule} | {n:,} | **{100 * (sum(got.values()) - total) / total:+.3f}%** | "
                      f"{worst[0]} {100 * (worst[1][0] / worst[1][1] - 1):+.2f}% |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

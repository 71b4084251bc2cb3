"""Rules over a module's own -Oz call sites, callee by callee, on a split, by
the linked share: whether the per-site heuristic leaves size on the table
where a callee's sites are decided apart (package_site_rules.py does the
same for a package's ``linkonce_odr`` callees; this one needs no package
pre-pass, and reaches C's ``static`` and external callees).

Each module is compiled once with ``-Oz``, logging every decision's callee,
its linkage class (``external``, ``local``, ``linkonce``, ...) and
``cost_estimate - threshold`` (its margin). A rule then forces every site
of each callee it selects in that module, on top of ``-Oz``:

- ``inline:CLASS:LO:HI:CAP``: the heuristic declined all of the callee's
  LO..HI sites, each margin at most CAP -> inline them all (a ``local``
  callee's body is then deleted);
- ``budget:CLASS:B:CAP``: declined all n sites, largest margin m at most
  CAP and (n - 1) * m at most B -> inline them all;
- ``mixed:CLASS:D``: the heuristic inlined some of the callee's sites but
  not all (its body stays) -> D (0: decline them all, 1: inline them all);
- ``decline:CLASS:LO:FLOOR``: inlined at all LO or more sites, the largest
  margin at least FLOOR -> decline them all.

CLASS is a linkage class name or ``any``; ``A+B`` joins rules (A's
decision wins where they meet). Figures: linked share vs -Oz in percent
(negative = smaller), C and C++ apart, and the largest package growth.
Choose on a validation split; look at test once.

    python3 benchmarks/module_callee_rules.py splits149/validation --linked-shares shares.npz \\
        --rule mixed:local:0 --rule mixed:local:1 --rule inline:local:2:2:50
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
from mlopt.corpus.debian import language_of  # noqa: E402
from mlopt.corpus.split import package_of  # noqa: E402
from mlopt.problems.inlining_linkage import LINKAGE_CLASSES  # noqa: E402
from mlopt.rollouts import RolloutTask, run_rollouts  # noqa: E402
from mlopt.rollouts.package_call_sites import _decisions  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402


def module_callees(decisions: list[tuple[str, int, int, int]]) -> dict[str, tuple[int, int, int, int]]:
    """callee -> (linkage class, sites, sites the heuristic inlined, largest margin) of one module."""
    out: dict[str, list[int]] = {}
    for callee, linkage, decision, margin in decisions:
        c = out.setdefault(callee, [int(linkage), 0, 0, int(margin)])
        c[1] += 1
        c[2] += int(decision)
        c[3] = max(c[3], int(margin))
    return {k: tuple(v) for k, v in out.items()}


def rule_decisions(callees: dict[str, tuple[int, int, int, int]], rule: str) -> dict[str, int]:
    """{callee: decision} that ``rule`` (module docstring) forces in a module with these callees."""
    if "+" in rule:
        out: dict[str, int] = {}
        for part in reversed(rule.split("+")):
            out.update(rule_decisions(callees, part))
        return out
    kind, cls, *numbers = rule.split(":")
    if cls != "any" and cls not in LINKAGE_CLASSES:
        raise SystemExit(f"module_callee_rules: rule {rule!r}: class {cls!r} is not any or one of {LINKAGE_CLASSES}")
    want = None if cls == "any" else LINKAGE_CLASSES.index(cls)
    values = [int(v) for v in numbers]
    out = {}
    for callee, (linkage, sites, inlined, margin) in callees.items():
        if want is not None and linkage != want:
            continue
        if kind == "inline" and len(values) == 3:
            lo, hi, cap = values
            if inlined == 0 and lo <= sites <= hi and margin <= cap:
                out[callee] = 1
        elif kind == "budget" and len(values) == 2:
            budget, cap = values
            if inlined == 0 and margin <= cap and (sites - 1) * max(margin, 0) <= budget:
                out[callee] = 1
        elif kind == "mixed" and len(values) == 1 and values[0] in (0, 1):
            if 0 < inlined < sites:
                out[callee] = values[0]
        elif kind == "decline" and len(values) == 2:
            lo, floor = values
            if inlined == sites >= lo and margin >= floor:
                out[callee] = 0
        else:
            raise SystemExit(f"module_callee_rules: rule {rule!r}: expected inline:CLASS:LO:HI:CAP, "
                             "budget:CLASS:B:CAP, mixed:CLASS:0|1 or decline:CLASS:LO:FLOOR")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--linked-shares", type=Path, required=True, help="the linked-shares table of its packages")
    ap.add_argument("--rule", action="append", default=[], metavar="RULE")
    ap.add_argument("--workers", type=int)
    args = ap.parse_args()
    os.environ["MLOPT_LINKED_SHARES"] = str(args.linked_shares.resolve())  # before the workers start
    entries = corpus_entries(args.corpus)
    language = {e.name: language_of(Path(str(e.bitcode_path)[:-3] + ".cmd").read_bytes()) for e in entries}
    print(f"LLVM {default_llvm()}, {args.corpus}: {len(entries)} modules; linked share vs -Oz (negative = smaller)")
    print("| rule | modules changed | forced callees | linked share | C / C++ | largest package growth |")
    print("|---|---|---|---|---|---|")
    with make_pool(args.workers, timeout=600) as pool:
        traced = run_rollouts([RolloutTask(e, None, log=True, call_sites=True, callee_linkage=True, cache=False)
                               for e in entries], pool=pool, quiet=True, desc="-Oz call sites")
        bad = [(e.name, r.describe()) for e, r in zip(entries, traced) if not r.ok]
        if bad:
            raise SystemExit(f"{len(bad)} compiles failed, first {bad[0][0]}: {bad[0][1]}")
        callees = {e.name: module_callees(_decisions(r.value)) for e, r in zip(entries, traced)}

        def costs(forced: dict[str, dict[str, int]]) -> dict[str, float]:
            """The linked share of each module ``forced`` names, its callees forced on -Oz."""
            tasks = [RolloutTask(e, None, problem="inlining-linked", cache=False,
                                 forced_callees=tuple(sorted(forced[e.name].items())))
                     for e in entries if e.name in forced]
            results = run_rollouts(tasks, pool=pool, quiet=True)
            bad = [(t.entry.name, r.describe()) for t, r in zip(tasks, results) if not r.ok]
            if bad:
                raise SystemExit(f"{len(bad)} compiles failed, first {bad[0][0]}: {bad[0][1]}")
            return {t.entry.name: r.value.cost for t, r in zip(tasks, results)}

        oz = costs({e.name: {} for e in entries})
        for rule in args.rule:
            forced = {m: d for m, cs in callees.items() if (d := rule_decisions(cs, rule))}
            got = {**oz, **costs(forced)}
            per = defaultdict(lambda: [0.0, 0.0])
            for m, c in got.items():
                per[package_of(m)][0] += c
                per[package_of(m)][1] += oz[m]

            def share(lang: str | None, got=got) -> float:
                mine = [m for m in got if lang is None or language[m] == lang]
                base = sum(oz[m] for m in mine)
                return 100 * (sum(got[m] for m in mine) - base) / base if base else 0.0

            worst = max(per.items(), key=lambda kv: kv[1][0] / kv[1][1])
            print(f"| {rule} | {len(forced):,} | {sum(len(d) for d in forced.values()):,} | "
                  f"**{share(None):+.3f}%** | {share('c'):+.3f} / {share('c++'):+.3f}% | "
                  f"{worst[0]} {100 * (worst[1][0] / worst[1][1] - 1):+.2f}% |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which of an oracle's savings are on callees a training search also moved?

``bench_search_headroom.py --moves callee`` searches a split's own modules
and keeps each module's accepted moves ("never inline f", "inline f
wherever asked") in ``headroom.json``; ``mlopt train search --moves callee``
keeps the moves accepted on the training modules in ``search.json``. This
splits the oracle's savings (each accepted move's cost saving, in the
search's objective) by whether a training search accepted the same move
(the same callee, the same decision), the same callee the other way, or
never touched that callee: the part a policy could carry by recognizing
the callee itself, against what is particular to the oracle's packages.
All / C / C++; a callee is a (mangled) symbol name.

    python3 benchmarks/moves_overlap.py hr16-linked/headroom.json search-s0 search-s1 search-s2 \
        --corpus splits149/test
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from bench_search_headroom import _language  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("headroom", type=Path, help="bench_search_headroom.py's headroom.json (callee moves)")
    ap.add_argument("runs", type=Path, nargs="+", help="`mlopt train search --moves callee` run directories")
    ap.add_argument("--corpus", type=Path, required=True, help="the oracle's corpus (for each module's language)")
    ap.add_argument("--search", help="which of headroom.json's searches (default: the first)")
    args = ap.parse_args(argv)
    oracle = json.loads(args.headroom.read_text())
    name = args.search or next(iter(oracle["runs"]))
    modules = oracle["runs"][name]["modules"]
    if not all("flips" in m for m in modules.values()):
        print(f"moves_overlap: {args.headroom}: no accepted moves kept (rerun bench_search_headroom.py)",
              file=sys.stderr)
        return 2
    trained: dict[str, set[int]] = defaultdict(set)
    for run in args.runs:
        for m in json.loads((run / "search.json").read_text()):
            for f in m["flips"]:
                trained[f["callee"]].add(f["decision"])
    language = {e.name: _language(e) for e in corpus_entries(args.corpus)}
    kinds = ("same move", "same callee, other decision", "callee not moved in training")
    saved = {lang: dict.fromkeys(kinds, 0.0) for lang in ("all", "c", "c++")}
    counts = dict.fromkeys(kinds, 0)
    heuristic = dict.fromkeys(saved, 0.0)
    for module, m in modules.items():
        lang = language[module]
        for key in ("all", lang):
            heuristic[key] += m["heuristic"]
        for f in m["flips"]:
            kind = (kinds[0] if f["decision"] in trained.get(f["callee"], ()) else
                    kinds[1] if f["callee"] in trained else kinds[2])
            counts[kind] += 1
            for key in ("all", lang):
                saved[key][kind] += f["parent_cost"] - f["cost"]
    print(f"{args.headroom} ({name}, {oracle['problem']}, LLVM {oracle['llvm']}) against {len(args.runs)} "
          f"training searches ({sum(len(d) for d in trained.values())} distinct accepted moves)")
    print("| oracle's accepted moves | moves | saved, all | C | C++ |")
    print("|---|---|---|---|---|")
    for kind in kinds:
        cells = [f"{-100.0 * saved[k][kind] / heuristic[k]:+.3f}%" if heuristic[k] else "-" for k in saved]
        print(f"| {kind} | {counts[kind]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

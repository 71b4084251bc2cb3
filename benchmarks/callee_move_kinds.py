"""What kind of callee do the searched savings decline or force? The callee
search (``mlopt train search --moves callee``) on a corpus, every accepted
move classed by the callee's linkage in the module's own bitcode and by how
many sites the heuristic had for it.

LLVM's 38 inliner features do not say whether a callee's body goes away when
its last site is inlined (``internal``/``private``: a C ``static``;
``linkonce_odr``: a C++ inline function or template) or stays (an external
definition); this measures how much of what a search finds depends on that,
so a feature can be judged before it is built. Run it on training or
validation modules, never on a test split you will report.

    python3 benchmarks/callee_move_kinds.py csample --init prior20-s0.npz --languages csample-lang.json --out moves

Linkage comes from ``llvm-nm-N --defined-only`` of the module (``t``/``d``:
local, ``W``/``V``: weak or linkonce, ``T``: external); a callee that is not
defined in the module is "declaration" (it can only be declined). Bytes are
the accepted moves' own savings (parent size minus size), summed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.problems import load_weights  # noqa: E402
from mlopt.rollouts import trace_corpus  # noqa: E402
from mlopt.training.callee_search import CalleeSearch  # noqa: E402
from mlopt.training.local_search import SearchConfig  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402

KINDS = {"t": "local", "d": "local", "b": "local", "r": "local", "W": "linkonce/weak", "V": "linkonce/weak",
         "w": "linkonce/weak", "v": "linkonce/weak", "T": "external", "D": "external"}


def linkage(bitcode: Path, llvm: int) -> dict[str, str]:
    """Defined symbol -> linkage class of one module's bitcode (llvm-nm)."""
    out = subprocess.run([f"llvm-nm-{llvm}", "--defined-only", str(bitcode)], capture_output=True, text=True,
                         check=True).stdout
    kinds = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            kinds[parts[-1]] = KINDS.get(parts[-2], "other")
    return kinds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--init", type=Path, required=True, help="the starting policy's weights (.npz)")
    ap.add_argument("--evaluations", type=int, default=16, help="compiles per module (16)")
    ap.add_argument("--languages", type=Path, help="JSON module -> 'c' or 'c++' (else one class 'all')")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    languages = json.loads(args.languages.read_text()) if args.languages else {}
    llvm = default_llvm()
    start = time.perf_counter()
    with make_pool(args.workers, timeout=600) as pool:
        ds = trace_corpus(args.corpus, workers=args.workers)
        entries = corpus_entries(args.corpus)
        config = SearchConfig(evaluations_per_module=args.evaluations, batch=8, max_decisions=3000, max_flips=10)
        search = CalleeSearch(load_weights(args.init), ds, entries, config, work=args.out / "work", pool=pool)
        rounds = search.run()
    seconds = time.perf_counter() - start
    base = defaultdict(int)
    saved = defaultdict(lambda: defaultdict(int))
    count = defaultdict(lambda: defaultdict(int))
    moves = []
    for m in search.modules:
        lang = languages.get(m.entry.name, "all")
        base[lang] += m.baseline
        if not m.flips:
            continue
        kinds = linkage(m.entry.bitcode_path, llvm)
        for f in m.flips:
            kind = kinds.get(f["callee"], "declaration")
            key = (kind, "never inline" if f["decision"] == 0 else "inline everywhere")
            saved[lang][key] += f["parent_size"] - f["size"]
            count[lang][key] += 1
            moves.append({"module": m.entry.name, "language": lang, "linkage": kind, **f})
    print(f"{args.corpus}: {len(search.modules)} modules, {sum(r['evaluations'] for r in rounds):,} compiles "
          f"({seconds:.0f} s), LLVM {llvm}; search {search.delta_percent():+.3f}%")
    print("| language | callee linkage | move | accepted | bytes saved | share of the language's bytes |")
    print("|---|---|---|---|---|---|")
    for lang in sorted(saved):
        for key, b in sorted(saved[lang].items(), key=lambda kv: -kv[1]):
            print(f"| {lang} | {key[0]} | {key[1]} | {count[lang][key]} | {b:,} | {100 * b / base[lang]:.3f}% |")
    (args.out / "moves.json").write_text(json.dumps({"llvm": llvm, "corpus": str(args.corpus), "moves": moves,
                                                     "bytes": dict(base)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

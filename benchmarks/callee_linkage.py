"""Which callees the savings are on, by the callee's linkage.

LLVM's 38 inliner features do not say what happens to a callee's body when
sites stop calling it: a ``internal`` function (a C ``static``) goes away
with its last call, a ``linkonce_odr`` one (a C++ inline function or
template instance) too, an ``available_externally`` one is never emitted
(its code exists only where it is inlined), an external definition stays
whatever the sites do. This measures how much of what the inliner can save
depends on that, so such an input can be judged before it is built.

``moves``: the callee search (``mlopt train search --moves callee``) on a
corpus; every accepted move ("never inline f", "inline f wherever asked")
classed by f's linkage, with the bytes it saved. ``--report`` re-prints a
saved run. ``inlined``: a policy's inlined sites against the heuristic's,
per callee linkage and language, on a corpus (``--keep-out external``:
and again with the external callees the heuristic inlines nowhere in the
module declined everywhere). Run both on training or
validation modules, never on a test split you report.

    python3 benchmarks/callee_linkage.py moves splits149/train --sample 500,300 --init prior20-s0.npz --out moves
    python3 benchmarks/callee_linkage.py inlined best-s0-model splits149/validation

Linkage is read from the module's own bitcode (``llvm-dis-N``); a callee the
module does not define is "declaration". Languages come from each module's
``.cmd`` (the main file's suffix).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import mlopt  # noqa: E402
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.corpus.debian import language_of  # noqa: E402

KINDS = ("internal", "linkonce_odr", "available_externally", "external", "weak", "declaration")
_NAME = re.compile(r'@("(?:[^"\\]|\\.)*"|[-$._A-Za-z0-9]+)\(')


def linkages(bitcode: Path, llvm: int) -> dict[str, str]:
    """Function defined in the module -> its linkage class (one of KINDS but declaration)."""
    text = subprocess.run([f"llvm-dis-{llvm}", str(bitcode), "-o", "-"], capture_output=True, text=True,
                          check=True).stdout
    out = {}
    for line in text.splitlines():
        if not line.startswith("define "):
            continue
        m = _NAME.search(line)
        if not m:
            continue
        head = line[:m.start()].split()
        kind = ("available_externally" if "available_externally" in head else
                "linkonce_odr" if "linkonce_odr" in head or "linkonce" in head else
                "weak" if "weak" in head or "weak_odr" in head else
                "internal" if "internal" in head or "private" in head else "external")
        out[m.group(1).strip('"')] = kind
    return out


def language(entry) -> str:
    return language_of(Path(str(entry.bitcode_path)[:-3] + ".cmd").read_bytes())


def moves(args) -> int:
    llvm = default_llvm()
    if args.report:
        saved = json.loads(args.report.read_text())
        entries = {e.name: e for e in corpus_entries(args.corpus)}
        report_moves(saved, entries, llvm)
        return 0
    if args.init is None or args.out is None:
        print("callee_linkage: moves needs --init and --out (or --report)", file=sys.stderr)
        return 2
    from mlopt.problems import load_weights
    from mlopt.rollouts import trace_corpus
    from mlopt.training.callee_search import CalleeSearch
    from mlopt.training.local_search import SearchConfig
    from mlopt.workers import make_pool

    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    entries = corpus_entries(args.corpus)
    if args.sample:
        entries = sample(entries, args.sample, args.seed)
    with make_pool(args.workers, timeout=600) as pool:
        ds = trace_corpus(args.corpus, modules=[e.name for e in entries], workers=args.workers, pool=pool)
        config = SearchConfig(evaluations_per_module=args.evaluations, batch=8, max_decisions=3000, max_flips=10)
        search = CalleeSearch(load_weights(args.init), ds, entries, config, work=args.out / "work", pool=pool)
        rounds = search.run()
    base = defaultdict(int)
    found = []
    for m in search.modules:
        lang = language(m.entry)
        base[lang] += m.baseline
        found += [{"module": m.entry.name, "language": lang, **f} for f in m.flips]
    saved = {"llvm": llvm, "corpus": str(args.corpus), "init": str(args.init), "modules": len(search.modules),
             "compiles": sum(r["evaluations"] for r in rounds), "seconds": time.perf_counter() - start,
             "delta_percent": search.delta_percent(), "bytes": dict(base), "moves": found}
    (args.out / "moves.json").write_text(json.dumps(saved, indent=1) + "\n")
    report_moves(saved, {e.name: e for e in entries}, llvm)
    return 0


def sample(entries, counts: str, seed: int):
    """``counts`` ("C,CXX") modules of each language drawn at random with ``seed``, in the corpus's order."""
    try:
        n_c, n_cxx = (int(v) for v in counts.split(","))
    except ValueError:
        raise SystemExit(f"callee_linkage: --sample wants two counts, C and C++ (500,300), not {counts!r}") from None
    rng = random.Random(seed)
    by_language = {"c": [], "c++": []}
    for e in entries:
        by_language[language(e)].append(e.name)
    picked = set(rng.sample(by_language["c"], min(n_c, len(by_language["c"]))) +
                 rng.sample(by_language["c++"], min(n_cxx, len(by_language["c++"]))))
    return [e for e in entries if e.name in picked]


def report_moves(saved: dict, entries: dict, llvm: int) -> None:
    kinds_of = {}
    saved_bytes, count = defaultdict(int), defaultdict(int)
    for f in saved["moves"]:
        if f["module"] not in kinds_of:
            kinds_of[f["module"]] = linkages(entries[f["module"]].bitcode_path, llvm)
        kind = kinds_of[f["module"]].get(f["callee"], "declaration")
        key = (f["language"], kind, "never inline" if f["decision"] == 0 else "inline everywhere")
        saved_bytes[key] += f["parent_size"] - f["size"]
        count[key] += 1
    print(f"{saved['corpus']}: {saved['modules']} modules, {saved['compiles']:,} compiles ({saved['seconds']:.0f} s), "
          f"LLVM {saved['llvm']}; the search: {saved['delta_percent']:+.3f}%")
    print("| language | callee linkage | move | accepted | bytes saved | of the language's bytes |")
    print("|---|---|---|---|---|---|")
    for key, b in sorted(saved_bytes.items(), key=lambda kv: (kv[0][0], -kv[1])):
        print(f"| {key[0]} | {key[1]} | {key[2]} | {count[key]} | {b:,} | {100 * b / saved['bytes'][key[0]]:.3f}% |")


def _count(job):
    entry, model, llvm, keep_out = job
    m = entry.load()
    kinds = linkages(entry.bitcode_path, llvm)
    policy = mlopt.load_policy(model)
    h = mlopt.compile(m, log=False, call_sites=True)
    p = mlopt.compile(m, policy=policy, log=False, call_sites=True)
    c = Counter()
    for who, r in (("heuristic", h), ("policy", p)):
        for (_, callee), d in zip(r.call_sites, r.decisions):
            c[(who, kinds.get(callee, "declaration"), int(d))] += 1
    kept = p.text_size
    if keep_out:  # the callees of that linkage the heuristic inlines at no site: declined at every site
        inlined_somewhere = {callee for (_, callee), d in zip(h.call_sites, h.decisions) if d}
        forced = {callee: 0 for _, callee in h.call_sites
                  if kinds.get(callee, "declaration") == keep_out and callee not in inlined_somewhere}
        if forced:
            kept = mlopt.compile(m, policy=policy, log=False, forced_callees=forced).text_size
    return language(entry), h.text_size, p.text_size, kept, c


def inlined(args) -> int:
    llvm = default_llvm()
    jobs = [(e, str(args.model), llvm, args.keep_out) for e in corpus_entries(args.corpus)]
    totals = defaultdict(Counter)
    sizes = defaultdict(lambda: [0, 0, 0])
    with ProcessPoolExecutor(args.workers) as pool:
        for lang, h, p, kept, c in pool.map(_count, jobs, chunksize=4):
            totals[lang].update(c)
            for i, v in enumerate((h, p, kept)):
                sizes[lang][i] += v
    print(f"{args.model} on {args.corpus} ({len(jobs)} modules), LLVM {llvm}")
    print("| language | callee linkage | sites asked (heuristic) | inlined by the heuristic | by the policy | "
          "policy / heuristic |")
    print("|---|---|---|---|---|---|")
    for lang in sorted(totals):
        t = totals[lang]
        for kind in KINDS:
            hi, hn = t[("heuristic", kind, 1)], t[("heuristic", kind, 0)]
            pi = t[("policy", kind, 1)]
            if hi + hn:
                print(f"| {lang} | {kind} | {hi + hn:,} | {hi:,} | {pi:,} | {pi / hi if hi else float('nan'):.3f} |")
        h, p, _ = sizes[lang]
        print(f"| {lang} | (.text) | | {h:,} bytes | {p:,} bytes | {100 * (p - h) / h:+.3f}% |")
    if args.keep_out:
        h, p, kept = (sum(v[i] for v in sizes.values()) for i in range(3))
        parts = ", ".join(f"{lang} {100 * (v[1] - v[0]) / v[0]:+.3f}% -> {100 * (v[2] - v[0]) / v[0]:+.3f}%"
                          for lang, v in sorted(sizes.items()))
        print(f"the policy, with the {args.keep_out} callees the heuristic inlines nowhere in a module declined "
              f"there: {100 * (p - h) / h:+.3f}% -> {100 * (kept - h) / h:+.3f}% ({parts})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: python3 benchmarks/callee_linkage.py inlined best-s0-model "
                                        "splits149/validation")
    sub = ap.add_subparsers(dest="command", required=True)
    mv = sub.add_parser("moves", help="the callee search's accepted moves by callee linkage")
    mv.add_argument("corpus", type=Path)
    mv.add_argument("--init", type=Path, help="the starting policy's weights (.npz)")
    mv.add_argument("--evaluations", type=int, default=16, help="compiles per module (16)")
    mv.add_argument("--sample", metavar="C,CXX", help="search only this many C and C++ modules, drawn at random")
    mv.add_argument("--seed", type=int, default=7, help="the draw's seed (7)")
    mv.add_argument("--workers", type=int)
    mv.add_argument("--out", type=Path, help="run directory (moves.json)")
    mv.add_argument("--report", type=Path, help="re-print a saved moves.json instead of searching")
    mv.set_defaults(run=moves)
    inl = sub.add_parser("inlined", help="a policy's inlined sites against the heuristic's, by callee linkage")
    inl.add_argument("model", type=Path, help="a policy (.tflite, model directory or .so)")
    inl.add_argument("corpus", type=Path)
    inl.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    inl.add_argument("--keep-out", choices=KINDS[:-1], metavar="LINKAGE",
                     help="also compile the policy with the callees of this linkage that the heuristic inlines "
                          "at no site of the module declined at every site (forced_callees)")
    inl.set_defaults(run=inlined)
    args = ap.parse_args()
    if not (args.corpus / "corpus_description.json").is_file():
        print(f"callee_linkage: {args.corpus} is not a corpus (no corpus_description.json)", file=sys.stderr)
        return 2
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

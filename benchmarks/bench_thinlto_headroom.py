"""How much smaller can inlining decisions alone make binaries under ThinLTO?

The oracle of ``bench_lto_headroom.py`` for ThinLTO: the callee search on
each backend module of each shipped binary, every move judged by the exact
``.text`` of the binary lld links with ``--gc-sections --icf=all`` from the
module's object and the heuristic's objects of the binary's other backends
(problem ``inlining-thinlto``). A binary's ``--evaluations`` compiles are
shared among its modules by their share of its code (at least
``--min-per-module`` each, so a binary of many modules gets more). The start
decides as the heuristic. Each binary's result is the link of every module's
best object together (checked: the modules' savings do not simply add when
gc-sections or ICF join them).

Baseline: stock ThinLTO + gc-sections + ICF, the heuristic's objects linked
(without the flags their link is checked against the stock ThinLTO binary's
``.text``, ``benchmarks/results/lto-stock-debian-llvm<N>.json``; what differs,
assembly, goes into the denominator). Only binaries the packages ship count.

    python3 benchmarks/bench_thinlto_headroom.py --corpora /tmp/lto-corpora/thin --evaluations 128 --record
    python3 benchmarks/bench_thinlto_headroom.py --quick --out /tmp/thr    # the example project, 2 compiles
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import write_report  # noqa: E402
from bench_lto_headroom import delta, package_inputs, start_policy  # noqa: E402

PROBLEM = "inlining-thinlto"


def debian_inputs(args) -> tuple[Path, dict[str, str], dict[str, int], dict[str, str]]:
    """The combined ThinLTO corpus of the packages, each shipped binary's modules (module -> binary), the
    binaries' stock ThinLTO .text (without gc/ICF) and language."""
    from mlopt.corpus import corpus_entries
    from mlopt.corpus.lto import lto_module_facts
    from mlopt.corpus.split import package_of

    names, recorded, corpus, languages = package_inputs(args, "thin")
    dirs: dict[str, list] = defaultdict(list)
    for e in corpus_entries(corpus):
        dirs[str(Path(e.name).parent)].append((e.name, lto_module_facts(e.bitcode_path) or {}))
    binary_of, stock_text, language, unmatched = {}, {}, {}, []
    for package in names:
        for binary, text in sorted(recorded[package]["thin"].items()):
            same = [d for d, ms in dirs.items() if package_of(d) == package and ms[0][1].get("binary_text") == text
                    and d not in stock_text]
            if len(same) > 1:
                same = [d for d in same if Path(d).name.removesuffix(".thinlto") == Path(binary).name]
            if len(same) != 1:
                unmatched.append(binary)
                continue
            stock_text[same[0]] = text
            language[same[0]] = "c++" if any(languages.get(m) == "c++" for m, _ in dirs[same[0]]) else "c"
            binary_of |= {m: same[0] for m, _ in dirs[same[0]]}
    if unmatched:
        print(f"shipped binaries without one ThinLTO directory of the same stock .text (left out): "
              f"{', '.join(unmatched)}", file=sys.stderr)
    return corpus, binary_of, stock_text, language


def quick_inputs(args) -> tuple[Path, dict[str, str], dict[str, int], dict[str, str]]:
    """The example project with ThinLTO, the plugin saving its backend modules."""
    from mlopt.compiler.plugin import lld_flags
    from mlopt.corpus import corpus_entries
    from mlopt.corpus.elf import read_sections, text_bytes
    from mlopt.corpus.lto import extract_lto_corpus
    from tests.support.lto import BINARIES, lto_build

    build = lto_build(args.out / "build", "thin", args.llvm)
    plain = build.link(args.out / "saved", *lld_flags(llvm=args.llvm, save_lto_modules=args.out / "modules"))
    corpus = args.out / "corpus"
    extract_lto_corpus(args.out / "modules", corpus, force=True)
    binary_of, stock, language = {}, {}, {}
    for e in corpus_entries(corpus):
        d = str(Path(e.name).parent)
        binary = Path(d).name.removesuffix(".thinlto")
        binary_of[e.name] = d
        stock[d] = text_bytes(read_sections(plain[binary]))
        language[d] = "c++" if BINARIES[binary][3] else "c"
    return corpus, binary_of, stock, language


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, help="per-package ThinLTO corpora (DIR/<package>/), as "
                    "bench_lto_conformance.py --out writes them under thin/")
    ap.add_argument("--packages", help="comma-separated (default: the large corpus's validation packages)")
    ap.add_argument("--stock", type=Path)
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--evaluations", type=int, default=128, help="compiles per binary, shared by its modules (128)")
    ap.add_argument("--min-per-module", type=int, default=2)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record", action="store_true", help="write benchmarks/results/thinlto-headroom-debian-"
                    "llvm<N>.json")
    ap.add_argument("--quick", action="store_true", help="the example project, 2 compiles per binary")
    args = ap.parse_args()
    os.environ["MLOPT_LLVM"] = str(args.llvm)
    from mlopt._native import engine
    from mlopt.compiler import load_policy
    from mlopt.compiler.relink import GC_ICF
    from mlopt.corpus import corpus_entries
    from mlopt.corpus.lto import lto_module_facts
    from mlopt.corpus.split import package_of
    from mlopt.rollouts import trace_corpus
    from mlopt.rollouts.thinlto_binary import ThinLtoBinary, thinlto_binary_text
    from mlopt.training.callee_search import CalleeSearch
    from mlopt.training.local_search import SearchConfig
    from mlopt.training.validation import costs_of
    from mlopt.workers import make_pool

    args.out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.evaluations, args.min_per_module = 2, 1
        corpus, binary_of, stock_text, language = quick_inputs(args)
    else:
        if args.corpora is None:
            ap.error("give --corpora DIR, or --quick")
        args.stock = args.stock or ROOT / "benchmarks" / "results" / f"lto-stock-debian-llvm{args.llvm}.json"
        corpus, binary_of, stock_text, language = debian_inputs(args)
    entries = [e for e in corpus_entries(corpus) if e.name in binary_of]
    by_binary: dict[str, list] = defaultdict(list)
    for e in entries:
        by_binary[binary_of[e.name]].append(e)
    binaries = sorted(by_binary)
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    say(f"{len(binaries)} shipped binaries, {len(entries)} ThinLTO backend modules ({corpus}), LLVM {args.llvm}")
    start = time.perf_counter()
    with make_pool(args.workers, timeout=3600) as pool:
        ds = trace_corpus(corpus, modules=[e.name for e in entries], workers=args.workers, callee_linkage=True,
                          quiet=True)
        per_module = dict(zip([e.name for e in entries],
                              costs_of([(None, e) for e in entries], PROBLEM, pool=pool)))
        bad = [m for m, c in per_module.items() if c is None]
        if bad:
            raise SystemExit(f"{bad[0]}: its heuristic compile failed")
        heuristic = {}
        for b in binaries:
            costs = {per_module[e.name] for e in by_binary[b]}
            if len(costs) != 1:
                raise SystemExit(f"{b}: its modules' heuristic links differ ({sorted(costs)}): not one binary")
            heuristic[b] = costs.pop()
        plain = {b: thinlto_binary_text(ThinLtoBinary(by_binary[b], llvm=args.llvm)) for b in binaries}
        other = {b: int(stock_text[b] - plain[b]) for b in binaries}  # code outside the backends (assembly)
        exact = [b for b in binaries if other[b] == 0]
        say(f"the heuristic's objects linked = the stock ThinLTO binary's .text on {len(exact)} of {len(binaries)}"
            + "".join(f"; {b}: {other[b]:+d} bytes" for b in binaries if other[b]))
        policy = start_policy(ds, args.out, PROBLEM)
        config = SearchConfig(evaluations_per_module=args.evaluations, batch=8, max_decisions=20000,
                              max_flips=args.evaluations)
        search = CalleeSearch(policy, ds, entries, config, work=args.out / "work", pool=pool, baseline=per_module)
        sizes = {e.name: lto_module_facts(e.bitcode_path).get("lld_text", 0) for e in entries}
        for m in search.modules:
            b = binary_of[m.entry.name]
            total = sum(sizes[e.name] for e in by_binary[b]) or 1
            m.budget = max(args.min_per_module, round(args.evaluations * sizes[m.entry.name] / total))
        search.run(on_round=lambda r: say(f"callee round {r['round']}: {r['evaluations']} compiles, "
                                          f"{r['evaluations_per_s']:.2f}/s"))
    forced = {m.entry.name: dict(m.forced) for m in search.modules}
    summed = {b: heuristic[b] - sum(m.saved for m in search.modules if binary_of[m.entry.name] == b)
              for b in binaries}
    searched = load_policy(search.policy_path, PROBLEM)
    best = {b: thinlto_binary_text(ThinLtoBinary(by_binary[b], llvm=args.llvm, lld_flags=GC_ICF, forced=forced),
                                  searched) for b in binaries}
    compiles = {b: sum(m.evaluations for m in search.modules if binary_of[m.entry.name] == b) for b in binaries}
    denominator = {b: heuristic[b] + max(other[b], 0) for b in binaries}
    packages = sorted({package_of(b) for b in binaries})
    groups = {"all": binaries, "c": [b for b in binaries if language[b] == "c"],
              "c++": [b for b in binaries if language[b] == "c++"]}
    row = {**{g: delta(best, heuristic, denominator, bs) for g, bs in groups.items()},
           "summed_modules": delta(summed, heuristic, denominator, binaries),
           "packages": {p: delta(best, heuristic, denominator, [b for b in binaries if package_of(b) == p])
                        for p in packages}}
    version = engine(args.llvm).llvm_version
    print(f"ThinLTO + gc-sections + ICF, LLVM {version}: {len(binaries)} binaries of {len(packages)} packages, "
          f"{len(entries)} backend modules, {int(sum(denominator.values())):,} bytes of .text (C {len(groups['c'])}, "
          f"C++ {len(groups['c++'])} binaries); the heuristic's objects linked are the stock binary on {len(exact)} "
          f"of {len(binaries)}")
    print("| search | compiles per binary (mean) | all | C | C++ | modules' savings summed | packages smaller |")
    print("|---|---|---|---|---|---|---|")
    print(f"| callee | {sum(compiles.values()) / len(binaries):.0f} | **{row['all']:+.3f}%** | {row['c']:+.3f}% | "
          f"{row['c++']:+.3f}% | {row['summed_modules']:+.3f}% | "
          f"{sum(v < 0 for v in row['packages'].values())} of {len(packages)} |")
    rule = "above the rule: train" if row["all"] <= -1.5 else "below the rule: train once for the record, then stop"
    print(f"decision rule at {args.evaluations} compiles per binary: {row['all']:+.3f}% -> {rule}")
    report = {"benchmark": "benchmarks/bench_thinlto_headroom.py", "llvm": args.llvm, "llvm_version": version,
              "command": "python3 benchmarks/bench_thinlto_headroom.py " + " ".join(sys.argv[1:]),
              "problem": "inlining-thinlto: the oracle's headroom (searches on the packages themselves)",
              "corpus": "the example project" if args.quick else "Debian 12: the large corpus's validation packages",
              "metric": "the shipped binaries' .text, their ThinLTO backends' objects linked by lld with "
                        "--gc-sections --icf=all (code outside the backends counted in the denominator)",
              "baseline": "stock ThinLTO + gc-sections + ICF (the heuristic's objects linked)",
              "evaluations_per_binary": args.evaluations, "exact_binaries": [len(exact), len(binaries)],
              "seconds": time.perf_counter() - start,
              "binaries": {b: {"language": language[b], "stock_thin": stock_text[b], "heuristic": heuristic[b],
                               "best": best[b], "summed": summed[b], "other_code": other[b],
                               "modules": len(by_binary[b]), "compiles": compiles[b]} for b in binaries},
              "table": {"callee": row}, "decision": rule}
    record = f"thinlto-headroom-debian-llvm{args.llvm}.json" if args.record else None
    write_report(report, args.out / "headroom.json", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How much smaller can inlining decisions alone make binaries under full LTO?

An oracle, before any training: the searches of ``mlopt train search``
(``callee``: every site of one callee at once; ``flip``: one decision, the
policy deciding the rest) run on each binary's merged full-LTO module, every
move judged by the exact ``.text`` of the binary lld links from it with
``--gc-sections --icf=all`` (problem ``inlining-lto``; the strongest stock
configuration). The start decides as the heuristic (a default prior: a
2-epoch BC policy on the modules' own trace with a fixed vote for the
heuristic's decision, the callee's linkage at zero weight). One search of
``--evaluations`` compiles per binary gives the curve at 16 / 48 / 128
compiles (each binary's best after that many); the combined row takes each
binary's better search.

Baseline: stock full LTO + gc-sections + ICF, the binaries' ``.text``: the
heuristic's compile relinked, checked against the stock build's shipped
binary (``benchmarks/results/lto-stock-debian-llvm<N>.json``): a binary with
code outside the LTO module (assembly) has that code added to its
denominator, and the check names it. Only binaries the packages ship count.
Figures are deltas of the shipped binaries' ``.text`` in percent (negative =
smaller), all / C / C++ and per package. Decision rule (the learning
issue's): under 1.5% below stock at 128 compiles per binary, training under
LTO stops at one run for the record.

    python3 benchmarks/bench_lto_conformance.py --llvm 19 --out /tmp/lto-corpora   # the corpora
    python3 benchmarks/bench_lto_headroom.py --corpora /tmp/lto-corpora/full --evaluations 128 --record
    python3 benchmarks/bench_lto_headroom.py --quick --out /tmp/hr      # the example project, 2 compiles
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _common import LARGE_TEST, LARGE_VALIDATION, write_report  # noqa: E402

CURVE = (16, 48, 128)
SPLITS = {"validation": LARGE_VALIDATION, "test": LARGE_TEST}


def combine_corpora(corpora: list[Path], out: Path, lto: str = "full") -> Path:
    """One corpus in ``out`` of several per-package ``lto`` corpora (links to their modules)."""
    modules, languages = [], {}
    out.mkdir(parents=True, exist_ok=True)
    desc = None
    for corpus in corpora:
        d = json.loads((corpus / "corpus_description.json").read_text())
        desc = desc or {k: v for k, v in d.items() if k != "modules"}
        if d.get("lto") != lto:
            raise SystemExit(f"{corpus}: not a {lto}-LTO corpus (lto: {d.get('lto')})")
        modules += d["modules"]
        manifest = corpus / "corpus_manifest.json"
        if manifest.exists():
            languages |= json.loads(manifest.read_text()).get("module_languages", {})
        for top in {m.split("/")[0] for m in d["modules"]}:
            link = out / top
            if not link.exists():
                link.symlink_to((corpus / top).resolve(), target_is_directory=True)
    (out / "corpus_description.json").write_text(json.dumps({**desc, "modules": sorted(modules)}, indent=2) + "\n")
    (out / "languages.json").write_text(json.dumps(languages, indent=1) + "\n")
    return out


def package_inputs(args, lto: str, split: str = "validation") -> tuple[list[str], dict, Path, dict[str, str]]:
    """The packages (``--packages``, default the ``split``'s), their stock record's binaries, their
    ``lto`` corpora combined under ``--out`` and each module's language; SystemExit naming what is missing."""
    stock = json.loads(args.stock.read_text())
    recorded = {p["package"]: p["binaries"] for p in stock["packages"]}
    names = args.packages.split(",") if args.packages else SPLITS[split]
    missing = [n for n in names if not (args.corpora / n / "corpus_description.json").exists()]
    if missing:
        raise SystemExit(f"no {lto}-LTO corpus of {', '.join(missing)} in {args.corpora}: build them with "
                         f"python3 benchmarks/bench_lto_conformance.py --llvm {args.llvm} --out {args.corpora.parent}")
    unmeasured = [n for n in names if n not in recorded]
    if unmeasured:
        raise SystemExit(f"{args.stock} has no stock sizes of {', '.join(unmeasured)}: run "
                         f"python3 benchmarks/bench_lto_stock.py --llvm {args.llvm} --record --resume")
    corpus = combine_corpora([args.corpora / n for n in names], args.out / "corpus", lto)
    return names, recorded, corpus, json.loads((corpus / "languages.json").read_text())


def debian_inputs(args, split: str = "validation") -> tuple[Path, dict[str, int], dict[str, str]]:
    """The combined corpus of the packages' full-LTO corpora, the stock full+gc+icf .text of each shipped
    binary's module (from the stock record) and each module's language."""
    from mlopt.corpus import corpus_entries
    from mlopt.corpus.lto import lto_module_facts
    from mlopt.corpus.split import package_of

    names, recorded, corpus, languages = package_inputs(args, "full", split)
    modules: dict[str, list] = {}
    for e in corpus_entries(corpus):
        modules.setdefault(package_of(e.name), []).append((e.name, lto_module_facts(e.bitcode_path)))
    stock_text, configs, unmatched = {}, {}, []
    for package in names:
        for binary, text in sorted(recorded[package]["full+gc+icf"].items()):
            # the shipped binary is the build's binary of the same .text under stock full LTO (installs rename)
            full = recorded[package]["full"][binary]
            same = [m for m, f in modules.get(package, []) if f.get("binary_text") == full and m not in stock_text]
            if len(same) > 1:
                same = [m for m in same if Path(modules_output(modules[package], m)).name == Path(binary).name]
            if len(same) == 1:
                stock_text[same[0]] = text
                configs[same[0]] = {c: recorded[package][c][binary] for c in recorded[package]}
            else:
                unmatched.append(binary)
    if unmatched:
        print(f"shipped binaries without one merged module of the same stock .text (left out): "
              f"{', '.join(unmatched)}", file=sys.stderr)
    return corpus, stock_text, {m: languages.get(m, "c") for m in stock_text}, configs


def modules_output(modules: list, name: str) -> str:
    return next(f["output"] for m, f in modules if m == name)


def quick_inputs(args) -> tuple[Path, dict[str, int], dict[str, str]]:
    """The example project built with full LTO (plugin saving its modules), its corpus and its stock
    full+gc+icf binaries' .text."""
    from mlopt.compiler.plugin import lld_flags
    from mlopt.corpus.elf import read_sections, text_bytes
    from mlopt.corpus.lto import extract_lto_corpus
    from tests.support.lto import BINARIES, lto_build

    build = lto_build(args.out / "build", "full", args.llvm)
    stock = build.link(args.out / "stock", "--gc-sections", "--icf=all")
    build.link(args.out / "saved", *lld_flags(llvm=args.llvm, save_lto_modules=args.out / "modules"))
    corpus = args.out / "corpus"
    extract_lto_corpus(args.out / "modules", corpus, force=True)
    from mlopt.corpus import corpus_entries

    stock_text, languages = {}, {}
    for e in corpus_entries(corpus):
        binary = next(b for b in BINARIES if e.name.endswith(f"{b}.lto"))
        stock_text[e.name] = text_bytes(read_sections(stock[binary]))
        languages[e.name] = "c++" if BINARIES[binary][3] else "c"
    return corpus, stock_text, languages, {}


def start_policy(ds, work: Path, problem: str = "inlining-lto"):
    """A policy deciding as the heuristic, for ``problem`` (inlining-lto or inlining-thinlto; see the
    docstring)."""
    from mlopt.problems import get, load_weights
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.training import train_bc

    bc = train_bc(ds, get("inlining"), epochs=2).policy
    path = work / "start.npz"
    with_linkage_input(with_default_prior(bc, 20.0)).save(path, overwrite=True)
    return load_weights(path, problem)


def _never_inline(out: Path) -> Path:
    """A policy that declines every call site (mlopt policy export --constant 0)."""
    from mlopt import InlinePolicy

    path = out / "never-inline"
    if not (path / "model.tflite").exists():
        InlinePolicy.constant(0).export(path)
    return path


def growth_table(names, configs: dict, declined: dict, heuristic: dict, other: dict, groups: dict) -> list[str]:
    """Where full LTO's size comes from, against -Oz + gc-sections + ICF without LTO: stock full LTO +
    gc + ICF, and the same with the link-time inliner declining every site (the pre-link compiles as stock)."""
    keep = [m for m in names if m in configs]
    if not keep:
        return []
    rows = ["| configuration (gc-sections + ICF) | " + " | ".join(groups) + " |", "|---" * (len(groups) + 1) + "|"]
    base = {m: configs[m]["Oz+gc+icf"] for m in keep}
    lines = {"-Oz, no LTO": base, "full LTO (stock)": {m: configs[m]["full+gc+icf"] for m in keep},
             "full LTO, the link-time inliner off": {m: declined[m] + max(other[m], 0) for m in keep},
             "full LTO, the heuristic relinked (check)": {m: heuristic[m] + max(other[m], 0) for m in keep}}
    for label, sizes in lines.items():
        cells = []
        for ms in groups.values():
            ms = [m for m in ms if m in base]
            b = sum(base[m] for m in ms)
            cells.append(f"{sum(base[m] for m in ms):,} bytes" if sizes is base else
                         f"{100.0 * (sum(sizes[m] for m in ms) - b) / b:+.2f}%" if b else "-")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return rows


def callee_linkages(entries, pool) -> dict[str, dict[str, str]]:
    """Per module, each callee's linkage class at the heuristic's call sites (after internalization:
    external = exported from the binary, local = internal, linkonce = inline code of a header)."""
    from mlopt.problems.inlining_linkage import LINKAGE, LINKAGE_CLASSES
    from mlopt.rollouts import RolloutTask, TraceDataset, run_rollouts

    out = {}
    results = run_rollouts([RolloutTask(e, None, problem="inlining-lto", log=True, call_sites=True,
                                        callee_linkage=True, cache=False) for e in entries], pool=pool, quiet=True)
    for e, r in zip(entries, results):
        if not r.ok:
            raise SystemExit(f"{e.name}: {r.describe()}")
        v = r.value
        column = TraceDataset.from_logs([v.module], [v.text_size], [v.log_bytes]).columns[LINKAGE].reshape(-1)
        out[e.name] = {callee: LINKAGE_CLASSES[int(k)] for (_, callee), k in zip(v.call_sites, column) if callee}
    return out


def savings_table(runs: dict, linkage: dict, language: dict, groups: dict) -> list[str]:
    """Where each search's savings are: bytes its accepted moves saved, by the move (every site declined or
    every site inlined) and the callee's linkage class, as a share of all it saved, all / C / C++."""
    rows = ["| search | move | callee linkage | " + " | ".join(groups) + " |", "|---" * (len(groups) + 3) + "|"]
    for search, run in runs.items():
        if search != "callee":
            continue
        saved: dict[tuple, dict[str, float]] = {}
        for m, b in run["modules"].items():
            for f in b["flips"]:
                key = ("declined everywhere" if f["decision"] == 0 else "inlined everywhere",
                       linkage.get(m, {}).get(f["callee"], "not at a first-compile site"))
                for g, ms in groups.items():
                    if m in ms:
                        saved.setdefault(key, {}).setdefault(g, 0.0)
                        saved[key][g] += f["parent_cost"] - f["cost"]
        totals = {g: sum(v.get(g, 0.0) for v in saved.values()) for g in groups}
        for key in sorted(saved, key=lambda k: -saved[k].get("all", 0.0)):
            cells = [f"{100 * saved[key].get(g, 0.0) / totals[g]:.0f}%" if totals[g] else "-" for g in groups]
            rows.append(f"| {search} | {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
        rows.append(f"| {search} | total saved | | " + " | ".join(f"{int(totals[g]):,} bytes" for g in groups) + " |")
    return rows


def snapshot(search, curve: dict[int, dict[str, float]]) -> None:
    """Each binary's best cost so far under every budget it has not passed (the curve)."""
    for m in search.modules:
        for n in curve:
            if m.evaluations <= n:  # (a module whose moves ran out stays at its last count)
                curve[n][m.entry.name] = m.best.cost


def delta(best: dict[str, float], base: dict[str, float], denominator: dict[str, float], keep) -> float:
    keep = list(keep)
    d = sum(denominator[m] for m in keep)
    return 100.0 * sum(best[m] - base[m] for m in keep) / d if d else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, help="per-package full-LTO corpora (DIR/<package>/), as "
                    "bench_lto_conformance.py --out writes them under full/")
    ap.add_argument("--split", choices=sorted(SPLITS), default="validation", help="the large corpus's split whose "
                    "packages to search: validation (the headroom), test (what `mlopt tune` finds on them)")
    ap.add_argument("--packages", help="comma-separated (default: the --split's packages)")
    ap.add_argument("--stock", type=Path, help="the stock record (default benchmarks/results/lto-stock-debian-"
                    "llvm<N>.json)")
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--evaluations", type=int, default=128, help="compiles per binary and search (128)")
    ap.add_argument("--moves", default="callee,flip")
    ap.add_argument("--max-decisions", type=int, default=20000)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--resume", action="store_true", help="keep the searches an earlier run with the same --out "
                    "finished (--out/<moves>.json)")
    ap.add_argument("--record", action="store_true", help="write benchmarks/results/lto-headroom-debian-llvm<N>.json "
                    "(--split test: lto-tune-test-debian-llvm<N>.json)")
    ap.add_argument("--quick", action="store_true", help="the example project built with full LTO, the callee "
                    "search, 2 compiles per binary")
    args = ap.parse_args()
    os.environ["MLOPT_LLVM"] = str(args.llvm)  # before any worker starts
    from mlopt._native import engine

    llvm_version = lambda major: engine(major).llvm_version  # noqa: E731
    from mlopt.corpus import corpus_entries
    from mlopt.rollouts import trace_corpus
    from mlopt.training.callee_search import CalleeSearch
    from mlopt.training.local_search import SearchConfig, TrajectorySearch
    from mlopt.training.validation import costs_of
    from mlopt.workers import make_pool

    args.out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.evaluations, args.moves = 2, "callee"
        corpus, stock_text, language, configs = quick_inputs(args)
    else:
        if args.corpora is None:
            ap.error("give --corpora DIR, or --quick")
        args.stock = args.stock or ROOT / "benchmarks" / "results" / f"lto-stock-debian-llvm{args.llvm}.json"
        corpus, stock_text, language, configs = debian_inputs(args, args.split)
    entries = [e for e in corpus_entries(corpus) if e.name in stock_text]
    names = [e.name for e in entries]
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    say(f"{len(entries)} shipped binaries' merged modules ({corpus}), LLVM {args.llvm}")
    runs, curves = {}, {}
    with make_pool(args.workers, timeout=3600) as pool:
        ds = trace_corpus(corpus, modules=names, workers=args.workers, callee_linkage=True, quiet=True)
        policy = start_policy(ds, args.out)
        heuristic = dict(zip(names, costs_of([(None, e) for e in entries], "inlining-lto", pool=pool)))
        bad = [m for m, c in heuristic.items() if c is None]
        if bad:
            raise SystemExit(f"{bad[0]}: its heuristic compile failed")
        other = {m: int(stock_text[m] - heuristic[m]) for m in names}  # code outside the LTO module (assembly)
        denominator = {m: heuristic[m] + max(other[m], 0) for m in names}
        exact = [m for m in names if other[m] == 0]
        say(f"heuristic relinked = the stock binary's .text on {len(exact)} of {len(names)} binaries" +
            "".join(f"; {m}: {other[m]:+d} bytes outside the module" for m in names if other[m]))
        never = _never_inline(args.out)  # the link-time inliner declining every site
        declined = dict(zip(names, costs_of([(str(never), e) for e in entries], "inlining-lto", pool=pool)))
        classes = {"callee": CalleeSearch, "flip": TrajectorySearch}
        for moves in args.moves.split(","):
            done = args.out / f"{moves}.json"
            if args.resume and done.exists():  # a search an earlier run finished, with the same heuristic costs
                kept = json.loads(done.read_text())
                budget = kept["run"].get("evaluations_per_binary", args.evaluations)
                if kept["heuristic"] != heuristic or budget != args.evaluations:
                    raise SystemExit(f"{done}: another run's search (other modules or budget): remove it")
                runs[moves] = kept["run"]
                curves[moves] = {int(n): c for n, c in kept["curve"].items()}
                say(f"{moves}: kept from {done}")
                continue
            start = time.perf_counter()
            config = SearchConfig(evaluations_per_module=args.evaluations, batch=8,
                                  max_decisions=args.max_decisions, max_flips=args.evaluations)
            search = classes[moves](policy, ds, entries, config, work=args.out / "work", pool=pool,
                                    baseline=heuristic)
            curve = {n: {} for n in CURVE if n <= args.evaluations}

            snapshot(search, curve)

            def on_round(r, search=search, curve=curve, moves=moves):
                snapshot(search, curve)
                say(f"{moves} round {r['round']}: {r['evaluations']} compiles, {r['evaluations_per_s']:.2f}/s, "
                    f"{search.delta_percent():+.3f}% of the LTO modules' binaries")

            rounds = search.run(on_round=on_round)
            curve[args.evaluations] = {m.entry.name: m.best.cost for m in search.modules}
            runs[moves] = {"seconds": time.perf_counter() - start, "evaluations_per_binary": args.evaluations,
                           "evaluations": sum(r["evaluations"] for r in rounds),
                           "modules": {r["module"]: {"best": r["best_cost"], "evaluations": r["evaluations"],
                                                     "flips": r["flips"], "decisions": r["decisions"]}
                                       for r in search.report()}}
            curves[moves] = curve
            (args.out / f"{moves}.json").write_text(json.dumps({"run": runs[moves], "curve": curve,
                                                                "heuristic": heuristic}, indent=1) + "\n")
        linkage = callee_linkages(entries, pool)
    if len(curves) > 1:
        curves["combined"] = {n: {m: min(c[n][m] for c in curves.values() if n in c) for m in names}
                              for n in next(iter(curves.values()))}
    from mlopt.corpus.split import package_of

    packages = sorted({package_of(m) for m in names})
    groups = {"all": names, "c": [m for m in names if language[m] == "c"],
              "c++": [m for m in names if language[m] == "c++"]}
    table = {}
    for search, curve in curves.items():
        for n, best in curve.items():
            table[f"{search} x{n}"] = {
                **{g: delta(best, heuristic, denominator, ms) for g, ms in groups.items()},
                "packages": {p: delta(best, heuristic, denominator, [m for m in names if package_of(m) == p])
                             for p in packages}}
    stock_total = sum(denominator.values())
    print(f"full LTO + gc-sections + ICF, LLVM {llvm_version(args.llvm)}: {len(names)} binaries of "
          f"{len(packages)} packages, {int(stock_total):,} bytes of .text (C {len(groups['c'])}, C++ "
          f"{len(groups['c++'])} binaries); the heuristic relinked is the stock binary on {len(exact)} of "
          f"{len(names)}")
    print("| search | compiles per binary | all | C | C++ | packages smaller | largest package gain |")
    print("|---|---|---|---|---|---|---|")
    for name, row in table.items():
        top = min(row["packages"].items(), key=lambda kv: kv[1])
        print(f"| {name.split(' x')[0]} | {name.split(' x')[1]} | **{row['all']:+.3f}%** | {row['c']:+.3f}% | "
              f"{row['c++']:+.3f}% | {sum(v < 0 for v in row['packages'].values())} of {len(packages)} | "
              f"{top[0]} {top[1]:+.2f}% |")
    growth = growth_table(names, configs, declined, heuristic, other, groups)
    if growth:
        print("\nwhere full LTO's size comes from (the shipped binaries above, .text against -Oz without LTO):")
        print("\n".join(growth))
    where = savings_table(runs, linkage, language, groups)
    print("\nwhere the searches' savings are (bytes their accepted moves saved):")
    print("\n".join(where))
    final = [r for n, r in table.items() if n.endswith(f" x{args.evaluations}")]
    best_all = min(r["all"] for r in final)
    rule = "above the rule: train" if best_all <= -1.5 else "below the rule: train once for the record, then stop"
    if args.split == "validation":  # the rule decides on validation; on the test split it is what tune finds
        print(f"decision rule at {args.evaluations} compiles per binary: {best_all:+.3f}% -> {rule}")
    report = {"benchmark": "benchmarks/bench_lto_headroom.py", "llvm": args.llvm,
              "llvm_version": llvm_version(args.llvm),
              # the canonical command: --resume only keeps finished searches, it changes no figure
              "command": "python3 benchmarks/bench_lto_headroom.py " + " ".join(a for a in sys.argv[1:]
                                                                                if a != "--resume"),
              "problem": "inlining-lto: the oracle's headroom (searches on the packages themselves)",
              "corpus": "the example project" if args.quick else f"Debian 12: the large corpus's {args.split} packages",
              "split": args.split,
              "metric": "the shipped binaries' .text linked by lld with --gc-sections --icf=all (code outside the "
                        "LTO module counted in the denominator)",
              "baseline": "stock full LTO + gc-sections + ICF (the heuristic's compile relinked)",
              "evaluations_per_binary": args.evaluations, "exact_binaries": [len(exact), len(names)],
              "binaries": {m: {"language": language[m], "stock": stock_text[m], "heuristic": heuristic[m],
                               "other_code": other[m], "link_inliner_off": declined[m],
                               "stock_configs": configs.get(m, {})} for m in names},
              "growth": growth, "savings": where,
              "searches": {k: {**v, "modules": {m: {f: x for f, x in b.items() if f != "decisions"}
                                                for m, b in v["modules"].items()}} for k, v in runs.items()},
              "table": table, "decision": rule}
    kind = "headroom" if args.split == "validation" else f"tune-{args.split}"
    record = f"lto-{kind}-debian-llvm{args.llvm}.json" if args.record else None
    write_report(report, args.out / "headroom.json", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

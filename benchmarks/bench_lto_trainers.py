"""The trainers under full LTO, once for the record: policies trained on
whole binaries (problem ``inlining-lto``: a merged module costed by the
exact ``.text`` lld links from it with ``--gc-sections --icf=all``), judged
on the shipped binaries of packages they never saw, against stock full LTO
+ gc-sections + ICF.

Splits are package-disjoint: ``--train`` is a full-LTO corpus of training
packages (``mlopt corpus debian PKGS --lto full``), validation and test are
the large corpus's validation and test packages' per-package corpora
(``--corpora``, as ``bench_lto_conformance.py --out`` writes them; only the
binaries the packages ship, matched to the stock record as
``bench_lto_headroom.py`` does). Nothing is chosen on the test split.

A rule first, from where the headroom's savings are (most of them decline
callees exported from the binary at every site): ``rule-external``, the
heuristic with every site of an external callee declined. Then trainers,
each started from the same BC policy (the training binaries' LTO
inliner logs, 10 epochs; the heuristic's decision and the callee's linkage inputs at
~zero weight):
``bc`` (per seed), ``es`` (per seed; the iterate with the best validation
delta is kept), ``search`` (callee search + imitation, BC-Max: the searched
decisions imitated with each flip weight, the weight chosen on validation;
once). Figures: the test binaries' ``.text`` against the heuristic's
relinked (code outside the LTO module, assembly, in the denominator), all /
C / C++ / per package, the worst package, and the ratio policy / stock.
With ``--thin-corpora`` (the test packages' ThinLTO corpora) every trained
policy is judged under ThinLTO too, against stock ThinLTO + gc-sections +
ICF: each test binary's backend modules compiled by the policy and linked
whole (:mod:`mlopt.rollouts.thinlto_binary`), nothing trained again.

    MLOPT_LLVM=19 mlopt corpus debian bzip2 zopfli libsodium xxhash libb2 libyaml yaml-cpp libjsoncpp tinyxml2 \
        mujs jimtcl c-ares libevent libogg libvorbis opus soundtouch glpk utf8proc uchardet gflags re2 libonig \
        dash less --lto full -o /tmp/lto-train                     # the training packages (none in the large
                                                                   # corpus's validation or test splits)
    python3 benchmarks/bench_lto_trainers.py --train /tmp/lto-train --corpora /tmp/lto-corpora/full \
        --thin-corpora /tmp/lto-corpora/thin --record
    python3 benchmarks/bench_lto_trainers.py --quick --out /tmp/lt   # the example project, one compile per move
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import LARGE_TEST, LARGE_VALIDATION, write_report  # noqa: E402
from bench_lto_headroom import debian_inputs, delta, quick_inputs  # noqa: E402
from bench_thinlto_headroom import debian_inputs as thin_inputs  # noqa: E402
from bench_thinlto_headroom import quick_inputs as thin_quick_inputs  # noqa: E402

PROBLEM = "inlining-lto"


def bc_policy(ds, seed: int, epochs: int, raw: bool = False):
    from mlopt.problems import get
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_input
    from mlopt.training import train_bc

    bc = train_bc(ds, get("inlining"), epochs=epochs, seed=seed).policy
    if raw:
        return bc
    return with_linkage_input(with_default_prior(bc, 1e-3))  # the heuristic's vote and the linkage at ~zero weight


def as_lto(policy, path: Path):
    """The policy for problem inlining-lto (same weights, saved and loaded under that problem)."""
    from mlopt.problems import load_weights

    policy.save(path, overwrite=True)
    return load_weights(path, PROBLEM)


def split(args, packages: list[str], out: Path):
    """(entries, stock .text, language) of the packages' shipped binaries."""
    from mlopt.corpus import corpus_entries

    ns = argparse.Namespace(**{**vars(args), "packages": ",".join(packages), "out": out})
    corpus, stock, language, _ = debian_inputs(ns)
    return [e for e in corpus_entries(corpus, args.exclude) if e.name in stock], stock, language


def thin_split(args) -> tuple[dict[str, list], dict[str, int], dict[str, str]]:
    """The test packages' shipped ThinLTO binaries: each one's backend modules, its stock ThinLTO .text (no
    gc-sections or ICF) and language."""
    from mlopt.corpus import corpus_entries

    ns = argparse.Namespace(**{**vars(args), "corpora": args.thin_corpora, "packages": ",".join(LARGE_TEST),
                               "out": args.out / "thin-test"})
    corpus, binary_of, stock, language = thin_quick_inputs(ns) if args.quick else thin_inputs(ns)
    binaries: dict[str, list] = {}
    for e in corpus_entries(corpus, args.exclude):
        if e.name in binary_of:
            binaries.setdefault(binary_of[e.name], []).append(e)
    return binaries, stock, language


def judge_thin(args, names: list[str], pool, say) -> dict:
    """Each trainer's policy (``--out/policies/<name>``) and the heuristic under ThinLTO on the test binaries:
    their .text linked with gc-sections + ICF (the heuristic's also without, checked against the stock record);
    kept per trainer in ``--out/thin-<name>.json`` (``--resume``)."""
    from mlopt.compiler.relink import GC_ICF
    from mlopt.corpus.split import package_of
    from mlopt.rollouts.thinlto_binary import ThinLtoBinary, thinlto_binary_text

    binaries, stock, language = thin_split(args)
    order = sorted(binaries)
    largest_first = sorted(range(len(order)), key=lambda i: -len(binaries[order[i]]))

    def texts(name: str, policy: str | None, flags) -> dict[str, int]:
        done = args.out / f"thin-{name}.json"
        if args.resume and done.exists():
            kept = json.loads(done.read_text())
            if sorted(kept) == order:
                return kept
        t = time.perf_counter()
        items = [ThinLtoBinary(binaries[b], policy, args.llvm, flags) for b in order]
        results = pool.map(thinlto_binary_text, items, order=largest_first)
        bad = [(b, r) for b, r in zip(order, results) if not r.ok]
        if bad:
            raise SystemExit(f"{bad[0][0]}: ThinLTO with {name} {bad[0][1].describe()}")
        sizes = dict(zip(order, (r.value for r in results)))
        done.write_text(json.dumps(sizes, indent=1) + "\n")
        say(f"ThinLTO {name}: {sum(sizes.values()):,} bytes ({time.perf_counter() - t:.0f} s)")
        return sizes

    plain = texts("heuristic-plain", None, ())
    heuristic = texts("heuristic", None, GC_ICF)
    other = {b: int(stock[b] - plain[b]) for b in order}  # code outside the backends (assembly)
    denominator = {b: heuristic[b] + max(other[b], 0) for b in order}
    packages = sorted({package_of(b) for b in order})
    groups = {"all": order, "c": [b for b in order if language[b] == "c"],
              "c++": [b for b in order if language[b] == "c++"]}
    table = {}
    for name in names:
        policy = args.out / "policies" / name
        if not policy.exists():
            raise SystemExit(f"{policy}: no policy of trainer {name} (run without --resume)")
        sizes = texts(name, str(policy), GC_ICF)
        per = {p: delta(sizes, heuristic, denominator, [b for b in order if package_of(b) == p]) for p in packages}
        table[name] = {**{g: delta(sizes, heuristic, denominator, bs) for g, bs in groups.items()},
                       "ratio": sum(sizes[b] + max(other[b], 0) for b in order) / sum(denominator.values()),
                       "packages": per, "worst_package": max(per.items(), key=lambda kv: kv[1])}
    return {"binaries": len(order), "modules": sum(len(v) for v in binaries.values()),
            "exact_binaries": sum(other[b] == 0 for b in order), "heuristic": heuristic, "other_code": other,
            "languages": {b: language[b] for b in order}, "table": table}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=Path, help="a full-LTO corpus of the training packages")
    ap.add_argument("--corpora", type=Path, help="per-package full-LTO corpora of the validation and test packages")
    ap.add_argument("--thin-corpora", type=Path, help="per-package ThinLTO corpora of the test packages: judge the "
                    "trained policies under ThinLTO too")
    ap.add_argument("--stock", type=Path, help="the stock record (default benchmarks/results/lto-stock-debian-"
                    "llvm<N>.json)")
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--seeds", type=int, default=3, help="seeds of BC and ES (3)")
    ap.add_argument("--es-iterations", type=int, default=6)
    ap.add_argument("--perturbations", type=int, default=6, help="antithetic pairs per ES iteration (6)")
    ap.add_argument("--modules", type=int, default=8, help="training binaries per ES iteration (8)")
    ap.add_argument("--search-evaluations", type=int, default=8, help="compiles per training binary (8)")
    ap.add_argument("--exclude", action="append", default=[], metavar="PKG", help="leave a package out everywhere")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--resume", action="store_true", help="keep the trainers an earlier run with the same --out "
                    "finished (--out/<trainer>.json)")
    ap.add_argument("--record", action="store_true", help="write benchmarks/results/lto-trainers-debian-llvm<N>.json")
    ap.add_argument("--quick", action="store_true", help="the example project as every split, one seed, "
                    "1 ES iteration of 1 pair, 2 search compiles")
    args = ap.parse_args()
    os.environ["MLOPT_LLVM"] = str(args.llvm)  # before any worker starts
    from mlopt._native import engine
    from mlopt.corpus import corpus_entries
    from mlopt.corpus.split import package_of
    from mlopt.problems.inlining_default.prior import with_default_prior
    from mlopt.problems.inlining_linkage.rule import with_linkage_rule
    from mlopt.rollouts import trace_corpus
    from mlopt.training import ESConfig, ESTrainer
    from mlopt.training.callee_search import CalleeSearch
    from mlopt.training.local_search import SearchConfig, search_and_imitate
    from mlopt.training.run_dir import open_run
    from mlopt.training.validation import costs_of
    from mlopt.workers import make_pool

    args.out.mkdir(parents=True, exist_ok=True)
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    if args.quick:
        args.seeds, args.es_iterations, args.perturbations, args.modules, args.search_evaluations = 1, 1, 1, 3, 2
        corpus, stock, language, _ = quick_inputs(args)
        train_corpus = corpus
        val = test = [e for e in corpus_entries(corpus) if e.name in stock]
        epochs = 2
    else:
        if args.train is None or args.corpora is None:
            ap.error("give --train CORPUS and --corpora DIR, or --quick")
        args.stock = args.stock or ROOT / "benchmarks" / "results" / f"lto-stock-debian-llvm{args.llvm}.json"
        val, vstock, vlang = split(args, LARGE_VALIDATION, args.out / "validation")
        test, stock, language = split(args, LARGE_TEST, args.out / "test")
        stock, language = {**vstock, **stock}, {**vlang, **language}
        train_corpus = args.train
        epochs = 10
    train = corpus_entries(train_corpus, args.exclude)
    if args.exclude and any(package_of(e.name) in args.exclude for e in train + val + test):
        raise SystemExit("an excluded package is still in a split")  # corpus_entries drops them
    say(f"{len(train)} training binaries, {len(val)} validation and {len(test)} test shipped binaries, "
        f"LLVM {args.llvm}")
    results = {}
    with make_pool(args.workers, timeout=3600) as pool:
        ds = trace_corpus(train_corpus, modules=[e.name for e in train], workers=args.workers, callee_linkage=True,
                          quiet=True)
        everything = train + ([] if args.quick else val + test)
        heuristic = dict(zip([e.name for e in everything],
                             costs_of([(None, e) for e in everything], PROBLEM, pool=pool)))
        bad = [m for m, c in heuristic.items() if c is None]
        if bad:
            raise SystemExit(f"{bad[0]}: its heuristic compile failed")
        other = {e.name: int(stock[e.name] - heuristic[e.name]) for e in test}  # code outside the module
        denominator = {m: heuristic[m] + max(other[m], 0) for m in other}

        def judge(name: str, policy, seconds: float, compiles: int, extra: dict) -> None:
            path = policy.export(args.out / "policies" / name, overwrite=True)
            costs = dict(zip([e.name for e in test], costs_of([(str(path), e) for e in test], PROBLEM, pool=pool)))
            failed = [m for m, c in costs.items() if c is None]
            if failed:
                raise SystemExit(f"{name}: {failed[0]} did not compile")
            vcosts = costs_of([(str(path), e) for e in val], PROBLEM, pool=pool)
            vbase = sum(heuristic[e.name] for e in val)
            row = {"seconds": seconds, "compiles": compiles, "test": costs,
                   "validation_delta_percent": 100.0 * (sum(vcosts) - vbase) / vbase, **extra}
            (args.out / f"{name}.json").write_text(json.dumps(row, indent=1) + "\n")
            results[name] = row
            say(f"{name}: test {delta(costs, heuristic, denominator, costs):+.3f}%, validation "
                f"{row['validation_delta_percent']:+.3f}% ({seconds:.0f} s, {compiles} compiles)")

        def kept(name: str) -> bool:
            done = args.out / f"{name}.json"
            if args.resume and done.exists():
                results[name] = json.loads(done.read_text())
                say(f"{name}: kept from {done}")
                return True
            return False

        starts = {}
        for seed in range(args.seeds):
            t = time.perf_counter()
            starts[seed] = as_lto(bc_policy(ds, seed, epochs), args.out / f"bc-{seed}.npz")
            if not kept(f"bc-{seed}"):
                judge(f"bc-{seed}", starts[seed], time.perf_counter() - t, 0, {})
        if not kept("rule-external"):  # where the headroom's savings are: callees exported from the binary
            t = time.perf_counter()
            rule = with_linkage_rule(with_default_prior(bc_policy(ds, 0, epochs, raw=True), 20.0), "external",
                                     100.0, everywhere=True)
            judge("rule-external", as_lto(rule, args.out / "rule-external.npz"), time.perf_counter() - t, 0, {})
        for seed in range(args.seeds):
            if kept(f"es-{seed}"):
                continue
            t = time.perf_counter()
            run = args.out / f"es-{seed}"
            shutil.rmtree(run, ignore_errors=True)  # an unfinished run's (this benchmark's own directory)
            open_run(run)
            cfg = ESConfig(iterations=args.es_iterations, perturbations=args.perturbations, sigma=0.02, lr=0.01,
                           modules_per_perturbation=min(args.modules, len(train)), seed=seed)
            trainer = ESTrainer(starts[seed], train, heuristic, run, cfg, validation=val, pool=pool)
            curve = []

            def on_iteration(m: dict, seed=seed, curve=curve) -> None:
                curve.append({"iteration": m["iteration"], "train_percent": -100 * m["reward"],
                              "validation_percent": m["validation_delta_percent"],
                              "evaluations_per_s": m["evaluations_per_s"]})
                say(f"  es-{seed} {m['iteration']}: training {-100 * m['reward']:+.3f}%, validation "
                    f"{m['validation_delta_percent']:+.3f}%, {m['evaluations_per_s']:.2f} compiles/s")

            trainer.run(on_iteration)
            from mlopt.problems import load_weights

            best = run / "best" / "policy.npz"
            chosen = load_weights(best, PROBLEM) if best.exists() else trainer.current_policy()
            compiles = (args.es_iterations * 2 * args.perturbations * cfg.modules_per_perturbation
                        + (args.es_iterations + 1) * len(val))
            judge(f"es-{seed}", chosen, time.perf_counter() - t, compiles, {"curve": curve})
        if not kept("search"):
            t = time.perf_counter()
            run = args.out / "search"
            shutil.rmtree(run, ignore_errors=True)
            open_run(run)

            def validate(p):
                path = p.export(args.out / "work" / f"validate-{time.monotonic_ns()}")
                c = costs_of([(str(path), e) for e in val], PROBLEM, pool=pool)
                base = sum(heuristic[e.name] for e in val)
                return 100.0 * (sum(c) - base) / base if None not in c else None

            quick = {"flip_weights": (1.0,), "epochs": 1} if args.quick else {}
            policy, report = search_and_imitate(
                starts[0], ds, train, run, SearchConfig(evaluations_per_module=args.search_evaluations, batch=8,
                                                        **quick),
                validate=validate, pool=pool, search_class=CalleeSearch, baseline=heuristic,
                say=lambda s: say("  search " + s.strip()))
            compiles = report["evaluations"] + len(train) + len(report["validation"]) * len(val)
            judge("search", policy, time.perf_counter() - t, compiles,
                  {"searched_train_percent": report["searched_delta_percent"], "chosen": report["chosen"]})
        thin = judge_thin(args, list(results), pool, say) if args.thin_corpora or args.quick else None

    names = [e.name for e in test]
    packages = sorted({package_of(m) for m in names})
    groups = {"all": names, "c": [m for m in names if language[m] == "c"],
              "c++": [m for m in names if language[m] == "c++"]}
    table = {}
    for name, row in results.items():
        costs = row["test"]
        per = {p: delta(costs, heuristic, denominator, [m for m in names if package_of(m) == p]) for p in packages}
        table[name] = {**{g: delta(costs, heuristic, denominator, ms) for g, ms in groups.items()},
                       "ratio": sum(costs[m] + max(other[m], 0) for m in names) / sum(denominator.values()),
                       "packages": per, "worst_package": max(per.items(), key=lambda kv: kv[1]),
                       "validation": row["validation_delta_percent"], "seconds": row["seconds"],
                       "compiles": row["compiles"]}
    version = engine(args.llvm).llvm_version
    print(f"trainers under full LTO, LLVM {version}: {len(train)} training binaries; test {len(names)} shipped "
          f"binaries of {len(packages)} packages (C {len(groups['c'])}, C++ {len(groups['c++'])}), "
          f"{int(sum(denominator.values())):,} bytes of .text under stock full LTO + gc-sections + ICF")
    print("| trainer | test all | C | C++ | ratio to stock | worst package | validation | minutes | compiles |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in table.items():
        w = r["worst_package"]
        print(f"| {name} | **{r['all']:+.3f}%** | {r['c']:+.3f}% | {r['c++']:+.3f}% | {r['ratio']:.4f} | "
              f"{w[0]} {w[1]:+.2f}% | {r['validation']:+.3f}% | {r['seconds'] / 60:.1f} | {r['compiles']} |")
    if thin:
        print(f"\nthe same policies under ThinLTO: {thin['binaries']} test binaries, {thin['modules']} backend modules "
              f"(the heuristic's objects linked are the stock binary on {thin['exact_binaries']}), against stock "
              f"ThinLTO + gc-sections + ICF")
        print("| trainer | ThinLTO test all | C | C++ | ratio to stock | worst package |")
        print("|---|---|---|---|---|---|")
        for name, r in thin["table"].items():
            w = r["worst_package"]
            print(f"| {name} | **{r['all']:+.3f}%** | {r['c']:+.3f}% | {r['c++']:+.3f}% | {r['ratio']:.4f} | "
                  f"{w[0]} {w[1]:+.2f}% |")
    report = {"benchmark": "benchmarks/bench_lto_trainers.py", "llvm": args.llvm, "llvm_version": version,
              "command": "python3 benchmarks/bench_lto_trainers.py " + " ".join(a for a in sys.argv[1:]
                                                                                if a != "--resume"),
              "problem": PROBLEM,
              "corpus": "the example project" if args.quick else "Debian 12: trained on the training packages' "
                        "full-LTO binaries, chosen on the large corpus's validation packages, judged on its test "
                        "packages",
              "metric": "the test packages' shipped binaries' .text linked by lld with "
              "--gc-sections --icf=all (code outside the LTO module counted in the denominator)",
              "baseline": "stock full LTO + gc-sections + ICF (the heuristic's compile relinked)",
              "train_binaries": len(train), "validation_binaries": len(val), "test_binaries": len(names),
              "excluded": args.exclude, "languages": {m: language[m] for m in names},
              "heuristic": {m: heuristic[m] for m in names}, "other_code": other,
              "trainers": results, "table": table, "thin": thin}
    record = f"lto-trainers-debian-llvm{args.llvm}.json" if args.record else None
    write_report(report, args.out / "trainers.json", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

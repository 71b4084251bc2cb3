"""How much smaller can a split's modules get by inlining decisions alone?

A bound on what any inlining policy could reach on a corpus: the searches
of ``mlopt train search`` (``--moves callee``: every site of one callee at
once; ``--moves flip``: one decision, the policy deciding the rest) run on
the split's own modules, each move judged by compiling it. Nothing is
trained or chosen here: run on a test split, this is an oracle that knows
every module's outcome, so a policy that never saw the split can only do
worse. The searches start from ``--init``'s own compiles (a policy that
decides as -Oz does, such as ``mlopt policy default-prior``); the
combined row takes each module's better search.

    python3 benchmarks/bench_search_headroom.py splits/test --init prior.npz --evaluations 16,48 --out /tmp/hr
    python3 benchmarks/bench_search_headroom.py --quick --out /tmp/hr

Every figure is a total ``.text`` delta vs -Oz in percent (negative =
smaller), over all the split's modules (those with more than
``--max-decisions`` decisions keep the starting compile).

With ``--problem inlining-linked`` the searches cost moves by the module's
share of its package's linked ``.text`` (grouped code charged 1/k; the
table over the corpus is built into ``--linked-shares FILE`` when it does
not exist): a bound on what a policy can save once the packages link,
where the per-module sum credits COMDAT copies a linker drops anyway. The
searched compiles are then checked by the package-linked estimate itself
(evaluation/linked.py, as ``mlopt eval --linked``): every module compiled
again forced to its best decisions, keeping its object, all / C / C++ and
per package. An ``--init`` without the linkage input (a default prior) is
given it at zero weights.

    python3 benchmarks/bench_search_headroom.py splits/test --init prior.npz --moves callee \
        --problem inlining-linked --linked-shares test-shares.npz --evaluations 16,48,128 --out hr-linked
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.corpus.elf import TextSection  # noqa: E402
from mlopt.corpus.split import package_of  # noqa: E402
from mlopt.evaluation.linked import linked_text  # noqa: E402
from mlopt.problems import load_weights  # noqa: E402
from mlopt.rollouts import RolloutTask, build_linked_shares, run_rollouts, trace_corpus  # noqa: E402
from mlopt.training.callee_search import CalleeSearch  # noqa: E402
from mlopt.training.local_search import SearchConfig, TrajectorySearch  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402


def delta(best: dict[str, int], base: dict[str, int], modules=None) -> float:
    modules = list(base) if modules is None else modules
    return 100.0 * sum(best[m] - base[m] for m in modules) / sum(base[m] for m in modules)


def _init_policy(path: Path, problem: str | None):
    """``path``'s policy for ``problem`` (default its own); one of the linkage problems from a policy
    without the linkage input gets it at zero weights."""
    if problem in ("inlining-linkage", "inlining-linked"):
        from mlopt.problems.inlining_linkage import takes_linkage
        from mlopt.problems.inlining_linkage.rule import with_linkage_input

        policy = load_weights(path)
        if not takes_linkage(policy):
            import tempfile

            with tempfile.TemporaryDirectory() as d:
                with_linkage_input(policy).save(Path(d) / "p.npz")
                return load_weights(Path(d) / "p.npz", problem)
    return load_weights(path, problem)


def _language(entry) -> str:
    from mlopt.corpus.debian import language_of

    return language_of(entry.bitcode_path.with_suffix(".cmd").read_bytes())


def linked_check(entries, decisions: dict[str, str], pool) -> dict:
    """The package-linked estimate (all / C / C++, per package) of every module compiled forced to its
    ``decisions`` against -Oz's, both keeping their objects."""
    tasks = [RolloutTask(e, None, text_sections=True, cache=False) for e in entries] + \
        [RolloutTask(e, None, forced=decisions[e.name], text_sections=True, cache=False) for e in entries]
    results = run_rollouts(tasks, pool=pool, quiet=True)
    bad = [(t.entry.name, r.describe()) for t, r in zip(tasks, results) if not r.ok]
    if bad:
        raise SystemExit(f"linked check: {len(bad)} compiles failed, first {bad[0][0]}: {bad[0][1]}")
    n = len(entries)
    oz = {e.name: [TextSection(*s) for s in r.value.text_sections] for e, r in zip(entries, results[:n])}
    best = {e.name: [TextSection(*s) for s in r.value.text_sections] for e, r in zip(entries, results[n:])}
    for e, r in zip(entries, results[n:]):
        if sum(s.size for s in best[e.name]) != r.value.text_size:
            raise SystemExit(f"{e.name}: its sections do not add up to its .text")
    language = {e.name: _language(e) for e in entries}
    out = {}
    for lang in ("all", "c", "c++"):
        keep = [m for m in oz if lang == "all" or language[m] == lang]
        h = sum(linked_text({m: oz[m] for m in keep}).values())
        b = sum(linked_text({m: best[m] for m in keep}).values())
        hs = sum(s.size for m in keep for s in oz[m])
        bs = sum(s.size for m in keep for s in best[m])
        out[lang] = {"linked": 100.0 * (b - h) / h if h else 0.0, "per_module": 100.0 * (bs - hs) / hs if hs else 0.0}
    h, b = linked_text(oz), linked_text(best)
    out["packages"] = {p: 100.0 * (b.get(p, 0) - h[p]) / h[p] for p in sorted(h) if h[p]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, nargs="?")
    ap.add_argument("--init", type=Path, help="the starting policy's weights (.npz)")
    ap.add_argument("--evaluations", default="16,48", help="compiles per module, one search per value")
    ap.add_argument("--moves", default="callee,flip")
    ap.add_argument("--max-decisions", type=int, default=3000)
    ap.add_argument("--max-flips", type=int, default=10, help="accepted moves per module (BC-Max: 10)")
    ap.add_argument("--problem", help="the search's problem (default: --init's); inlining-linked: the linked share")
    ap.add_argument("--linked-shares", type=Path, metavar="FILE",
                    help="inlining-linked: the corpus's table of -Oz COMDAT code (built here when missing)")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true", help="the demo's reduced test split (lz4, 4 modules) from a "
                    "2-epoch BC policy, the callee search, 2 compiles per module")
    args = ap.parse_args()
    if args.quick:
        from _common import quick_inputs

        splits, _, args.init = quick_inputs(args.out / "inputs")
        args.corpus, args.evaluations, args.moves = splits / "test", "2", "callee"
    elif args.corpus is None or args.init is None:
        ap.error("give CORPUS and --init, or --quick")
    args.out.mkdir(parents=True, exist_ok=True)
    policy = _init_policy(args.init, args.problem)
    linked = policy.problem.objective == "linked_share"
    if linked:
        if args.linked_shares is None:
            raise SystemExit("bench_search_headroom: --problem inlining-linked needs --linked-shares FILE")
        os.environ["MLOPT_LINKED_SHARES"] = str(args.linked_shares.resolve())  # before the workers start
    classes = {"callee": CalleeSearch, "flip": TrajectorySearch}
    runs, checks, costs = {}, {}, None
    with make_pool(args.workers, timeout=600) as pool:
        from mlopt.problems.inlining_linkage import takes_linkage

        ds = trace_corpus(args.corpus, workers=args.workers, callee_linkage=takes_linkage(policy))
        entries = corpus_entries(args.corpus)
        if linked:
            from mlopt.problems.inlining_linked import LinkedShares

            if args.linked_shares.exists():
                LinkedShares.load(args.linked_shares)  # a typed error for a bad table, before the searches
                from mlopt.training.validation import costs_of

                costs = dict(zip((e.name for e in entries),
                                 costs_of([(None, e) for e in entries], policy.problem.name, pool=pool)))
            else:
                shares, costs = build_linked_shares(entries, pool=pool)
                shares.save(args.linked_shares)
        for evals in (int(v) for v in args.evaluations.split(",")):
            for moves in args.moves.split(","):
                start = time.perf_counter()
                config = SearchConfig(evaluations_per_module=evals, batch=8, max_decisions=args.max_decisions,
                                      max_flips=args.max_flips)
                search = classes[moves](policy, ds, entries, config, work=args.out / "work", pool=pool,
                                        baseline=costs)
                rounds = search.run()
                name = f"{moves} x{evals}"
                runs[name] = {
                    "seconds": time.perf_counter() - start, "evaluations": sum(r["evaluations"] for r in rounds),
                    "modules": {r["module"]: {"heuristic": r["heuristic_cost"], "start": r["start_cost"],
                                              "best": r["best_cost"], "heuristic_text": r["heuristic_text"],
                                              "best_text": r["best_text"], "flips": r["flips"]}
                                for r in search.report()}}
                print(f"{moves} x{evals}: {search.delta_percent():+.3f}% ({policy.problem.objective})",
                      file=sys.stderr, flush=True)
                if linked:
                    checks[name] = linked_check(entries, {r["module"]: r["decisions"] for r in search.report()},
                                                pool)
                    c = checks[name]
                    print(f"{name}: package-linked {c['all']['linked']:+.3f}% (C {c['c']['linked']:+.3f}%, "
                          f"C++ {c['c++']['linked']:+.3f}%), per-module sum {c['all']['per_module']:+.3f}%",
                          file=sys.stderr, flush=True)
    base = {m: v["heuristic"] for m, v in next(iter(runs.values()))["modules"].items()}
    start = {m: v["start"] for m, v in next(iter(runs.values()))["modules"].items()}
    rows = {name: {m: v["best"] for m, v in r["modules"].items()} for name, r in runs.items()}
    if len(rows) > 1:
        rows["combined (each module's best)"] = {m: min(r[m] for r in rows.values()) for m in base}
    packages: dict[str, list[str]] = {}
    for m in base:
        packages.setdefault(package_of(m), []).append(m)
    print(f"{args.corpus}: {len(base)} modules, {len(packages)} packages, LLVM {default_llvm()}; objective "
          f"{policy.problem.objective}; the starting policy: {delta(start, base):+.3f}%")
    print("| search | compiles (s) | all | largest package gain | packages smaller |")
    print("|---|---|---|---|---|")
    for name, best in rows.items():
        per = {p: delta(best, base, ms) for p, ms in packages.items()}
        top = min(per.items(), key=lambda kv: kv[1])
        r = runs.get(name)
        cost = f"{r['evaluations']:,} ({r['seconds']:.0f})" if r else "-"
        print(f"| {name} | {cost} | **{delta(best, base):+.3f}%** | {top[0]} {top[1]:+.2f}% | "
              f"{sum(v < 0 for v in per.values())} of {len(per)} |")
    if checks:
        print("| search (linked share) | package-linked all | C | C++ | per-module sum | packages smaller, linked | "
              "largest package growth, linked |")
        print("|---|---|---|---|---|---|---|")
        for name, c in checks.items():
            worst = max(c["packages"].items(), key=lambda kv: kv[1])
            print(f"| {name} | **{c['all']['linked']:+.3f}%** | {c['c']['linked']:+.3f}% | {c['c++']['linked']:+.3f}% "
                  f"| {c['all']['per_module']:+.3f}% | {sum(v < 0 for v in c['packages'].values())} of "
                  f"{len(c['packages'])} | {worst[0]} {worst[1]:+.2f}% |")
        last = checks[next(reversed(checks))]["packages"]
        print("per package, linked (" + next(reversed(checks)) + "): " +
              ", ".join(f"{p} {v:+.2f}%" for p, v in sorted(last.items(), key=lambda kv: kv[1])))
    report = {"llvm": default_llvm(), "corpus": str(args.corpus), "init": str(args.init), "runs": runs,
              "problem": policy.problem.name, "linked_check": checks,
              "delta_percent": {name: delta(best, base) for name, best in rows.items()},
              "packages": {name: {p: delta(best, base, ms) for p, ms in packages.items()}
                           for name, best in rows.items()}}
    (args.out / "headroom.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

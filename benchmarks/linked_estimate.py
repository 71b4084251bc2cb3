"""Policies on a corpus by two measures, and the one-site-linkonce rule:
the sum of the modules' ``.text`` (what the other benchmarks report) and
the package-linked estimate (``mlopt eval --linked``, evaluation/linked.py:
each package's COMDAT code counted once, as a linker keeps it), both
against -Oz compiled in the same run. Every module is compiled once per
policy and once with the heuristic, keeping the objects (no cache).

    python3 benchmarks/linked_estimate.py splits/validation --policy es-s0=best-s0-model \
        --policy es-s1=best-s1-model --package-call-sites sites.npz --out val.json
    python3 benchmarks/linked_estimate.py --from val.json --packages
    python3 benchmarks/linked_estimate.py --quick

With ``--package-call-sites FILE`` (``mlopt corpus call-sites`` over the
corpus's packages) every policy also gets the one-site-linkonce rule's
forced decisions (problems/inlining_linked/call_sites.py), and a row
``-Oz+one-site`` is the heuristic with the rule alone.

Figures: delta vs -Oz in percent, negative = smaller, all / C / C++, and
with ``--packages`` per package. Policies named ``GROUP-sN`` (one per seed
N) also get a row per group: the mean over its seeds, the sample standard
deviation, and the largest package-linked growth of any of its seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
import mlopt  # noqa: E402
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.corpus.debian import language_of  # noqa: E402
from mlopt.corpus.elf import TextSection, text_sections  # noqa: E402
from mlopt.evaluation.linked import linked_text  # noqa: E402
from mlopt.evaluation.report import package_name  # noqa: E402

_POLICIES: dict = {}
_CALL_SITES: list = []  # the one-site-linkonce rule's table, when given


def _init(specs: list[tuple[str, str]], call_sites: str | None = None) -> None:
    _POLICIES["-Oz"] = None
    for name, value in specs:
        _POLICIES[name] = mlopt.load_policy(value)
    if call_sites:
        from mlopt.problems.inlining_linked.call_sites import PackageCallSites

        _CALL_SITES.append(PackageCallSites.load(call_sites))
        _POLICIES[ONE_SITE] = None


ONE_SITE = "-Oz+one-site"


def _job(entry):
    module = entry.load()
    out = {}
    forced = _CALL_SITES[0].decisions(entry.name) if _CALL_SITES else {}
    for name, policy in _POLICIES.items():
        r = mlopt.compile(module, policy, log=False, keep_object=True,
                          forced_callees=forced if name != "-Oz" else None)
        out[name] = [tuple(s) for s in text_sections(r.object, entry.name)]
    return entry.name, language_of(Path(str(entry.bitcode_path)[:-3] + ".cmd").read_bytes()), out


def _delta(a: int, b: int) -> float:
    return 100.0 * (b - a) / a if a else 0.0


def seed_groups(names: list[str]) -> dict[str, list[str]]:
    """Policies named GROUP-sN grouped by GROUP, kept only where a group has two or more seeds."""
    groups: dict[str, list[str]] = {}
    for name in names:
        m = re.fullmatch(r"(.+)-s(\d+)", name)
        if m:
            groups.setdefault(m.group(1), []).append(name)
    return {g: members for g, members in groups.items() if len(members) >= 2}


def _spread(values: list[float]) -> str:
    return f"{statistics.fmean(values):+.3f} ± {statistics.stdev(values):.3f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: python3 benchmarks/linked_estimate.py splits/test "
                                        "--policy es=best-model --package-call-sites sites.npz")
    ap.add_argument("corpus", type=Path, nargs="?", help="the corpus to compile (not with --from)")
    ap.add_argument("--policy", action="append", default=[], metavar="NAME=PATH", help="a policy (model, .so)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--packages", action="store_true", help="also per package")
    ap.add_argument("--package-call-sites", type=Path, metavar="FILE",
                    help="apply the one-site-linkonce rule of this table to every policy and rule")
    ap.add_argument("--out", type=Path, help="write the figures and every module's code sections here (JSON)")
    ap.add_argument("--from", dest="source", type=Path, metavar="JSON",
                    help="report from an earlier --out file instead of compiling")
    ap.add_argument("--quick", action="store_true", help="the demo's reduced validation split (ujson, C++) and "
                    "the one-site-linkonce rule (its table built here)")
    args = ap.parse_args()
    if args.quick:
        import tempfile

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _common import quick_splits
        from mlopt.rollouts import build_package_call_sites
        from mlopt.workers import make_pool

        work = Path(tempfile.mkdtemp(prefix="mlopt-linked-estimate-"))
        args.corpus = quick_splits(work) / "validation"
        args.packages, args.package_call_sites = True, work / "sites.npz"
        with make_pool(args.workers) as pool:
            build_package_call_sites(corpus_entries(args.corpus), pool=pool, quiet=True).save(args.package_call_sites)
    if (args.corpus is None) == (args.source is None) or (args.source and args.policy):
        print("linked_estimate: give a corpus (with --policy) or --from JSON alone", file=sys.stderr)
        return 2
    if args.source:
        try:
            saved = json.loads(args.source.read_text())
            rows = {m: (v["language"], {k: [TextSection(*x) for x in secs] for k, secs in v["sections"].items()})
                    for m, v in saved["modules"].items()}
            names = ["-Oz", *(n for n in next(iter(saved["modules"].values()))["sections"] if n != "-Oz")]
        except (OSError, ValueError, KeyError, TypeError, StopIteration) as e:
            print(f"linked_estimate: {args.source}: not a linked_estimate --out file ({e!r})", file=sys.stderr)
            return 2
        return report(saved["llvm"], saved["corpus"], rows, names, args.packages, None)
    specs = []
    for item in args.policy:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            print(f"linked_estimate: --policy {item!r}: expected NAME=VALUE", file=sys.stderr)
            return 2
        specs.append((name, value))
    entries = corpus_entries(args.corpus)
    start = time.perf_counter()
    rows = {}
    call_sites = str(args.package_call_sites) if args.package_call_sites else None
    if call_sites:
        from mlopt.problems.inlining_linked.call_sites import PackageCallSites

        PackageCallSites.load(call_sites)  # a typed error before the workers start
    with ProcessPoolExecutor(args.workers, initializer=_init, initargs=(specs, call_sites)) as pool:
        for i, (name, lang, sections) in enumerate(pool.map(_job, entries, chunksize=4), 1):
            rows[name] = (lang, {k: [TextSection(*s) for s in v] for k, v in sections.items()})
            if i % 200 == 0 or i == len(entries):
                print(f"  {i}/{len(entries)} modules, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    names = ["-Oz", *(n for n, _ in specs), *([ONE_SITE] if call_sites else [])]
    return report(default_llvm(), str(args.corpus), rows, names, args.packages, args.out)


def report(llvm: int, corpus: str, rows: dict, names: list[str], per_package: bool, out: Path | None) -> int:
    """Print the tables for ``rows`` (module -> (language, {policy: sections})); ``names[0]`` is -Oz."""
    figures = {}
    print(f"LLVM {llvm}, {corpus}: .text vs -Oz, negative = smaller; per-module sum / package-linked")
    print("| policy | all | C | C++ |")
    print("|---|---|---|---|")
    for name in names[1:]:
        cells, figures[name] = [], {}
        for lang in ("all", "c", "c++"):
            keep = {m: s for m, (lg, s) in rows.items() if lang == "all" or lg == lang}
            h = sum(sum(x.size for x in s["-Oz"]) for s in keep.values())
            p = sum(sum(x.size for x in s[name]) for s in keep.values())
            lh = sum(linked_text({m: s["-Oz"] for m, s in keep.items()}).values())
            lp = sum(linked_text({m: s[name] for m, s in keep.items()}).values())
            figures[name][lang] = {"per_module": _delta(h, p), "linked": _delta(lh, lp)}
            cells.append(f"{_delta(h, p):+.3f}% / {_delta(lh, lp):+.3f}%")
        print(f"| {name} | " + " | ".join(cells) + " |")
    packages = sorted({package_name(m) for m in rows})
    # per policy and package: the modules' .text sum and the package-linked size, computed once
    per_module = {n: dict.fromkeys(packages, 0) for n in names}
    for m, (_, s) in rows.items():
        for n in names:
            per_module[n][package_name(m)] += sum(x.size for x in s[n])
    linked = {n: linked_text({m: s[n] for m, (_, s) in rows.items()}) for n in names}
    worst = {n: max((_delta(linked["-Oz"].get(pkg, 0), linked[n].get(pkg, 0)), pkg) for pkg in packages)
             for n in names[1:]}
    groups = seed_groups(names[1:])
    if groups:
        print("| policy group (mean ± sd over seeds) | seeds | all, per module | all, linked | C, linked | C++, linked "
              "| worst package, linked (any seed) |")
        print("|---|---|---|---|---|---|---|")
        for group, members in groups.items():
            f = figures
            w = max(worst[n] for n in members)
            print(f"| {group} | {len(members)} | {_spread([f[n]['all']['per_module'] for n in members])} "
                  f"| {_spread([f[n]['all']['linked'] for n in members])} "
                  f"| {_spread([f[n]['c']['linked'] for n in members])} "
                  f"| {_spread([f[n]['c++']['linked'] for n in members])} | {w[1]} {w[0]:+.2f}% |")
            figures[group] = {"seeds": members, "worst_linked_package": {"package": w[1], "delta": w[0]},
                              **{lang: {k: {"mean": statistics.fmean(f[n][lang][k] for n in members),
                                            "sd": statistics.stdev([f[n][lang][k] for n in members])}
                                        for k in ("per_module", "linked")} for lang in ("all", "c", "c++")}}
    if per_package:
        print("| package | " + " | ".join(names[1:]) + " |")
        print("|---|" + "---|" * (len(names) - 1))
        for pkg in packages:
            h, lh = per_module["-Oz"][pkg], linked["-Oz"].get(pkg, 0)
            cells = [f"{_delta(h, per_module[n][pkg]):+.2f} / {_delta(lh, linked[n].get(pkg, 0)):+.2f}"
                     for n in names[1:]]
            print(f"| {pkg} | " + " | ".join(cells) + " |")
    if out:
        out.write_text(json.dumps({"llvm": llvm, "corpus": corpus, "figures": figures,
                                   "modules": {m: {"language": lg, "sections": s} for m, (lg, s) in rows.items()}})
                       + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

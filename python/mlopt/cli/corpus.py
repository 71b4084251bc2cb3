"""``mlopt corpus extract|make|fetch|split``: corpora in the layout of LLVM's
mlgo-utils, from a build, from raw bitcode, or the default corpus."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..errors import OutputExistsError
from ._common import (
    UsageError,
    add_command,
    add_exclude_option,
    existing_file,
    existing_path,
    positive_float,
    positive_int,
)


def _progress(quiet: bool):
    from ..workers import Progress

    bars: dict[str, Progress] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = Progress(total, stage, quiet=quiet, unit="file")
        bars[stage].update()
        if done == total:
            bars[stage].close()

    return update


def _report(report, args, what: str) -> int:
    summary = report.to_json()
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{what} {summary['extracted']} modules of {summary['objects']} objects into {report.output}")
    if report.skipped:
        print(f"skipped {len(report.skipped)} (reasons in {report.output / 'extract_report.json'}):", file=sys.stderr)
        for s in report.skipped[:10]:
            print(f"  {s['object']}: {s['reason']}", file=sys.stderr)
        if len(report.skipped) > 10:
            print(f"  ... and {len(report.skipped) - 10} more", file=sys.stderr)
    return 0


def cmd_extract(args) -> int:
    from ..corpus import extract_corpus, objects_from_compile_commands, objects_from_list, objects_in_directory

    src = args.input
    if args.lto is not None:
        return _extract_lto(args)
    if args.cmake:
        from ..corpus.cmake import objects_by_binary, read_build

        build = read_build(os.path.dirname(src) if src.endswith(".json") else src)
        objects = objects_by_binary(build)
        for missing in build.unmapped:
            print(f"mlopt: warning: {missing} (left out)", file=sys.stderr)
        shared = {t: b for t, b in build.binaries_of().items() if len(b) > 1}
        if shared and not args.json:
            print("objects in several binaries, one module in each: "
                  + "; ".join(f"{t} -> {', '.join(b)}" for t, b in sorted(shared.items())), file=sys.stderr)
    elif args.input_type == "json" or (args.input_type is None and src.endswith(".json")):
        objects = objects_from_compile_commands(src)
    elif args.input_type == "directory" or (args.input_type is None and os.path.isdir(src)):
        objects = objects_in_directory(src)
    elif args.input_type == "list" or args.input_type is None:
        with open(src, "rb") as f:
            lines = [os.fsdecode(line.strip()) for line in f.read().splitlines() if line.strip()]
        objects = objects_from_list(lines, args.obj_base_dir)
    else:
        raise UsageError(f"unknown input type {args.input_type!r}")
    if not objects:
        raise UsageError(f"{src}: no objects found")
    progress = _progress(args.quiet)
    report = extract_corpus(objects, args.output, cmd_filter=args.cmd_filter, threads=args.threads,
                            force=args.force, on_progress=lambda done, total: progress("extract", done, total))
    return _report(report, args, "extracted")


def _extract_lto(args) -> int:
    from ..corpus.lto import extract_lto_corpus

    if args.cmake or args.input_type or args.cmd_filter:
        raise UsageError("--lto reads what the links left in a build directory: no --cmake, --input-type or "
                         "--cmd-filter")
    report = extract_lto_corpus(args.input, args.output, lto=None if args.lto == "auto" else args.lto,
                                force=args.force)
    if args.json:
        print(json.dumps({"output": args.output, "lto": report.lto, "source": report.source,
                          "modules": len(report.modules), "skipped": report.skipped}, indent=2))
        return 0
    kind = "full-LTO" if report.lto == "full" else "ThinLTO"
    print(f"extracted {len(report.modules)} {kind} modules ({report.source}) into {args.output}")
    for s in report.skipped[:10]:
        print(f"  skipped {s['path']}: {s['reason']}", file=sys.stderr)
    return 0


def cmd_make(args) -> int:
    import shlex

    from ..corpus import make_corpus

    command = shlex.split(args.command) if args.command else []
    names = make_corpus(args.input, args.output, command, force=args.force)
    if args.json:
        print(json.dumps({"output": args.output, "modules": len(names)}))
    else:
        print(f"made a corpus of {len(names)} modules in {args.output}")
    return 0


def cmd_fetch(args) -> int:
    from ..corpus import fetch_corpus

    packages = [p.strip() for p in args.packages.split(",")] if args.packages else None
    report = fetch_corpus(args.output, packages, threads=args.threads, force=args.force, exclude=args.exclude,
                          on_progress=_progress(args.quiet))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.output)
    return 0


def _package_lines(quiet: bool):
    """One line per finished package with an ETA (on stderr; works in logs too)."""
    import time

    start = time.monotonic()
    built = {"n": 0}

    def update(event: str, package: str, done: int, total: int) -> None:
        if quiet or event == "fetch":
            return
        if event != "cached":
            built["n"] += 1
        elapsed = time.monotonic() - start
        left = total - done
        eta = f", ETA {elapsed / built['n'] * left / 60:.0f} min" if built["n"] and left else ""
        print(f"[{done}/{total}] {event} {package} ({elapsed / 60:.1f} min{eta})", file=sys.stderr, flush=True)

    return update


def cmd_debian(args) -> int:
    from ..corpus.debian import DebianConfig, debian_corpus, parse_package_args, read_package_list
    from ..corpus.manifest import manifest_table, summary

    if args.large and args.packages:
        raise UsageError("give packages or --large, not both")
    if args.large or args.list:
        specs = read_package_list(args.list) if args.list else read_package_list()
    elif args.packages:
        specs = parse_package_args(args.packages)
    else:
        raise UsageError("name Debian source packages (e.g. libyaml zlib), or --large for the default large corpus")
    exclude = list(args.exclude)
    say = (lambda m: print(m, file=sys.stderr)) if not args.quiet else None
    from .._native import default_llvm

    llvm = int(args.llvm or default_llvm())
    config = DebianConfig(llvm=llvm, jobs=args.jobs, timeout=args.timeout, retry_failed=args.retry_failed)
    if args.lto is not None:
        if args.stock:
            raise UsageError("--stock builds every stock configuration: no --lto")
        config = DebianConfig(llvm=llvm, jobs=args.jobs, timeout=args.timeout, retry_failed=args.retry_failed,
                              lto=args.lto, save_lto_modules=not args.policy)
    if args.policy and not args.stock:
        return _compare_policy(args, specs, exclude, config, say)
    if args.stock:
        return _compare_stock(args, specs, exclude, config, say)
    manifest = debian_corpus(specs, args.output, config, exclude=exclude, force=args.force,
                             on_progress=_package_lines(args.quiet), say=say)
    s = summary(manifest)
    if args.json:
        print(json.dumps({"output": args.output, **s}, indent=2))
    else:
        print(manifest_table(manifest))
        print(f"corpus: {args.output}")
    if s["failed"] and not args.quiet:
        print(f"{len(s['failed'])} of {s['packages']} packages failed and were skipped (reasons above, logs in "
              "their cache directories)", file=sys.stderr)
    return 0 if s["built"] else 1


def _compare_stock(args, specs, exclude, config, say) -> int:
    """``--stock``: each package built in every stock configuration, linked by
    lld; the .text of what it ships per configuration, the best per package."""
    from pathlib import Path

    from ..evaluation.stock_lto import compare_stock, stock_table

    chosen = [s for s in specs if s.name not in set(exclude)]
    policy = os.path.abspath(args.policy) if args.policy else None
    report = compare_stock(chosen, config, policy=policy, on_progress=_package_lines(args.quiet), say=say)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stock_report.json").write_text(json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(stock_table(report))
        for f in report["failed"]:
            print(f"{f['package']}: failed in {f['config']} at {f['stage']}: {f['reason'].splitlines()[0]}")
        print(f"report: {out / 'stock_report.json'}")
    return 0 if report["packages"] else 1


def _compare_policy(args, specs, exclude, config, say) -> int:
    """``--policy``: each package built twice by its own build, with the
    heuristic and with the policy; the .text of its objects and of the ELF
    files it ships, side by side. With ``--lto MODE``: the stock LTO build
    (lld) against the policy in the pre-link compiles and in lld's LTO
    backends (what ``mlopt clang-flags --lto MODE --model P`` gives)."""
    import os

    from ..corpus.debian import build_packages
    from ..evaluation.stock_lto import with_policy

    policy = os.path.abspath(args.policy)
    chosen = [s for s in specs if s.name not in set(exclude)]
    progress = _package_lines(args.quiet)
    base = build_packages(chosen, config, on_progress=progress, say=say)
    mine = build_packages(chosen, with_policy(config, policy), on_progress=progress, say=say)
    rows = []
    for b, m in zip(base, mine):
        row = {"package": b.name, "version": b.version}
        if b.status != "built" or m.status != "built":
            bad = b if b.status != "built" else m
            row.update(status="failed", stage=bad.stage, reason=bad.reason,
                       build="heuristic" if bad is b else "policy")
        else:
            objs = (sum(b.module_text.values()), sum(m.module_text.values()))
            shipped = (sum(b.shipped.values()), sum(m.shipped.values()))
            row.update(status="built", objects_text=objs, shipped_text=shipped,
                       objects_delta_percent=100 * (objs[1] - objs[0]) / objs[0] if objs[0] else 0.0,
                       shipped_delta_percent=100 * (shipped[1] - shipped[0]) / shipped[0] if shipped[0] else 0.0)
        rows.append(row)
    ok = [r for r in rows if r["status"] == "built"]
    total = {k: [sum(r[k][i] for r in ok) for i in (0, 1)] for k in ("objects_text", "shipped_text")}
    summary = {"policy": policy, "llvm": config.llvm, "lto": config.lto, "packages": rows, "total": {
        k: {"heuristic": v[0], "policy": v[1], "delta_percent": 100 * (v[1] - v[0]) / v[0] if v[0] else 0.0}
        for k, v in total.items()}}
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "linked_report.json"
    if report.exists() and not args.force:
        raise OutputExistsError(str(report))
    report.write_text(json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0 if ok else 1
    print(f"{'package':24} {'objects .text':>28} {'shipped ELF .text':>28}   (LLVM {config.llvm}; delta: - = smaller)")
    for r in rows:
        if r["status"] != "built":
            print(f"{r['package']:24} failed ({r['build']} build, {r['stage']}): {r['reason'].splitlines()[0]}")
            continue
        (ob, op), (sb, sp) = r["objects_text"], r["shipped_text"]
        print(f"{r['package']:24} {ob:>10} {op:>10} {r['objects_delta_percent']:+6.2f}%"
              f" {sb:>10} {sp:>10} {r['shipped_delta_percent']:+6.2f}%")
    t = summary["total"]
    print(f"{'all':24} {t['objects_text']['heuristic']:>10} {t['objects_text']['policy']:>10} "
          f"{t['objects_text']['delta_percent']:+6.2f}% {t['shipped_text']['heuristic']:>10} "
          f"{t['shipped_text']['policy']:>10} {t['shipped_text']['delta_percent']:+6.2f}%")
    print(f"report: {report}")
    return 0 if ok else 1


def _fractions(text: str) -> dict[str, float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--fractions {text!r}: expected numbers such as 0.7,0.15,0.15") from None
    if any(not 0 < v < 1 for v in values) or abs(sum(values) - 1) > 1e-6:
        raise UsageError(f"--fractions {text!r}: each share between 0 and 1, adding up to 1")
    if len(values) == 3:
        return dict(zip(("train", "validation", "test"), values))
    if len(values) == 2:
        return dict(zip(("train", "test"), values))
    raise UsageError(f"--fractions {text!r}: expected train,validation,test or train,test fractions")


def _assignments(text: str | None) -> dict[str, str]:
    out = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise UsageError(f"--assign {item!r}: expected PACKAGE=SIDE")
        pkg, side = item.split("=", 1)
        out[pkg.strip()] = side.strip()
    return out


def cmd_split(args) -> int:
    from ..corpus import split_corpus

    sides = split_corpus(args.corpus, args.output, _fractions(args.fractions), by=args.by, seed=args.seed,
                         assign=_assignments(args.assign), force=args.force)
    summary = {side: len(names) for side, names in sides.items()}
    if args.json:
        print(json.dumps({"output": args.output, **summary}))
    else:
        print(", ".join(f"{args.output}/{side}: {n} modules" for side, n in summary.items()))
    return 0


def cmd_stats(args) -> int:
    from ..corpus import read_description, read_manifest
    from ..corpus.manifest import manifest_table, summary

    read_description(args.corpus)
    manifest = read_manifest(args.corpus)
    if manifest is None:
        raise UsageError(f"{args.corpus}: no corpus_manifest.json (corpora from 'mlopt corpus fetch|debian' have one)")
    if args.json:
        print(json.dumps({**summary(manifest), "per_package": manifest["packages"]}, indent=2))
    else:
        print(manifest_table(manifest))
    return 0


def cmd_call_sites(args) -> int:
    from ..corpus import corpus_entries
    from ..corpus.split import package_of
    from ..rollouts import build_package_call_sites

    out = Path(args.output)
    if out.exists() and not args.force:
        raise OutputExistsError(str(out))
    entries = [e for c in args.corpus for e in corpus_entries(c)]
    if not entries:
        raise UsageError(f"{', '.join(args.corpus)}: no modules")
    table = build_package_call_sites(entries, workers=args.workers, quiet=args.quiet, skip_failed=True)
    table.save(out)
    per_package = {p: len(table.package_decisions(p)) for p in table.packages}
    files = {}
    if args.callee_decisions:
        d = Path(args.callee_decisions)
        d.mkdir(parents=True, exist_ok=True)
        for p in table.packages:
            table.write_callee_decisions(p, d / f"{p}.txt")
            files[p] = str(d / f"{p}.txt")
    summary = {"table": str(out), "modules": len({package_of(e.name) + e.name for e in entries}),
               "packages": len(per_package), "one_site_callees": per_package, "callee_decisions": files}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{out}: {summary['modules']} modules of {len(per_package)} packages; the one-site-linkonce rule "
              f"inlines {sum(per_package.values())} callees"
              + (f"; callee decisions in {args.callee_decisions}/<package>.txt" if files else ""))
    return 0


def register(sub) -> None:
    corpus = sub.add_parser("corpus", help="make corpora (mlgo-utils layout): extract, make, fetch, split",
                            description="Corpora in the layout of LLVM's mlgo-utils (extract_ir).")
    csub = corpus.add_subparsers(dest="corpus_command", metavar="COMMAND", required=True)

    ex = add_command(csub, "extract", "extract a corpus from a build made with -Xclang -fembed-bitcode=all",
                     ["mlopt corpus extract build/compile_commands.json corpus/",
                      "mlopt corpus extract build/ corpus/ --cmd-filter '^-Oz$'",
                      "mlopt corpus extract objects.txt corpus/ --obj-base-dir build/",
                      "mlopt corpus extract build/ corpus/ --cmake   # modules <binary>/<source>: one package per "
                      "binary",
                      "mlopt corpus extract lto-modules/ corpus/ --lto   # what -mlopt-save-lto-modules saved",
                      "mlopt corpus extract build/ corpus/ --lto thin   # lld --save-temps=import "
                      "--thinlto-emit-index-files, as extract_ir --thinlto_build=local"])
    ex.add_argument("input", help="compile_commands.json, a directory of objects, or a file listing objects")
    ex.add_argument("output", help="corpus directory to write")
    ex.add_argument("--input-type", choices=["json", "directory", "list"], help="default: from the input")
    ex.add_argument("--obj-base-dir", metavar="DIR", help="base of relative paths in a list (default: cwd)")
    ex.add_argument("--cmd-filter", metavar="REGEX", help="keep modules with an argument matching REGEX")
    ex.add_argument("--lto", nargs="?", const="auto", choices=["auto", "full", "thin"],
                    help="INPUT is a build directory of LTO links: the modules lld's backends optimize (saved by "
                         "the plugin's -mlopt-save-lto-modules, or lld's --save-temps); MODE when it has both")
    ex.add_argument("--cmake", action="store_true",
                    help="INPUT is a CMake build directory: name modules <binary>/<source path> by the binary "
                         "each object links into (CMake's File API: write BUILD/.cmake/api/v1/query/codemodel-v2 "
                         "before configuring, and configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)")

    mk = add_command(csub, "make", "make a corpus from a directory of .bc files",
                     ["mlopt corpus make bitcode/ corpus/ --command=-Oz"])
    mk.add_argument("input", help="directory of .bc files")
    mk.add_argument("output", help="corpus directory to write")
    mk.add_argument("--command", metavar="ARGS", default="",
                    help="command line shared by all modules (default: none, clang-19 -Oz -c defaults)")

    fe = add_command(csub, "fetch", "build the default corpus: pinned C and C++ PyPI sdists, clang-19 -Oz",
                     ["mlopt corpus fetch", "mlopt corpus fetch --packages lz4,jsonnet -o small/"])
    fe.add_argument("-o", "--output", metavar="DIR", help="corpus directory (default: in the user cache)")
    fe.add_argument("--packages", metavar="A,B", help="only these packages (see docs/guide/corpora.md)")
    add_exclude_option(fe)

    db = add_command(csub, "debian", "build Debian source packages with clang -Oz and extract them into a corpus",
                     ["mlopt corpus debian libyaml zlib -o corpus/",
                      "mlopt corpus debian --large -o large/ --jobs 2 --exclude sqlite3,lua5.4",
                      "mlopt corpus debian libyaml=0.2.5-1 -o corpus/ --json",
                      "mlopt corpus debian lz4 zstd --policy policy.so -o linked/",
                      "mlopt corpus debian lz4 --lto thin --policy policy.so -o linked/   # against stock ThinLTO",
                      "mlopt corpus debian lz4 snappy --stock -o stock/   # -Oz, gc+ICF, ThinLTO, full LTO, "
                      "full LTO+gc+ICF"],
                     description="Each package is fetched with apt-get source (verified by apt's signed indices; "
                                 "deb-src entries are derived from the system's apt sources and added when missing), "
                                 "its build dependencies are installed with apt-get build-dep (root), and it is built "
                                 "by dpkg-buildpackage with clang, -Oz and embedded bitcode, tests and docs off. "
                                 "Results are cached per package, version and flags: a second run rebuilds nothing, "
                                 "an interrupted run resumes. A package that fails is reported and skipped.")
    db.add_argument("packages", nargs="*", metavar="PKG[=VERSION]", help="Debian source packages")
    db.add_argument("-o", "--output", required=True, metavar="DIR",
                    help="corpus directory to write (with --policy: where linked_report.json goes)")
    db.add_argument("--policy", type=existing_path, metavar="POLICY",
                    help="build each package with this policy (.so, .tflite or model dir) and with the heuristic: "
                         "the .text of its objects and of the executables and libraries it ships, side by side")
    db.add_argument("--lto", choices=("full", "thin"),
                    help="an LTO corpus: each package built with -Oz -flto=MODE and linked by lld with the plugin "
                         "saving every module LTO optimizes: one merged module per binary (full), one post-import "
                         "module per backend (thin), each with the .text of the object lld made of it")
    db.add_argument("--stock", action="store_true",
                    help="build each package in the stock configurations a size-minded user would pick (-Oz; -Oz "
                         "with gc-sections + ICF; ThinLTO; full LTO; full LTO with gc-sections + ICF; all linked by "
                         "lld) and compare the .text of what it ships (stock_report.json in -o); with --policy, also "
                         "each LTO configuration with the policy in the compiles and lld's backends")
    db.add_argument("--large", action="store_true",
                    help="the default large corpus (mlopt/corpus/debian_packages.txt: pinned versions, domains)")
    db.add_argument("--list", type=existing_file, metavar="FILE", help="a package list: 'pkg[=version]  # domain: why'")
    add_exclude_option(db)
    db.add_argument("--jobs", type=positive_int, default=1, metavar="N", help="packages built at once (1)")
    db.add_argument("--timeout", type=positive_float, default=1800.0, metavar="S", help="seconds per package (1800)")
    db.add_argument("--retry-failed", action="store_true", help="build again packages whose failure is cached")
    db.set_defaults(func=cmd_debian)

    sp = add_command(csub, "split", "split a corpus into train/, validation/, test/ (deterministic, by package)",
                     ["mlopt corpus split CORPUS splits/",
                      "mlopt corpus split CORPUS splits/ --fractions 0.8,0.2 --by module",
                      "mlopt corpus split CORPUS splits/ --assign lz4=test,ujson=validation"])
    sp.add_argument("corpus")
    sp.add_argument("output", help="directory for one corpus per side")
    sp.add_argument("--fractions", default="0.7,0.15,0.15", metavar="T,V,X",
                    help="train,validation,test (or train,test) shares (0.7,0.15,0.15)")
    sp.add_argument("--by", choices=["package", "module", "auto"], default="auto",
                    help="unit kept on one side; auto: package when module names are PKG/... (default)")
    sp.add_argument("--assign", metavar="PKG=SIDE,...", help="pin packages to sides")
    sp.add_argument("--seed", type=int, default=0)

    st = add_command(csub, "stats", "a corpus's packages and languages: modules, .text, shares, failures",
                     ["mlopt corpus stats CORPUS", "mlopt corpus stats CORPUS --json"])
    st.add_argument("corpus")
    st.add_argument("--json", action="store_true", help="machine-readable summary")
    st.set_defaults(func=cmd_stats)

    cs = add_command(csub, "call-sites", "the packages' -Oz call sites, for the one-site-linkonce rule "
                     "(--package-call-sites) and as plugin callee-decision files",
                     ["mlopt corpus call-sites splits/train splits/validation -o sites.npz",
                      "mlopt corpus call-sites mypkg-corpus/ -o sites.npz --callee-decisions rules/",
                      "clang-19 -Oz $(mlopt clang-flags --llvm 19 --callee-decisions rules/mypkg.txt) -c a.cc"])
    cs.add_argument("corpus", nargs="+", help="corpora (every module of every package the rule is used on)")
    cs.add_argument("-o", "--output", required=True, metavar="FILE", help="the table (.npz)")
    cs.add_argument("--callee-decisions", metavar="DIR",
                    help="also write DIR/<package>.txt: the rule's decisions for -mlopt-inline-callee-decisions")
    cs.add_argument("--workers", type=positive_int, metavar="N")
    cs.add_argument("--force", action="store_true", help="replace an existing table")
    cs.add_argument("--quiet", action="store_true", help="no progress bar")
    cs.add_argument("--json", action="store_true", help="machine-readable summary")
    cs.set_defaults(func=cmd_call_sites)

    for p, func in ((ex, cmd_extract), (mk, cmd_make), (fe, cmd_fetch), (sp, cmd_split), (db, cmd_debian)):
        if p in (ex, fe):
            p.add_argument("--threads", type=positive_int, metavar="N", help="parallel jobs (default: CPUs)")
        p.add_argument("--force", action="store_true", help="replace an existing corpus description")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument("--json", action="store_true", help="machine-readable summary")
        p.set_defaults(func=func)

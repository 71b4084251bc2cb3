"""``mlopt trace`` and ``mlopt eval``: the heuristic's dataset of a corpus,
and a policy against the heuristic, on local workers or a Ray cluster."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..errors import OutputExistsError
from ._common import (
    add_command,
    add_exclude_option,
    add_ir2vec_option,
    add_package_call_sites_option,
    positive_float,
    positive_int,
)


def _pool_options(p) -> None:
    p.add_argument("--workers", type=positive_int, metavar="N", help="worker processes (default: CPUs)")
    p.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster: auto, an address, or local")
    p.add_argument("--timeout", type=positive_float, metavar="S", default=600.0,
                   help="seconds one module may take before it is reported (600)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="machine-readable summary on stdout")
    add_ir2vec_option(p)


def cmd_trace(args) -> int:
    from ..rollouts import trace_corpus
    from ..rollouts.trace import summary

    out = Path(args.output)
    if out.exists() and not args.force:
        raise OutputExistsError(str(out))
    ds = trace_corpus(args.corpus, use_cache=not args.no_cache, workers=args.workers, ray=args.ray,
                      timeout=args.timeout, quiet=args.quiet, exclude=args.exclude,
                      callee_linkage=args.callee_linkage)
    ds.save(out, force=args.force)
    s = summary(ds) | {"output": str(out)}
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        rate = f", {s['compiles_per_second']} compiles/s" if s["compiles_per_second"] else ""
        print(f"{out}: {s['modules']} modules, {s['rows']} decisions, .text {s['text_size']} bytes "
              f"({s['cached']} from cache{rate})")
    for f in s["failed"]:
        print(f"mlopt: warning: {f['module']}: {f['reason']}", file=sys.stderr)
    return 0 if not s["failed"] else 1


def cmd_eval(args) -> int:
    from .._native import default_llvm
    from ..evaluation import (
        call_site_report,
        evaluate,
        format_summary,
        plot_evaluation,
        plot_training_curve,
        verify_with_clang,
        write_csv,
    )

    policy, run_dir = Path(args.policy), None
    if (policy / "run.json").exists() or (policy / "metrics.jsonl").exists():
        run_dir = policy
        policy = next((p for p in (policy / "policy.so", policy / "model") if p.exists()), policy)
    out = Path(args.output)
    if (out / "modules.csv").exists() and not args.force:
        raise OutputExistsError(str(out / "modules.csv"))
    out.mkdir(parents=True, exist_ok=True)
    if args.package_call_sites and not Path(args.package_call_sites).exists():  # the corpus's own pre-pass
        from ..corpus import corpus_entries
        from ..rollouts import build_package_call_sites

        build_package_call_sites(corpus_entries(args.corpus), workers=args.workers, quiet=args.quiet,
                                 skip_failed=True).save(args.package_call_sites)
    ev = evaluate(policy, args.corpus, workers=args.workers, ray=args.ray, timeout=args.timeout, quiet=args.quiet,
                  linked=args.linked)
    from ..corpus import read_description

    summary = {"llvm": default_llvm(), **ev.summary()}
    lto = read_description(args.corpus).get("lto")
    if lto:
        summary["lto"] = lto  # the baseline is the heuristic under that LTO mode
    if args.package_call_sites:
        summary["package_call_sites"] = os.path.abspath(args.package_call_sites)  # the rule was in every compile
    write_csv(ev.rows, out / "modules.csv")
    files = {"modules_csv": str(out / "modules.csv")}
    if args.call_sites:
        files["call_sites"] = call_site_report(policy, args.corpus, args.call_sites, out / "call_sites.csv")
    if not args.no_plots:
        try:
            files["plots"] = [str(p) for p in plot_evaluation(ev.rows, out, llvm=summary["llvm"])]
            if run_dir is not None and (curve := plot_training_curve(run_dir, out, llvm=summary["llvm"])):
                files["plots"].append(str(curve))
        except Exception as e:  # plotting is optional: say why there is none
            print(f"mlopt: warning: no plots: {e}", file=sys.stderr)
    if args.verify_with_clang:
        from ..corpus import corpus_entries

        summary["verify_with_clang"] = verify_with_clang(ev.rows, corpus_entries(args.corpus),
                                                         os.fspath(Path(policy).resolve()), threads=args.workers,
                                                         package_call_sites=args.package_call_sites)
    summary["files"] = files
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_summary(summary))
        if "verify_with_clang" in summary:
            v = summary["verify_with_clang"]
            print(f"clang-{default_llvm()} + plugin: {v['modules'] - len(v['mismatches'])}/{v['modules']} "
                  "modules with the same .text size")
        print(f"per-module results: {files['modules_csv']}")
        for p in files.get("plots", []):
            print(f"plot: {p}")
        if "call_sites" in files:
            c = files["call_sites"]
            print(f"call sites of {c['module']}: {c['path']} ({c['differs']} of {c['sites']} differ)")
    bad = summary["failed"] or summary.get("verify_with_clang", {}).get("mismatches")
    for f in summary["failed"]:
        print(f"mlopt: warning: {f['module']}: {f['reason']}", file=sys.stderr)
    return 1 if bad else 0


def register(sub) -> None:
    tr = add_command(sub, "trace", "the heuristic's training logs and .text sizes of a corpus, as one dataset",
                     ["mlopt trace $(mlopt corpus fetch) -o trace.npz",
                      "mlopt trace corpus/ -o trace.npz --ray auto --json",
                      "mlopt trace corpus/ -o trace.npz --llvm 22 --ir2vec-vocab vocab.json",
                      "mlopt trace corpus/ -o trace-linkage.npz --callee-linkage"])
    tr.add_argument("corpus")
    tr.add_argument("-o", "--output", required=True, metavar="FILE", help="dataset to write (.npz)")
    tr.add_argument("--no-cache", action="store_true", help="recompile modules even when cached")
    tr.add_argument("--force", action="store_true", help="replace an existing dataset")
    tr.add_argument("--callee-linkage", action="store_true",
                    help="the logs also have the callee's linkage class (callee_linkage, the inlining-linkage "
                         "problem's 40th input; not one of LLVM's columns)")
    add_exclude_option(tr)
    _pool_options(tr)
    tr.set_defaults(func=cmd_trace)

    ev = add_command(sub, "eval", "a policy against the heuristic on a corpus: CSV, summary, plots",
                     ["mlopt eval policy.so corpus/ -o eval/",
                      "mlopt eval runs/r1 heldout/ -o eval/ --verify-with-clang",
                      "mlopt eval policy.so corpus/ -o eval/ --call-sites lz4/lz4libs/lz4.c.o",
                      "mlopt eval policy.so corpus/ -o eval/ --linked   # also as each package would link",
                      "mlopt eval policy.so corpus/ -o eval/ --linked --package-call-sites sites.npz"])
    ev.add_argument("policy", help=".so, .tflite, model directory, or a training run directory")
    ev.add_argument("corpus")
    ev.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for CSV, summary, plots")
    ev.add_argument("--call-sites", metavar="MODULE", help="also write every decision of MODULE with names")
    ev.add_argument("--verify-with-clang", action="store_true",
                    help="recompile every module with stock clang (of the LLVM used) + the plugin and compare sizes")
    ev.add_argument("--linked", action="store_true",
                    help="also the package-linked estimate: each package's COMDAT code (C++ inline functions, "
                         "templates) counted once, as a linker keeps it, not once per module (compiles every "
                         "module twice, uncached: policy and heuristic)")
    add_package_call_sites_option(ev)
    ev.add_argument("--no-plots", action="store_true")
    ev.add_argument("--force", action="store_true", help="replace an existing evaluation in the directory")
    _pool_options(ev)
    ev.set_defaults(func=cmd_eval)

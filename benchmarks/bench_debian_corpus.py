"""The large Debian corpus: built from scratch, then traced with the heuristic.

    python3 benchmarks/bench_debian_corpus.py --out /tmp/large   # --jobs 2; --cache DIR (default: fresh)
    python3 benchmarks/bench_debian_corpus.py --out /tmp/one --quick   # one small package (libyaml)

Builds every package of ``mlopt corpus debian --large`` (the pinned list in
python/mlopt/corpus/debian_packages.txt) into a fresh cache, so nothing is
reused, and reports: packages attempted / built / failed (with reasons),
modules, ``.text`` at -Oz per language, the largest package's share, the
build's wall time and the builds' CPU time (their own processes, whatever
else ran beside them: CPU / 2 is what an idle 2-core machine needs at
best). Then ``mlopt trace`` of the corpus with the heuristic in process
(LLVM 19, 2 workers): compiles/s, decisions, and the trace's total ``.text``
against the build's own objects (ratio; the engine compiles each module as
its .cmd says, so they agree up to modules the engine compiles differently).
Everything lands in OUT/summary.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from mlopt.corpus.debian import DebianConfig, PackageSpec, debian_corpus, read_package_list
from mlopt.corpus.manifest import manifest_table, summary
from mlopt.rollouts import trace_corpus
from mlopt.rollouts.trace import summary as trace_summary  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--cache", type=Path, help="package cache (default: a fresh one under --out: from scratch)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one small package of the list (libyaml) instead of all")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.cache or Path(tempfile.mkdtemp(prefix="cache-", dir=args.out))
    specs = [PackageSpec("libyaml")] if args.quick else read_package_list()
    config = DebianConfig(llvm=19, jobs=args.jobs)
    started = time.monotonic()

    def progress(event, package, done, total):
        if event != "fetch":
            print(f"[{done}/{total}] {event} {package} ({(time.monotonic() - started) / 60:.1f} min)", flush=True)

    manifest = debian_corpus(specs, args.out / "corpus", config, cache=cache, force=True, on_progress=progress,
                             say=print)
    wall = time.monotonic() - started
    s = summary(manifest)
    print(manifest_table(manifest))
    print(f"\nbuilt {s['built']} of {s['packages']} packages in {wall / 60:.1f} min wall (jobs {args.jobs}); "
          f"build CPU {s['cpu_seconds'] / 60:.1f} min (/2 cores = {s['cpu_seconds'] / 120:.1f} min)")
    result = {"llvm": 19, "build_wall_seconds": round(wall, 1), "jobs": args.jobs, **s}
    if not args.no_trace:
        t0 = time.monotonic()
        ds = trace_corpus(args.out / "corpus", workers=args.workers, use_cache=False, llvm=19, quiet=True)
        ts = trace_summary(ds)
        ts["seconds"] = round(time.monotonic() - t0, 1)
        ds.save(args.out / "trace.npz", force=True)
        ratio = ts["text_size"] / s["text"] if s["text"] else float("nan")
        print(f"trace (LLVM 19, {args.workers} workers): {ts['modules']} modules, {ts['rows']} inlining decisions, "
              f"{ts['seconds']:.0f} s, {ts['compiles_per_second']} compiles/s; .text {ts['text_size']} = "
              f"{ratio:.4f} x the build's objects; {len(ts['failed'])} failed")
        result["trace"] = {**{k: v for k, v in ts.items() if k != "failed"}, "failed": ts["failed"][:20],
                           "text_vs_build": round(ratio, 5)}
    (args.out / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"summary: {args.out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The inliner-prefix cache on a whole corpus: every module compiled in full
and resumed at the inliner from the module recorded by an earlier compile,
with the recording made under LLVM's heuristic and the resumed compiles made
under a trained policy (what every rollout after a module's first does).
The resumed compile's object, training log and decisions must equal the
full compile's byte for byte, for every module; the script fails otherwise.

Prints how many modules were checked, how many could not be resumed and
why, and the seconds of full against resumed compiles (each compile
generates all of its code: no other cache), over all modules and over the
largest 5% by the heuristic's ``.text``: what the passes before the inliner
cost, measured in the same run.

    MLOPT_LLVM=19 python3 benchmarks/bench_inliner_prefix.py splits/train --policy runs/es/best/policy.npz
    python3 benchmarks/bench_inliner_prefix.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

os.environ.setdefault("MLOPT_LLVM", "19")
from _common import QUICK_HELP, quick_corpus  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402


def _shard(args: tuple) -> list[dict]:
    names, corpus, policy = args
    import mlopt
    from mlopt.compiler import TextSizeCache, compile

    entries = {e.name: e for e in corpus_entries(corpus)}
    pol = mlopt.load_policy(policy) if policy else None
    out = []
    for name in names:
        e = entries[name]
        try:
            m = e.load()
        except mlopt.errors.MloptError as err:
            out.append({"module": name, "error": str(err).splitlines()[0]})
            continue
        cache = TextSizeCache(per_function=False, replay=False)  # the prefix alone
        compile(m, None, log=False, cache=cache)  # records under the heuristic
        start = time.perf_counter()
        full = compile(m, pol, keep_object=True)
        t_full = time.perf_counter() - start
        start = time.perf_counter()
        resumed = compile(m, pol, keep_object=True, cache=cache)
        t_resumed = time.perf_counter() - start
        same = (full.object == resumed.object and full.log_bytes == resumed.log_bytes
                and full.decisions.tobytes() == resumed.decisions.tobytes())
        out.append({"module": name, "bitcode": m.size, "text": full.text_size, "full_s": t_full,
                    "resumed_s": t_resumed, "resumed": cache.prefix_hits == 1, "same": same,
                    "decisions": int(len(full.decisions))})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, nargs="?", help="the modules (e.g. a training split); not with --quick")
    ap.add_argument("--policy", type=Path, help="the policy of the resumed compiles (.npz weights, .tflite, "
                    "model directory or .so; default: LLVM's heuristic)")
    ap.add_argument("--limit", type=int, help="a random sample of this many modules (seed 0)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": the default corpus' lz4 (4 modules)")
    args = ap.parse_args()
    if args.quick:
        args.corpus = quick_corpus()
    elif args.corpus is None:
        ap.error("give a corpus, or --quick")

    names = [e.name for e in corpus_entries(args.corpus)]
    if args.limit:
        names = sorted(np.random.default_rng(0).choice(names, size=min(args.limit, len(names)), replace=False))
    with tempfile.TemporaryDirectory() as tmp:
        policy = args.policy
        if policy is not None and policy.suffix == ".npz":
            from mlopt.problems import load_weights

            policy = load_weights(policy).export(Path(tmp) / "policy")
        shards = [(names[k::args.workers * 8], args.corpus, str(policy) if policy else None)
                  for k in range(args.workers * 8)]
        rows = []
        start = time.perf_counter()
        with ProcessPoolExecutor(args.workers) as ex:
            for part in ex.map(_shard, shards):
                rows += part
                print(f"\r{len(rows)}/{len(names)} modules", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        wall = time.perf_counter() - start

    from mlopt._native import resolve_llvm

    ok = [r for r in rows if "error" in r or r["same"]]
    wrong = [r["module"] for r in rows if "error" not in r and not r["same"]]
    done = [r for r in rows if "error" not in r]
    resumed = [r for r in done if r["resumed"]]
    print(f"LLVM {resolve_llvm(None)}; corpus {args.corpus}: {len(rows)} modules, {len(done)} compiled "
          f"({len(rows) - len(done)} unloadable), policy {args.policy or 'heuristic'}; {wall:.0f} s wall")
    print(f"resumed at the inliner: {len(resumed)} (the others: debug info, coroutines or no inliner)")
    print(f"byte-identical object, log and decisions: {len(ok) - (len(rows) - len(done))}/{len(done)}")
    full = sum(r["full_s"] for r in resumed)
    res = sum(r["resumed_s"] for r in resumed)
    print(f"full compiles {full:.1f} s, resumed {res:.1f} s: {full / max(res, 1e-9):.2f}x")
    if resumed:
        cut = np.quantile([r["text"] for r in resumed], 0.95)
        big = [r for r in resumed if r["text"] >= cut]
        bf, br = sum(r["full_s"] for r in big), sum(r["resumed_s"] for r in big)
        print(f"largest 5% ({len(big)} modules, .text >= {cut:.0f} B): full {bf:.1f} s, resumed {br:.1f} s: "
              f"{bf / max(br, 1e-9):.2f}x; they are {100 * bf / full:.0f}% of the full compiles' time")
    if args.json:
        args.json.write_text(json.dumps({"llvm": resolve_llvm(None), "rows": rows}) + "\n")
    if wrong:
        print(f"DIFFERENT: {len(wrong)} modules, e.g. {wrong[:5]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

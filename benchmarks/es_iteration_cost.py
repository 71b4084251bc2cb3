"""Where an ES iteration's time goes, by module size.

    python3 benchmarks/es_iteration_cost.py splits149/train trace149-train.npz --sample 200 \
        --run esmr149f-s0/es --skip-largest 0.02 --policy prior20-s0.npz

1. Compile cost by size: ``--sample`` random training modules compiled once
   in process with the heuristic (opt + codegen, no cache); the share of
   the time in the largest 5% / 2% of the sample, and the exponent of a
   fit time ~ size^b over the sample's larger half.
2. The optimizer's parts (``opt-N`` subprocesses on the same modules):
   the pipeline before the inliner (policy-independent), against the whole
   ``default<Oz>``, parsing (``-passes=verify``) subtracted from both; and
   with ``--policy``, the in-process optimizer (no codegen) with that
   policy's ``.tflite`` against the heuristic (same decisions for a prior
   that reproduces the heuristic): the model's share.
3. With ``--run``: an ES run's iterations (its ``metrics.jsonl`` and
   config) split by whether the draw held one of the ``--skip-largest``
   largest training modules, recomputing each draw with the run's sampler.

Prints one JSON object. LLVM major: ``MLOPT_LLVM`` (default 19)."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from mlopt.compiler.compile import compile as compile_module
from mlopt.compiler.compile import load_policy
from mlopt.corpus import corpus_entries
from mlopt.problems import load_weights
from mlopt.rollouts.sampler import SizeStratifiedSampler


def _opt_seconds(opt: str, passes: str, paths: list[Path]) -> float:
    start = time.perf_counter()
    for path in paths:
        subprocess.run([opt, f"-passes={passes}", str(path), "-disable-output"], check=True,
                       stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _prefix_pipeline(opt: str) -> str:
    """default<Oz> as opt prints it, up to (without) the always-inliner that starts the inliner's part."""
    with tempfile.NamedTemporaryFile("w", suffix=".ll") as f:
        f.write("define void @f() {\n  ret void\n}\n")
        f.flush()
        text = subprocess.run([opt, "-passes=default<Oz>", "-print-pipeline-passes", f.name, "-disable-output"],
                              check=True, capture_output=True, text=True).stdout.strip()
    head, sep, _ = text.partition(",always-inline,")
    if not sep:
        raise SystemExit(f"{opt}: no always-inline in the printed default<Oz> pipeline")
    return head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, help="a corpus (the training split)")
    ap.add_argument("trace", type=Path, help="its heuristic trace (mlopt trace): sizes and call sites per module")
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", type=Path, help="a policy (.npz) whose model evaluation to time")
    ap.add_argument("--run", type=Path, help="an ES run directory (metrics.jsonl, checkpoint config)")
    ap.add_argument("--skip-largest", type=float, default=0.02, metavar="Q")
    ap.add_argument("--buckets", type=int, default=4)
    args = ap.parse_args()
    llvm = int(os.environ.get("MLOPT_LLVM", "19"))
    opt = f"opt-{llvm}"

    z = np.load(args.trace, allow_pickle=True)
    size = {str(m): float(v) for m, v in zip(z["modules"], z["text_size"])}
    entries = [e for e in corpus_entries(args.corpus) if e.name in size]
    rng = random.Random(args.seed)
    sample = []
    for e in rng.sample(entries, min(len(entries), args.sample)):
        sample.append((e, e.load(llvm)))
    out: dict = {"llvm": llvm, "modules": len(sample)}

    times, sizes = [], []
    for e, m in sample:
        start = time.perf_counter()
        compile_module(m, None, log=False)
        times.append(time.perf_counter() - start)
        sizes.append(size[e.name])
    t, s = np.array(times), np.array(sizes)
    out["compile_s"] = float(t.sum())
    out["time_share_largest"] = {f"{q:g}": float(t[s > np.quantile(s, 1 - q)].sum() / t.sum()) for q in (0.05, 0.02)}
    big = s > np.median(s)
    out["fit_exponent_larger_half"] = float(np.polyfit(np.log(s[big] + 1), np.log(t[big]), 1)[0])

    paths = [e.bitcode_path for e, _ in sample]
    parse = _opt_seconds(opt, "verify", paths)
    prefix = _opt_seconds(opt, _prefix_pipeline(opt), paths) - parse
    whole = _opt_seconds(opt, "default<Oz>", paths) - parse
    out["opt"] = {"parse_s": parse, "before_inliner_s": prefix, "whole_s": whole,
                  "before_inliner_share": prefix / whole}
    if args.policy:
        with tempfile.TemporaryDirectory() as d:
            tfl = Path(d) / "policy.tflite"
            tfl.write_bytes(load_weights(args.policy).to_tflite())
            policy = load_policy(tfl)
            spent = {}
            for name, p in (("heuristic", None), ("policy", policy)):
                start = time.perf_counter()
                for _, m in sample:
                    compile_module(m, p, log=False, codegen=False)
                spent[name] = time.perf_counter() - start
        out["model"] = {**{f"{k}_s": v for k, v in spent.items()},
                        "share": (spent["policy"] - spent["heuristic"]) / spent["policy"]}

    if args.run:
        metrics = [json.loads(line) for line in (args.run / "metrics.jsonl").read_text().splitlines()]
        cfg = json.loads(bytes(np.load(args.run / "checkpoint.npz")["config"]).decode())
        train_sizes = np.array([size[e.name] for e in entries])
        largest = set(np.argsort(train_sizes, kind="stable")[len(entries) - int(args.skip_largest * len(entries)):])
        sampler = SizeStratifiedSampler(train_sizes, cfg.get("buckets", args.buckets), cfg["seed"])
        split: dict[bool, list[float]] = {True: [], False: []}
        for m in metrics[1:]:
            drawn = sampler.sample(m["iteration"] - 1, cfg["modules_per_perturbation"])
            split[bool(largest.intersection(drawn))].append(m["evaluations"] / m["evaluations_per_s"])
        total = sum(map(sum, split.values()))
        out["run"] = {"iterations": len(metrics) - 1,
                      "with_largest": {"n": len(split[True]), "mean_s": statistics.fmean(split[True] or [0]),
                                       "share_of_time": sum(split[True]) / total},
                      "without": {"n": len(split[False]), "mean_s": statistics.fmean(split[False] or [0])}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

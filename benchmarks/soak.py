"""Soak: thousands of in-process compiles with mixed policies, watching
memory and determinism.

    python3 benchmarks/soak.py [--compiles 2000] [--threads 2] [--quick]

Rounds of mlopt.compile_many over the lz4 + brotli modules (35), cycling
through three policies: a compiled .so, the same model as .tflite (LiteRT),
and a Python callable (numpy forward pass of the same MLP). Every round's
objects and training logs must equal, byte for byte, the first round made
with the same policy; all three policies must give the same objects. Prints
RSS after the first round and at the end (the process's own VmRSS/VmHWM).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import mlopt
from _common import QUICK_HELP, QUICK_SDISTS, bench_corpus


def rss_mb() -> tuple[float, float]:
    fields = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def digest(results) -> list[tuple[str, str]]:
    return [(hashlib.sha256(r.object).hexdigest(), hashlib.sha256(r.log_bytes).hexdigest()) for r in results]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compiles", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": lz4's 2 smallest modules, 6 rounds")
    args = ap.parse_args()
    if args.quick:
        args.compiles = 12
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = bench_corpus(work, 2 if args.quick else None, QUICK_SDISTS if args.quick else ("lz4", "brotli"),
                             smallest=args.quick)
        modules = [mlopt.Module(p) for p in paths]
        base = mlopt.compile_many(modules, threads=args.threads)
        vocab = mlopt.Vocab.from_logs([r.log for r in base if r.log is not None], num_buckets=100)
        policy = mlopt.InlinePolicy.random(vocab, hidden=(32, 16), seed=7)
        directory = policy.export(work / "model")
        so = mlopt.compile_policy(directory, work / "policy.so")
        policies = {"so": mlopt.load_policy(so), "tflite": mlopt.load_policy(directory),
                    "callable": lambda row: int(policy.decide(row)[0])}
        first: dict[str, list] = {}
        compiles, rounds, start = 0, 0, time.perf_counter()
        rss_start = None
        while compiles < args.compiles:
            kind = list(policies)[rounds % len(policies)]
            results = mlopt.compile_many(modules, policy=policies[kind], threads=args.threads,
                                         keep_object=True)
            got = digest(results)
            if kind not in first:
                first[kind] = got
            elif got != first[kind]:
                print(f"round {rounds} ({kind}): output differs from its first round", file=sys.stderr)
                return 1
            compiles += len(modules)
            rounds += 1
            if rss_start is None:
                rss_start = rss_mb()[0]
            if rounds % 10 == 0:
                rss, hwm = rss_mb()
                print(f"  {compiles:5d} compiles, {time.perf_counter() - start:6.0f} s, RSS {rss:.0f} MB "
                      f"(peak {hwm:.0f} MB)", flush=True)
        objects = {kind: [o for o, _ in d] for kind, d in first.items()}
        same = objects["so"] == objects["tflite"] == objects["callable"]
        rss, hwm = rss_mb()
        print(f"compiles: {compiles} in {rounds} rounds ({args.threads} threads), "
              f"{time.perf_counter() - start:.0f} s")
        print(f"identical to each policy's first round: yes; .so, .tflite and callable objects equal: "
              f"{'yes' if same else 'NO'}")
        print(f"RSS after round 1: {rss_start:.0f} MB, at the end: {rss:.0f} MB "
              f"(ratio {rss / rss_start:.3f}); peak {hwm:.0f} MB")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

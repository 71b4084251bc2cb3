"""Log reader throughput and memory vs a straightforward pure-Python reader.

Writes a log in LLVM 19's inliner development-mode layout (38 int64
features + inlining_default + inlining_decision, score delta_size, many
contexts), then measures in one run:
  * mlopt.read_log on the file (page cache warm), MB/s, best of --repeat;
  * a pure-Python reader in the style of LLVM's log_reader.py (readline +
    json per record, struct per tensor, numpy at the end), MB/s, on a
    smaller log of the same layout (--baseline-mb), since it is slow;
  * the ratio of the two throughputs;
  * the reader's peak memory (in a fresh process) over the size of the numpy
    arrays it returns.

Usage: python benchmarks/bench_log_reader.py [--mb 120] [--baseline-mb 16]    # --quick: 4 MB, 1 MB, once
Targets: >= 1 GB/s, >= 300x the pure-Python reader, peak memory
<= ~1.2x the numpy output.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

import mlopt
from mlopt import TensorSpec
from mlopt.problems import inlining as inliner

FEATURES = [*inliner.FEATURES, inliner.DEFAULT_DECISION, inliner.DECISION]
SPECS = [TensorSpec(n, "int64_t", [1]) for n in FEATURES]
SCORE = inliner.reward_spec()
BYTES_PER_OBS = 24 + 40 * 8 + 1 + 20 + 8 + 1  # approximate, for sizing


def write_log(path: str, megabytes: float, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    rows = int(megabytes * 1e6 / BYTES_PER_OBS)
    per_context = 120
    with mlopt.LogWriter(path, SPECS, score=SCORE, overwrite=True) as w:
        done, ctx = 0, 0
        while done < rows:
            n = min(per_context, rows - done)
            # Small non-negative counts and costs, as real traces have (many
            # bytes are 0x0a and 0x00).
            cols = {s.name: rng.integers(-50, 300, (n, 1)) for s in SPECS}
            w.switch_context(f"module_{ctx // 8}.bc::fn{ctx}")
            w.log_observations(cols, scores=rng.integers(-100, 100, (n, 1)))
            done += n
            ctx += 1


def python_reader(path: str) -> dict[str, np.ndarray]:
    """What a straightforward pure-Python reader does (cf. LLVM's log_reader.py)."""
    fmt = {"int64_t": "q", "int32_t": "i", "float": "f", "double": "d"}
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        specs = header["features"]
        score = header.get("score")
        columns = {s["name"]: [] for s in specs}
        scores = []
        context = None
        while True:
            line = f.readline()
            if not line:
                break
            record = json.loads(line)
            if "context" in record:
                context = record["context"]
                continue
            for s in specs:
                count = int(np.prod(s["shape"]))
                size = struct.calcsize(fmt[s["type"]]) * count
                columns[s["name"]].append(struct.unpack(f"<{count}{fmt[s['type']]}", f.read(size)))
            f.readline()
            if score is not None:
                json.loads(f.readline())
                scores.append(struct.unpack("<q", f.read(8)))
                f.readline()
    out = {k: np.array(v, dtype=np.int64) for k, v in columns.items()}
    out["__score__"] = np.array(scores, dtype=np.int64)
    assert context is not None
    return out


def best_time(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


MEMORY_PROBE = r"""
import sys, mlopt
read_log = mlopt.read_log  # resolves mlopt's lazy import (numpy, the C++ core) before measuring
def kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
before = kb("VmRSS:")
log = read_log(sys.argv[1])
print(before, kb("VmHWM:"), log.nbytes // 1024)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=120, help="size of the log to read (default 120)")
    ap.add_argument("--baseline-mb", type=float, default=16, help="size of the pure-Python reader's log")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="a 4 MB log, a 1 MB baseline log, one repetition")
    args = ap.parse_args()
    if args.quick:
        args.mb, args.baseline_mb, args.repeat = 4, 1, 1

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        big, small = os.path.join(tmp, "big.log"), os.path.join(tmp, "small.log")
        t = time.perf_counter()
        write_log(big, args.mb)
        write_time = time.perf_counter() - t
        write_log(small, args.baseline_mb, seed=1)
        big_mb = os.path.getsize(big) / 1e6
        small_mb = os.path.getsize(small) / 1e6
        print(f"log: {big_mb:.1f} MB (written in {write_time:.2f} s, {big_mb / write_time:.0f} MB/s), "
              f"baseline log: {small_mb:.1f} MB")

        mlopt.read_log(big)  # warm the page cache
        t_file, log = best_time(lambda: mlopt.read_log(big), args.repeat)
        with open(big, "rb") as f:
            data = f.read()
        t_mem, _ = best_time(lambda: mlopt.read_log(data), args.repeat)  # noqa: F821 (del below)
        del data
        t_small, small_log = best_time(lambda: mlopt.read_log(small), args.repeat)
        t_py, py = best_time(lambda: python_reader(small), 1)

        # Same answers from both readers.
        for name in FEATURES:
            assert np.array_equal(small_log[name], py[name]), name
        assert np.array_equal(small_log.score, py["__score__"])

        mlopt_mbs = big_mb / t_file
        mlopt_small_mbs = small_mb / t_small
        py_mbs = small_mb / t_py
        print(f"rows: {len(log)}, contexts: {len(log.contexts)}, numpy output: {log.nbytes / 1e6:.1f} MB")
        print(f"mlopt.read_log(file):   {mlopt_mbs:8.0f} MB/s  ({t_file * 1e3:.1f} ms)")
        print(f"mlopt.read_log(bytes):  {big_mb / t_mem:8.0f} MB/s  ({t_mem * 1e3:.1f} ms)")
        print(f"mlopt on baseline log:  {mlopt_small_mbs:8.0f} MB/s")
        print(f"pure-Python reader:     {py_mbs:8.2f} MB/s  ({t_py:.2f} s on {small_mb:.1f} MB)")
        print(f"ratio mlopt/pure-Python (same log): {mlopt_small_mbs / py_mbs:.0f}x")
        print(f"ratio mlopt (big log)/pure-Python:  {mlopt_mbs / py_mbs:.0f}x")
        del log

        probe = subprocess.run([sys.executable, "-c", MEMORY_PROBE, big], capture_output=True, text=True, check=True)
        before, peak, output = map(int, probe.stdout.split())
        print(f"peak memory of read_log: {(peak - before) / 1024:.1f} MB for {output / 1024:.1f} MB of numpy "
              f"output = {(peak - before) / output:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

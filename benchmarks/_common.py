"""Shared by the benchmarks: the corpus, a realistic policy, a timing loop and the inputs of ``--quick``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# These benchmarks time LLVM 19's tools (opt-19, llc-19, clang-19) against mlopt:
# mlopt uses LLVM 19 too unless MLOPT_LLVM says otherwise.
os.environ.setdefault("MLOPT_LLVM", "19")
# Benchmarks are scripts run from a checkout: the test corpus builder is theirs too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import mlopt  # noqa: E402
from mlopt.compiler.plugin import plugin_path  # noqa: E402
from tests.support import corpus  # noqa: E402

SDISTS = tuple(corpus.SDISTS)
QUICK_SDISTS = ("lz4",)

# The large Debian corpus's validation and test packages (benchmarks/README.md).
LARGE_VALIDATION = ["angelscript", "cmark", "fmtlib", "lame", "leveldb", "libpcap", "libtomcrypt", "lzip", "nettle",
                    "ninja-build", "snappy", "wavpack"]
LARGE_TEST = ["box2d", "clipper", "faad2", "giflib", "hunspell", "lcms2", "libebml", "libuv1", "lmdb", "lzo2", "mawk",
              "msgpack-c", "openh264", "qhull", "spdlog"]


def pinned_packages(names: list[str]):
    """The packages at the versions the corpus lists pin."""
    from mlopt.corpus.debian import read_package_list

    root = Path(__file__).resolve().parent.parent
    lists = [root / "python" / "mlopt" / "corpus" / "debian_packages.txt", root / "benchmarks" /
             "debian_extra_packages.txt"]
    known = {s.name: s for path in lists for s in read_package_list(path)}
    missing = [n for n in names if n not in known]
    if missing:
        sys.exit(f"{missing} are in no package list")
    return [known[n] for n in names]


def bench_corpus(work: Path, limit: int | None = None, names=SDISTS, smallest: bool = False) -> list[Path]:
    """Every C file of the named sdists (default all four: lz4, brotli,
    zstandard and pycryptodome, 92 modules); ``limit``: the first N, or
    with ``smallest`` the N smallest."""
    modules = corpus.corpus("clang-19", work, names=names)
    if smallest:
        modules = sorted(modules, key=lambda m: m.stat().st_size)
    modules = modules[:limit] if limit else modules
    print(f"corpus: {len(modules)} modules ({sum(m.stat().st_size for m in modules) / 1e6:.1f} MB bitcode)")
    return modules


QUICK_HELP = "the same code path on the smallest real input, in seconds (tests/test_benchmarks.py runs it)"


def quick_corpus() -> Path:
    """The default corpus' lz4 package (4 C modules; ``mlopt corpus fetch lz4``, cached)."""
    from mlopt.corpus import fetch_corpus

    return Path(fetch_corpus(None, ["lz4"]).output)


def quick_splits(work: Path) -> Path:
    """``mlopt demo --small``'s split of the default corpus under ``work``:
    marisa-trie (C++) to train, ujson (C++) to validate, lz4 (C) to test."""
    from mlopt.training.demo import demo_splits

    demo_splits(work / "splits", small=True)
    return work / "splits"


def quick_inputs(work: Path) -> tuple[Path, Path, Path]:
    """(splits, trace, bc) for the trainers' --quick: :func:`quick_splits`,
    the heuristic's trace of its training split (``mlopt trace``) and a BC
    policy of 2 epochs on it (``.npz`` weights)."""
    from mlopt.problems import inlining
    from mlopt.rollouts import trace_corpus
    from mlopt.training import train_bc

    splits = quick_splits(work)
    ds = trace_corpus(splits / "train", quiet=True, workers=2)
    trace, bc = work / "train-trace.npz", work / "bc.npz"
    ds.save(trace, force=True)
    train_bc(ds, inlining.PROBLEM, epochs=2).policy.save(bc, overwrite=True)
    return splits, trace, bc


def heuristic_traces(modules: list[Path], work: Path) -> list[mlopt.Log]:
    plugin = str(plugin_path())
    traces = []
    for m in modules:
        log = work / f"{m.stem}.heuristic.log"
        subprocess.run(["opt-19", f"-load-pass-plugin={plugin}", f"-mlopt-inline-training-log={log}",
                        "-passes=default<Oz>", str(m), "-o", "/dev/null"], check=True)
        traces.append(mlopt.read_log(log))
    return traces


def random_policy(traces: list[mlopt.Log]) -> mlopt.InlinePolicy:
    """A 64x64 MLP over the corpus' own vocab (seed 2)."""
    return mlopt.InlinePolicy.random(mlopt.Vocab.from_logs(traces), hidden=(64, 64), seed=2)


def time_configs(modules: list[Path], configs: dict[str, list[str]], reps: int) -> dict[str, np.ndarray]:
    """Best-of-`reps` wall time of `cmd -passes=default<Oz> module -o /dev/null`, interleaved."""
    best = {name: np.full(len(modules), np.inf) for name in configs}
    for rep in range(reps):
        for i, m in enumerate(modules):
            for name, cmd in configs.items():
                start = time.perf_counter()
                subprocess.run(cmd + ["-passes=default<Oz>", str(m), "-o", "/dev/null"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                best[name][i] = min(best[name][i], time.perf_counter() - start)
        print(f"  rep {rep + 1}/{reps} done", file=sys.stderr)
    return best


def print_ratios(best: dict[str, np.ndarray], baselines: tuple[str, ...]) -> None:
    total = {name: t.sum() for name, t in best.items()}
    header = f"{'config':<16}{'total s':>9}" + "".join(f"{'vs ' + b:>16}" for b in baselines)
    print("\n" + header)
    for name in best:
        print(f"{name:<16}{total[name]:>9.2f}" + "".join(f"{total[name] / total[b]:>16.3f}" for b in baselines))
    print("\nper-module ratio vs stock (median / max):")
    for name in best:
        r = best[name] / best["stock"]
        print(f"  {name:<16}{np.median(r):.3f} / {r.max():.3f}")


def write_report(report: dict, out: Path, record: str | None = None) -> None:
    """``report`` stamped with the checkout's commit and today's date, written to ``out`` and, with
    ``record`` (a file name), to benchmarks/results/ as the recorded result the results page renders."""
    import json

    root = Path(__file__).resolve().parent.parent
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    text = json.dumps({**report, "commit": commit, "date": time.strftime("%Y-%m-%d")}, indent=1, default=str) + "\n"
    out.write_text(text)
    if record:
        (root / "benchmarks" / "results" / record).write_text(text)

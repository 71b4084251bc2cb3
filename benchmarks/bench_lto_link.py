"""Link-time cost of shipping a policy under LTO: stock ld.lld against lld
with the plugin in its LTO backends, full LTO and ThinLTO.

Binaries: shared libraries of the benchmark sdists' C sources (lz4, brotli,
zstd; tests/support/corpus.py) and the example project's C++ libgeom.so, each
file compiled once with clang-N -Oz -fPIC -flto=MODE; every link is
``ld.lld-N -shared`` of those objects (ThinLTO with --thinlto-jobs=1, so CPU
time is the link's work). Configurations, run interleaved (every binary under
every configuration in a rotating order, --reps rounds, each binary's time the
best of its runs: user + sys CPU seconds of the lld process):

  stock      stock lld
  so-mlopt   the plugin with a compiled .so policy evaluated at every decision,
             the decisions replayed from the heuristic's own (-mlopt-inline-replay,
             recorded once per binary), so the code is stock's and what is measured
             is what a shipped policy pays: features, their upkeep, the model
  log        the plugin writing a training log of the heuristic's decisions

In the first round every plugin configuration's binary is compared with
stock's, byte for byte. Reported per mode: total CPU vs stock, the median and
the worst binary's ratio (target: <= 1.02).

Run:  python3 benchmarks/bench_lto_link.py [--llvm 19] [--reps 5] [--modes full,thin] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import mlopt
from _common import QUICK_HELP
from mlopt.compiler.plugin import lld_flags
from mlopt.policy.aot import compile_policy
from tests.support import corpus
from tests.support.lto import EXAMPLE, INCLUDES

LIBRARIES = ("lz4", "brotli", "zstandard")


def _run(cmd, cwd) -> float:
    """CPU seconds (user + sys) of the command; fails loudly."""
    proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench_lto_link: {' '.join(map(str, cmd))} failed:\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def objects(work: Path, mode: str, major: int, names) -> dict[str, list[Path]]:
    """Per binary, its -flto=MODE objects (compiled once)."""
    out = {}
    for name in names:
        d = work / mode / name
        d.mkdir(parents=True, exist_ok=True)
        if name == "libgeom.so":
            sources = sorted((EXAMPLE / "geom" / "src").glob("*.cpp")) + sorted((EXAMPLE / "cutil").glob("*.c"))
            flags, compilers = INCLUDES, {".cpp": f"clang++-{major}", ".c": f"clang-{major}"}
        else:
            sources = corpus.c_sources(name)
            flags, compilers = corpus.include_flags(name) + corpus.EXTRA_FLAGS.get(name, []), {".c": f"clang-{major}"}
        objs = []
        for i, src in enumerate(sources):
            obj = d / f"{i:03d}_{src.stem}.o"
            if not obj.exists():
                _run([compilers[src.suffix], "-Oz", "-fPIC", f"-flto={mode}", *flags, "-c", src, "-o", obj], d)
            objs.append(obj)
        out[name] = objs
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--modes", default="full,thin")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = ap.parse_args()
    major = args.llvm
    names = ("libgeom.so",) if args.quick else (*LIBRARIES, "libgeom.so")
    reps = 1 if args.quick else args.reps
    work = Path(tempfile.mkdtemp(prefix="mlopt-lto-link-"))
    lld = f"ld.lld-{major}"
    for mode in args.modes.split(","):
        objs = objects(work, mode, major, names)
        thin = ["--thinlto-jobs=1"] if mode == "thin" else []
        root = work / mode

        def link(config: str, name: str, flags, root=root, thin=thin, objs=objs) -> float:
            """One link of `name` as <root>/<config>/<name>: the output as given names the modules (%m)."""
            d = root / config
            d.mkdir(exist_ok=True)
            return _run([lld, "-shared", *thin, *flags, *objs[name], "-o", name], d)

        # the heuristic's decisions per module (the replay) and a vocabulary for the policy
        logs = root / "logs"
        for name in objs:
            link("heuristic", name, lld_flags(training_log=f"{logs}/", llvm=major))
            link("reference", name, [])
        traces = [mlopt.read_log(p) for p in logs.rglob("*.log")]
        replay = root / "replay"
        for p in logs.rglob("*.log"):
            target = replay / p.relative_to(logs).with_suffix(".txt")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(str(int(d)) for d in mlopt.read_log(p)["inlining_decision"].ravel()))
        policy = mlopt.InlinePolicy.random(mlopt.Vocab.from_logs(traces), hidden=(64, 64), seed=2)
        so = compile_policy(policy.export(root / "policy", overwrite=True), root / "policy.so", overwrite=True)
        configs = {"stock": [],
                   "so-mlopt": lld_flags(model=so, replay=f"{replay}/%m.txt", llvm=major),
                   "log": lld_flags(training_log=f"{root / 'log'}/%p/", llvm=major)}
        best = {c: {n: float("inf") for n in objs} for c in configs}
        order = list(configs)
        for rep in range(reps):
            for i, name in enumerate(objs):
                k = (rep + i) % len(order)
                for c in order[k:] + order[:k]:
                    best[c][name] = min(best[c][name], link(c, name, configs[c]))
                    if rep == 0 and (root / c / name).read_bytes() != (root / "reference" / name).read_bytes():
                        sys.exit(f"bench_lto_link: {name} under {c} differs from stock")
        print(f"LLVM {major}, {mode} LTO: {len(objs)} binaries, best of {reps} (CPU seconds of ld.lld)")
        base = sum(best["stock"].values())
        print(f"  stock      {base:8.3f} s")
        for c in order[1:]:
            ratios = [best[c][n] / best["stock"][n] for n in objs]
            worst = max(objs, key=lambda n, c=c: best[c][n] / best["stock"][n])
            print(f"  {c:<10} {sum(best[c].values()):8.3f} s  total {sum(best[c].values()) / base:.3f}x  "
                  f"median {statistics.median(ratios):.3f}x  worst {max(ratios):.3f}x ({worst})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

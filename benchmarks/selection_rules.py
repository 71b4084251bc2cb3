"""Which rule should choose a run's returned policy, judged without the test
split: the validation packages (12 in splits149) are cut into halves A and B
(every such cut), a rule chooses from what A says, and B judges the choice.

    python3 benchmarks/selection_rules.py SPLITS es-s0 es-s1 es-s2 [--seconds 1800] [--trainer es]

Rules over the validated snapshots of iterations that ended by SECONDS
(``budget_cut.py``'s clock):
  best        the snapshot with the best validation (what the trainers do);
  best-package-mean  the snapshot whose packages' deltas have the best mean
              (each package one vote, whatever its bytes);
  last        the last snapshot, whatever validation says;
  smooth-K    the middle snapshot of the K consecutive snapshots with the best
              mean validation;
  mean-last-K the weights averaged over the last K snapshots (no choice at all);
  mean-K      the weights averaged over smooth-K's K snapshots.
Each snapshot's (and averaged policy's) per-module validation sizes are
measured once and kept in RUN/TRAINER/selection/*.json, so a second call
only recounts. Prints, per rule, B's total ``.text`` delta vs -Oz (percent,
negative = smaller) averaged over the cuts, per run and over the runs, and
how often the rule beats ``best`` on B; the LLVM is the one SPLITS' traces
name (set MLOPT_LLVM as for the runs)."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from budget_cut import averaged, validated_by
from mlopt.corpus import corpus_entries, package_of
from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.training.environment import CompilerEnvironment
from mlopt.workers import make_pool


class Measured:
    """Per-module validation sizes of policies, measured once per label and kept on disk."""

    def __init__(self, keep: Path, env, entries, work: Path):
        self.keep, self.env, self.entries, self.work = keep, env, entries, work
        keep.mkdir(parents=True, exist_ok=True)

    def sizes(self, label: str, policy) -> dict[str, float | None]:
        path = self.keep / f"{label}.json"
        if path.exists():
            return json.loads(path.read_text())
        costs = self.env.costs([policy()], [(0, e) for e in self.entries], self.work)
        out = {e.name: c for e, c in zip(self.entries, costs)}
        path.write_text(json.dumps(out) + "\n")
        return out


def package_sums(sizes: dict, baseline: dict, by_package: dict[str, list[str]]) -> np.ndarray:
    """[package, (policy's bytes, -Oz's bytes)] over the modules the policy compiled."""
    return np.array([[sum(sizes[m] for m in ms if sizes.get(m) is not None),
                      sum(baseline[m] for m in ms if sizes.get(m) is not None)] for ms in by_package.values()])


def delta(sums: np.ndarray, mask: np.ndarray) -> float:
    """Total delta vs -Oz in percent over the packages in ``mask``."""
    cost, base = sums[mask].sum(axis=0)
    return 100.0 * (cost - base) / base


def package_mean(sums: np.ndarray, mask: np.ndarray) -> float:
    """The mean over the packages in ``mask`` of each one's delta vs -Oz in percent (every package one vote)."""
    cost, base = sums[mask].T
    return float(np.mean(100.0 * (cost - base) / base))


def smooth_start(values: list[float], k: int) -> int:
    """Start of the k consecutive values with the lowest mean (the earliest of ties)."""
    means = [sum(values[i:i + k]) / k for i in range(len(values) - k + 1)]
    return int(np.argmin(means))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, help="the runs' SPLITS (its validation/ is cut in halves)")
    ap.add_argument("runs", type=Path, nargs="+", help="bench_es_ppo.py output directories")
    ap.add_argument("--seconds", type=float, default=1800.0)
    ap.add_argument("--trainer", default="es")
    ap.add_argument("--windows", default="3,5", help="K of smooth-K and mean-K (comma-separated)")
    ap.add_argument("--last", default="3,5,8", help="K of mean-last-K (comma-separated)")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    windows = [int(k) for k in args.windows.split(",") if k]
    lasts = [int(k) for k in args.last.split(",") if k]
    rules = ["best", "best-package-mean", "last", *[f"smooth-{k}" for k in windows], *[f"mean-last-{k}" for k in lasts],
             *[f"mean-{k}" for k in windows], "oracle-B"]
    scores: dict[str, dict[str, list[float]]] = {r: {} for r in rules}
    with make_pool(args.workers) as pool:
        ds = trace_corpus(args.splits / "validation", pool=pool, quiet=True)
        baseline = {m: float(v) for m, v in zip(ds.modules, ds.text_size)}
        entries = [e for e in corpus_entries(args.splits / "validation") if e.name in baseline]
        packages = sorted({package_of(e.name) for e in entries})
        by_package = {p: [e.name for e in entries if package_of(e.name) == p] for p in packages}
        # every cut of the packages into halves, each (A, B) both ways round, as masks over ``packages``
        cuts = [np.isin(packages, c) for c in itertools.combinations(packages, len(packages) // 2)]
        env = None
        for run in args.runs:
            result = json.loads((run / "es_ppo.json").read_text())
            if result.get("llvm_version") != ds.meta["llvm"]:
                raise SystemExit(f"{run}: run on LLVM {result.get('llvm_version')}, SPLITS traced by {ds.meta['llvm']}")
            snaps = validated_by(run, result[args.trainer], args.trainer, args.seconds)
            env = env or CompilerEnvironment(load_weights(snaps[0]).problem, pool)
            measured = Measured(run / args.trainer / "selection", env, entries, run / "work")
            stems = [p.stem for p in snaps]

            def sums(label, policy, measured=measured):
                return package_sums(measured.sizes(label, policy), baseline, by_package)

            snap = {}
            for p in snaps:
                snap[p.stem] = sums(p.stem, lambda p=p: load_weights(p))
                print(run, p.stem, f"{delta(snap[p.stem], np.ones(len(packages), bool)):+.3f}%", flush=True)
            last = {k: sums(f"mean-last{k}-{stems[-1]}", lambda k=k, s=snaps: averaged(s[-k:])) for k in lasts}
            window: dict[tuple[int, int], np.ndarray] = {}  # measured only for the windows some A chooses
            name = run.name
            for r in rules:
                scores[r][name] = []
            for a in cuts:
                b = ~a
                on_a = [delta(snap[s], a) for s in stems]
                scores["best"][name].append(delta(snap[stems[int(np.argmin(on_a))]], b))
                scores["last"][name].append(delta(snap[stems[-1]], b))
                by_vote = [package_mean(snap[s], a) for s in stems]
                scores["best-package-mean"][name].append(delta(snap[stems[int(np.argmin(by_vote))]], b))
                scores["oracle-B"][name].append(min(delta(snap[s], b) for s in stems))
                for k in windows:
                    i = smooth_start(on_a, k)
                    if (k, i) not in window:
                        window[k, i] = sums(f"mean{k}-{stems[i]}", lambda i=i, k=k, s=snaps: averaged(s[i:i + k]))
                    scores[f"smooth-{k}"][name].append(delta(snap[stems[i + k // 2]], b))
                    scores[f"mean-{k}"][name].append(delta(window[k, i], b))
                for k in lasts:
                    scores[f"mean-last-{k}"][name].append(delta(last[k], b))
            print(run, "averaged windows measured:", len(window), flush=True)
    names = list(scores["best"])
    print(f"\n{len(cuts)} (A, B) cuts of {len(packages)} validation packages, LLVM {ds.meta['llvm']}, "
          f"snapshots ended by {args.seconds:g} s; B's total .text delta vs -Oz, mean over the cuts")
    print("| rule | " + " | ".join(names) + " | mean | beats best on B |")
    print("|---|" + "---|" * (len(names) + 2))
    for r in rules:
        means = [float(np.mean(scores[r][n])) for n in names]
        wins = np.mean([x < y for n in names for x, y in zip(scores[r][n], scores["best"][n])])
        print(f"| {r} | " + " | ".join(f"{m:+.3f}%" for m in means) + f" | {np.mean(means):+.3f}% | {wins:.0%} |")


if __name__ == "__main__":
    main()

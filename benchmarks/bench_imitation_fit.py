"""Does search + imitation underfit its own search, or fail to carry it?

``mlopt train search`` finds smaller compiles of its training modules, then
trains the starting policy to imitate them (``SearchConfig.epochs`` epochs,
each flip weight) and lets validation choose. This measures, for a finished
run, how much of the search the imitated policy keeps:

- on the search's own trajectories, without compiling: the share of the
  decisions the search changed (those where the best trajectory differs
  from the starting policy's decision) the policy reproduces, per label,
  and how many other decisions it changes;
- on the searched modules themselves (``--draw``): the policy's compile,
  costed by the run's objective, against the search's best and the start;
- on the run's validation split, as the trainer judges it.

Beside the run's chosen policy it imitates again with each ``--epochs`` x
``--flip-weights`` (module-size partitions of equal weight, as the trainer
weighs them; the flip weight goes to the changed decisions, a subset of
the trainer's rows, every site of a forced callee, which the trajectories
do not name: at weight 1 the imitation is exactly the trainer's), so the
table shows whether imitating harder keeps more of the search and what
that does to validation.
The test split is not used. Every figure is a delta vs -Oz in percent
(negative = smaller).

    python3 benchmarks/bench_imitation_fit.py search-s0 --linked-shares shares/linked-shares.npz \
        --epochs 4,16 --flip-weights 1,4 --draw --out fit-s0.json
    python3 benchmarks/bench_imitation_fit.py search-s0 --linked-shares shares/linked-shares.npz \
        --also search-s1 --also search-s2 --epochs 4 --flip-weights 1 --out pooled-s0.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np  # noqa: E402

from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.problems import load_weights  # noqa: E402
from mlopt.rollouts.dataset import TraceDataset  # noqa: E402
from mlopt.training.local_search import SearchConfig, imitate, imitation_weights  # noqa: E402
from mlopt.training.validation import costs_of, total_delta_percent  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402


def concatenated(parts: list[TraceDataset]) -> TraceDataset:
    """One dataset of ``parts``' modules in order (the columns all have)."""
    keys = [k for k in parts[0].columns if all(k in d.columns for d in parts)]
    offsets = np.concatenate([[0]] + [d.module_rows[1:] + sum(len(q) for q in parts[:i])
                                      for i, d in enumerate(parts)])
    return TraceDataset([m for d in parts for m in d.modules], np.concatenate([d.text_size for d in parts]),
                        offsets.astype(np.int64), {k: np.concatenate([d.columns[k] for d in parts]) for k in keys},
                        dict(parts[0].meta))


@dataclass
class SearchedRun:
    """What a search run left: its best trajectories, starting policy and its decisions on them, the rows the
    search changed (per module), and search.json's record of each module (costs, accepted moves)."""

    best: TraceDataset
    start: object
    start_decisions: np.ndarray
    flipped: list[list[int]]
    searched: dict[str, dict]

    @classmethod
    def load(cls, run: Path, problem: str, label: str) -> SearchedRun:
        config = json.loads((run / "config.json").read_text())
        start = load_weights(config["init"], problem)
        best = TraceDataset.load(run / "trajectories.npz")
        searched = {m["module"]: m for m in json.loads((run / "search.json").read_text())}
        decisions = start.decide(best.columns).reshape(-1).astype(int)
        return cls(best, start, decisions, changed_rows(best, decisions, label), searched)

    @property
    def heuristic(self) -> list[float]:
        return [self.searched[m]["heuristic_cost"] for m in self.best.modules]


def changed_rows(best: TraceDataset, start_decisions: np.ndarray, label: str) -> list[list[int]]:
    """Per module, the rows where the search's trajectory differs from the starting policy's decision."""
    differs = best.columns[label].reshape(-1).astype(int) != start_decisions
    return [list(np.flatnonzero(differs[best.rows_of(i)])) for i in range(len(best.modules))]


def reproduction(policy, best: TraceDataset, start_decisions: np.ndarray, label: str) -> dict:
    target = best.columns[label].reshape(-1).astype(int)
    got = policy.decide(best.columns).reshape(-1).astype(int)
    changed = target != start_decisions
    out = {"changed": int(changed.sum()),
           "reproduced": float((got[changed] == target[changed]).mean()) if changed.any() else None,
           "other_rows_changed": int(((got != target) & ~changed).sum())}
    for d in (0, 1):
        m = changed & (target == d)
        out[f"reproduced_label{d}"] = float((got[m] == target[m]).mean()) if m.any() else None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a `mlopt train search` run directory")
    ap.add_argument("--linked-shares", metavar="FILE", help="the run's table (problem inlining-linked)")
    ap.add_argument("--epochs", default="4",
                    help="comma-separated imitation epochs (default 4, the trainer's; \"\": the run's choice alone)")
    ap.add_argument("--flip-weights", default="1", help="comma-separated weights of the changed decisions")
    ap.add_argument("--lr", type=float, default=SearchConfig.lr)
    ap.add_argument("--also", type=Path, action="append", default=[], metavar="RUN",
                    help="pool this search run's trajectories into the imitations (repeatable)")
    ap.add_argument("--draw", action="store_true", help="also compile the searched modules with each policy")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.linked_shares:
        os.environ["MLOPT_LINKED_SHARES"] = os.path.abspath(args.linked_shares)
    config = json.loads((args.run / "config.json").read_text())
    problem = config["problem"]
    chosen = load_weights(args.run / "policy.npz", problem)
    label = chosen.problem.decision.name
    runs = [SearchedRun.load(r, problem, label) for r in [args.run, *args.also]]
    best, start, start_decisions, searched = runs[0].best, runs[0].start, runs[0].start_decisions, runs[0].searched
    cfg = SearchConfig(**{k: config[k] for k in ("partitions", "seed")}, lr=args.lr)
    pooled = concatenated([r.best for r in runs]) if args.also else best
    pooled_flipped = [f for r in runs for f in r.flipped]
    pooled_heuristic = [h for r in runs for h in r.heuristic]
    if args.also:
        print(f"pooled {len(pooled.modules)} searched modules ({len(set(pooled.modules))} distinct), "
              f"{len(pooled)} rows", file=sys.stderr, flush=True)
    choice = json.loads((args.run / "search_report.json").read_text())["chosen"]
    candidates = [("start", start), (f"run's choice ({choice})", chosen)]
    for e in [int(x) for x in args.epochs.split(",") if x]:
        for w in [float(x) for x in args.flip_weights.split(",")]:
            t = time.perf_counter()
            p = imitate(start, pooled, imitation_weights(pooled, pooled_flipped, pooled_heuristic, cfg, w),
                        replace(cfg, epochs=e))
            name = f"epochs={e} w={w:g}" + (f", pooled with {len(args.also)} runs" if args.also else "")
            print(f"imitated {name} in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
            candidates.append((name, p))

    rows = []
    with make_pool(args.workers) as pool, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        validation = corpus_entries(config["validation"]) if config.get("validation") else []
        val_costs = costs_of([(None, e) for e in validation], problem, pool=pool)
        val_base = {e.name: c for e, c in zip(validation, val_costs) if c is not None}
        validation = [e for e in validation if e.name in val_base]
        draw = [e for e in corpus_entries(config["corpus"]) if e.name in searched]
        draw_base = {m: searched[m]["heuristic_cost"] for m in searched}
        total = sum(draw_base.values())
        row_searched = 100.0 * (sum(m["best_cost"] for m in searched.values()) - total) / total
        for name, p in candidates:
            t = time.perf_counter()
            row = {"policy": name, **reproduction(p, best, start_decisions, label),
                   "validation": total_delta_percent(p, validation, val_base, work, pool=pool)}
            if args.draw:
                row["draw"] = total_delta_percent(p, draw, draw_base, work, pool=pool)
            rows.append(row)
            print(f"{name}: {json.dumps(row)} ({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)
    result = {"run": str(args.run), "also": [str(r) for r in args.also], "llvm": default_llvm(), "problem": problem,
              "modules": len(best.modules),
              "searched_draw": row_searched, "rows": rows}
    print(f"\n{args.run}: LLVM {result['llvm']}, {problem}, {len(best.modules)} searched modules "
          f"(search's best: {row_searched:+.3f}% vs -Oz); {rows[0]['changed']} decisions changed by the search")
    print("| policy | changed reproduced | label 0 / 1 | other rows changed | searched modules | validation |")
    print("|---|---|---|---|---|---|")
    def pct(v, signed=False):
        return "-" if v is None else (f"{v:+.3f}%" if signed else f"{100 * v:.1f}%")

    for r in rows:
        print(f"| {r['policy']} | {pct(r['reproduced'])} | {pct(r['reproduced_label0'])} / "
              f"{pct(r['reproduced_label1'])} | {r['other_rows_changed']} | {pct(r.get('draw'), True)} | "
              f"{pct(r['validation'], True)} |")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

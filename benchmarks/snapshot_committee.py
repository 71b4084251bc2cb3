"""Whether a committee of a run's snapshots beats the one snapshot it
returns: for each run, the snapshots validated in iterations that ended by
SECONDS of training; two committees of K (``mlopt.policy.ensemble``: the
mean of the members' logits): the last K validated snapshots, and the K
with the best validation. Each is measured on the validation packages; the
rule returns the committee (of the two, the better on validation) when its
validation beats the run's own choice (``budget_cut.py``'s), else the
run's choice. Test is measured for both committees and reported, never used
to choose.

    python3 benchmarks/snapshot_committee.py SPLITS RUN [RUN ...] --members 5 [--seconds 1800]

Writes RUN/committee-<SECONDS>-k<K>.json and prints one table. Every
figure is a total ``.text`` delta vs -Oz in percent (negative = smaller),
from the LLVM that SPLITS' traces name (set MLOPT_LLVM as for the runs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from budget_cut import _judge, choose, validated_by
from mlopt.policy.ensemble import logit_mean
from mlopt.problems import load_weights
from mlopt.workers import make_pool
from seeds_table import _pct, _spread


def validation_of(run: Path, trainer: str) -> dict[int, float]:
    """Iteration -> its recorded validation delta (%)."""
    out = {}
    for line in (run / trainer / "metrics.jsonl").read_text().splitlines():
        m = json.loads(line)
        if m.get("validation_delta_percent") is not None and m["iteration"] > 0:
            out[m["iteration"]] = m["validation_delta_percent"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, help="the runs' SPLITS (validation/ chooses, test/ is reported)")
    ap.add_argument("runs", type=Path, nargs="+", help="bench_es_ppo.py output directories")
    ap.add_argument("--members", type=int, default=5, metavar="K", help="snapshots per committee (5)")
    ap.add_argument("--seconds", type=float, default=1800.0, help="seconds of training (default: the issue's 1,800)")
    ap.add_argument("--trainer", default="es")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    if args.members < 2:
        ap.error("--members must be at least 2")
    rows = []
    with make_pool(args.workers) as pool:
        judge = validate = None
        for run in args.runs:
            results = json.loads((run / "es_ppo.json").read_text())
            result = results[args.trainer]
            iteration, val, _ = choose(run, result, args.trainer, args.seconds)
            snaps = validated_by(run, result, args.trainer, args.seconds)
            if len(snaps) < args.members:
                raise SystemExit(f"{run}: {len(snaps)} validated snapshots by {args.seconds:g} s, need {args.members}")
            llvm = results.get("llvm_version")
            judge = judge or _judge(args.splits / "test", pool, llvm, run)
            validate = validate or _judge(args.splits / "validation", pool, llvm, run)
            recorded = validation_of(run, args.trainer)
            by_iteration = {int(p.stem): p for p in snaps}
            best_k = sorted(by_iteration, key=lambda i: (recorded[i], i))[:args.members]
            members = {"last": sorted(by_iteration)[-args.members:], "best": sorted(best_k)}
            own_test = (result["test"] if val == result["validation_best"] else
                        judge(load_weights(by_iteration[iteration]), run / "work"))
            out = {"seconds": args.seconds, "iteration": iteration, "validation": val, "test": own_test,
                   "llvm_version": llvm, "seed": results["seed"], "committees": {}}
            for name, its in members.items():
                committee = logit_mean([load_weights(by_iteration[i]) for i in its])
                v = validate(committee, run / "work")["all"]["delta_percent"]
                t = judge(committee, run / "work")
                out["committees"][name] = {"members": its, "validation": v, "test": t}
                print(run, f"{name}-{args.members} {its}: validation {_pct(v)}, test {_pct(t['all']['delta_percent'])}"
                      f" (own: {iteration}, {_pct(val)}, {_pct(own_test['all']['delta_percent'])})", flush=True)
            better = min(out["committees"], key=lambda n: out["committees"][n]["validation"])
            take = better if out["committees"][better]["validation"] < val else None
            out["rule"] = take or "own"
            out["rule_test"] = out["committees"][take]["test"] if take else own_test
            (run / f"committee-{args.seconds:g}-k{args.members}.json").write_text(json.dumps(out, indent=2) + "\n")
            rows.append((run, out))
    llvm = sorted({o["llvm_version"] or "?" for _, o in rows})
    print(f"\ncommittees of {args.members} snapshots, cut at {args.seconds:g} s, LLVM {', '.join(llvm)}, "
          f"{len(rows)} runs")
    print("| run | own choice: validation / test | last-K: validation / test | best-K: validation / test "
          "| rule takes | rule's test |")
    print("|---|---|---|---|---|---|")
    for run, o in rows:
        c = o["committees"]
        cell = {n: f"{_pct(c[n]['validation'])} / {_pct(c[n]['test']['all']['delta_percent'])}" for n in c}
        print(f"| {run} | {_pct(o['validation'])} / {_pct(o['test']['all']['delta_percent'])} | {cell['last']} | "
              f"{cell['best']} | {o['rule']} | {_pct(o['rule_test']['all']['delta_percent'])} |")
    own = [o["test"]["all"]["delta_percent"] for _, o in rows]
    rule = [o["rule_test"]["all"]["delta_percent"] for _, o in rows]
    last = [o["committees"]["last"]["test"]["all"]["delta_percent"] for _, o in rows]
    best = [o["committees"]["best"]["test"]["all"]["delta_percent"] for _, o in rows]
    print(f"| mean (± half range) | {_spread(own)} | {_spread(last)} | {_spread(best)} | | {_spread(rule)} |")
    print(f"paired, rule - own: mean {float(np.mean(np.subtract(rule, own))):+.3f} points")


if __name__ == "__main__":
    main()

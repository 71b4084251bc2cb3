"""Can a model learn which callee move pays in a module it never saw?

The callee search (``mlopt train search --moves callee``) finds moves --
"never inline f" or "inline f wherever asked", every site of ``f`` at once
-- that shrink training modules by 1.5%, but imitating them per call site
does not carry to other packages. This study asks the question one level
up, where the search acts: a value model over callee moves.

For every module of each split (up to ``--max-decisions`` decisions): the
heuristic's (-Oz) compile, then each of its first ``--moves`` callee moves
(most sites changed first) compiled alone on top of the heuristic, in
process: the move's ``.text`` delta. A move's features are its direction,
its callee's site count and share inlined, the module's site count and
size, and the mean, max and min over the callee's sites of every logged
inliner feature (sign-log scaled, standardized on the training split).

The model is an MLP classifier (``mlopt.training.mlp_train``: "does this
move make the module smaller?"), trained on the training split's moves.
Applied to a module, it takes the move it rates likeliest to pay if that
rating clears a threshold, at most one move per module (so every figure
is a measured compile, not a sum of interacting moves). The threshold is
chosen on the validation split; the test split is scored once per seed
with it. The oracle takes each module's best measured move.

    python3 benchmarks/bench_callee_value.py --corpus /work/exp/splits --out /tmp/bcv --seeds 0,1,2

``--corpus`` holds the ``train``, ``validation`` and ``test`` corpora of
``mlopt corpus split``. Collected moves are kept in ``--out`` and reused
(``--recollect`` to compile again). Every figure is a total ``.text``
delta vs -Oz in percent over all the split's modules (negative = smaller).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MLOPT_LLVM", "19")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mlopt._native import default_llvm  # noqa: E402
from mlopt.corpus import corpus_entries  # noqa: E402
from mlopt.corpus.split import package_of  # noqa: E402
from mlopt.rollouts import RolloutTask, TraceDataset, run_rollouts  # noqa: E402
from mlopt.training.callee_search import callee_moves  # noqa: E402
from mlopt.training.mlp_train import fit, forward  # noqa: E402
from mlopt.workers import make_pool  # noqa: E402

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def collect(split: Path, moves: int, max_decisions: int, pool, llvm: int | None, vocab: str | None) -> dict:
    """Every module's heuristic size; per module with moves, each move's size and features."""
    entries = corpus_entries(split)
    starts = run_rollouts([RolloutTask(e, None, log=True, decisions=True, call_sites=True, llvm=llvm,
                                       ir2vec_vocab=vocab) for e in entries], pool=pool, quiet=True)
    base, tasks, owners, sites_of = {}, [], [], {}
    names = None
    for e, r in zip(entries, starts):
        if not r.ok:
            raise SystemExit(f"{e.name}: the heuristic's compile failed: {r.describe()}")
        v = r.value
        base[e.name] = v.text_size
        decisions = "".join("1" if x else "0" for x in v.policy_decisions.tolist())
        sites = [tuple(s) for s in v.call_sites]
        if not sites or len(decisions) > max_decisions:
            continue
        columns = TraceDataset.from_logs([v.module], [v.text_size], [v.log_bytes]).columns
        names = names or sorted(k for k in columns if len(columns[k]) == len(decisions))
        scalars = np.stack([columns[k].reshape(len(decisions), -1)[:, 0].astype(np.float64) for k in names
                            if columns[k].reshape(len(decisions), -1).shape[1] == 1], 1)
        vectors = [columns[k].reshape(len(decisions), -1).astype(np.float64) for k in names
                   if columns[k].reshape(len(decisions), -1).shape[1] > 1]  # IR2Vec's embeddings
        sites_of[e.name] = (sites, decisions, scalars, np.concatenate(vectors, 1) if vectors else None)
        for callee, d in callee_moves(sites, decisions)[:moves]:
            tasks.append(RolloutTask(e, None, forced_callees=((callee, d),), llvm=llvm, ir2vec_vocab=vocab))
            owners.append((e.name, callee, d))
    results = run_rollouts(tasks, pool=pool, quiet=False)
    rows = []
    for (module, callee, d), r in zip(owners, results):
        if not r.ok:
            raise SystemExit(f"{module}: compiling with {callee!r} forced to {d} failed: {r.describe()}")
        sites, decisions, scalars, vectors = sites_of[module]
        idx = [i for i, (_, c) in enumerate(sites) if c == callee]
        f = scalars[idx]
        rows.append({"module": module, "callee": callee, "d": d, "base": base[module], "size": r.value.text_size,
                     "n_sites": len(idx), "n_inlined": sum(decisions[i] == "1" for i in idx),
                     "module_sites": len(sites), "mean": f.mean(0).tolist(), "max": f.max(0).tolist(),
                     "min": f.min(0).tolist(),
                     "embedding": [] if vectors is None else vectors[idx].mean(0).round(4).tolist()})
    return {"features": names, "base": base, "rows": rows}


def featurize(rows: list[dict], embeddings: bool) -> np.ndarray:
    def slog(x):
        x = np.asarray(x, np.float64)
        return np.sign(x) * np.log1p(np.abs(x))

    return np.array([np.concatenate([[r["d"], np.log1p(r["n_sites"]), r["n_inlined"] / r["n_sites"],
                                      np.log1p(r["module_sites"]), np.log1p(r["base"])],
                                     slog(r["mean"]), slog(r["max"]), slog(r["min"]),
                                     r["embedding"] if embeddings else []])
                     for r in rows])


def auc(score: np.ndarray, y: np.ndarray) -> float:
    rank = np.empty(len(score))
    rank[np.argsort(score, kind="stable")] = np.arange(len(score))
    n1 = y.sum()
    return float((rank[y].sum() - n1 * (n1 - 1) / 2) / (n1 * (len(y) - n1)))


def applied(data: dict, p: np.ndarray, threshold: float) -> dict:
    """One move per module (the likeliest to pay, if above ``threshold``): the total delta and per package."""
    best: dict[str, tuple[float, int]] = {}
    for r, q in zip(data["rows"], p):
        if q > threshold and (r["module"] not in best or q > best[r["module"]][0]):
            best[r["module"]] = (q, r["size"] - r["base"])
    return summary(data, {m: d for m, (_, d) in best.items()})


def oracle(data: dict) -> dict:
    best: dict[str, int] = {}
    for r in data["rows"]:
        d = r["size"] - r["base"]
        if d < 0 and d < best.get(r["module"], 0):
            best[r["module"]] = d
    return summary(data, best)


def summary(data: dict, delta: dict[str, int]) -> dict:
    total = sum(data["base"].values())
    packages: dict[str, list[int]] = {}
    for m, b in data["base"].items():
        pk = packages.setdefault(package_of(m), [0, 0])
        pk[0] += b
        pk[1] += delta.get(m, 0)
    return {"delta_percent": 100.0 * sum(delta.values()) / total, "modules_changed": len(delta),
            "modules_smaller": sum(d < 0 for d in delta.values()),
            "packages": {k: 100.0 * d / b for k, (b, d) in sorted(packages.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="a directory with train/, validation/ and test/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--moves", type=int, default=10, help="callee moves compiled per module")
    ap.add_argument("--max-decisions", type=int, default=3000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--recollect", action="store_true")
    ap.add_argument("--llvm", type=int, help="the LLVM major that compiles (default: $MLOPT_LLVM, else 19)")
    ap.add_argument("--train-packages", help="a learning curve: train on K randomly chosen training packages "
                    "(per seed), for each K of this comma list (default: all)")
    ap.add_argument("--ir2vec-vocab", help="LLVM 22: an IR2Vec vocabulary; the features then include the mean "
                    "callee and caller embeddings at the callee's sites")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = {}
    with make_pool(args.workers, timeout=600) as pool:
        for split in ("train", "validation", "test"):
            path = args.out / f"moves-{split}.json"
            if args.recollect or not path.exists():
                start = time.perf_counter()
                path.write_text(json.dumps(collect(args.corpus / split, args.moves, args.max_decisions, pool,
                                                   args.llvm, args.ir2vec_vocab)))
                print(f"{split}: collected in {time.perf_counter() - start:.0f} s", file=sys.stderr)
            data[split] = json.loads(path.read_text())
    llvm = args.llvm or default_llvm()
    y = {s: np.array([r["size"] < r["base"] for r in d["rows"]]) for s, d in data.items()}
    report = {"llvm": llvm, "ir2vec_vocab": args.ir2vec_vocab, "moves_per_module": args.moves, "splits": {},
              "models": {}}
    print(f"LLVM {llvm}{'; IR2Vec vocabulary ' + args.ir2vec_vocab if args.ir2vec_vocab else ''}; callee moves "
          "compiled alone on top of -Oz's decisions; one move per module")
    for s, d in data.items():
        o = oracle(d)
        report["splits"][s] = {"modules": len(d["base"]), "modules_with_moves": len({r["module"] for r in d["rows"]}),
                               "moves": len(d["rows"]), "moves_smaller": int(y[s].sum()), "oracle": o}
        print(f"{s:10s} {len(d['base']):5d} modules, {len(d['rows']):5d} moves ({y[s].mean():.1%} smaller); "
              f"oracle {o['delta_percent']:+.3f}% ({o['modules_changed']} modules)")
    feature_sets = [("site features", False)]
    if any(r.get("embedding") for r in data["train"]["rows"]):
        feature_sets.append(("site features + IR2Vec", True))
    packages = sorted({package_of(r["module"]) for r in data["train"]["rows"]})
    sizes = [int(k) for k in args.train_packages.split(",")] if args.train_packages else [len(packages)]
    if any(not 0 < k <= len(packages) for k in sizes):
        ap.error(f"--train-packages: between 1 and {len(packages)} (the training packages with moves)")
    for name, embeddings in feature_sets:
        for k in sizes:
            label = name if k == len(packages) else f"{name}, {k} of {len(packages)} training packages"
            report["models"][label] = evaluate(data, y, embeddings, args, k, packages)
    (args.out / "callee_value.json").write_text(json.dumps(report, indent=1) + "\n")


def evaluate(data: dict, y: dict, embeddings: bool, args, k: int, packages: list[str]) -> list[dict]:
    """Per seed: the model trained on the moves of ``k`` of the training ``packages`` (a random choice per
    seed, all of them when ``k`` is their number), its threshold chosen on validation, test scored once."""
    raw = {s: featurize(d["rows"], embeddings) for s, d in data.items()}
    train_package = np.array([package_of(r["module"]) for r in data["train"]["rows"]])
    print(f"\n{raw['train'].shape[1]} inputs{' (with the mean IR2Vec embeddings)' if embeddings else ''}; "
          f"trained on {k} of {len(packages)} training packages")
    print("| seed | AUC train / validation / test | threshold (by validation) | validation | test | test modules "
          "changed (smaller) | worst test package |")
    print("|---|---|---|---|---|---|---|")
    seeds = []
    for seed in (int(v) for v in args.seeds.split(",")):
        chosen = set(np.random.default_rng([seed, k]).choice(packages, k, replace=False).tolist())
        keep = np.isin(train_package, sorted(chosen))
        mu, sd = raw["train"][keep].mean(0), raw["train"][keep].std(0) + 1e-9
        x = {s: ((v - mu) / sd).astype(np.float32) for s, v in raw.items()}
        rng = np.random.default_rng(seed)
        dims = [x["train"].shape[1], args.hidden, 2]
        layers = [(rng.normal(0, 1 / np.sqrt(a), (b, a)).astype(np.float32), np.zeros(b, np.float32))
                  for a, b in zip(dims, dims[1:])]
        fit(layers, x["train"][keep], y["train"][keep].astype(np.int64), epochs=args.epochs, batch_size=512,
            lr=3e-3, seed=seed)
        p = {}
        for s in data:
            logits, _ = forward(layers, x[s])
            z = logits - logits.max(1, keepdims=True)
            p[s] = (np.exp(z) / np.exp(z).sum(1, keepdims=True))[:, 1]
        val = {t: applied(data["validation"], p["validation"], t) for t in THRESHOLDS}
        t = min(THRESHOLDS, key=lambda t: (val[t]["delta_percent"], t))
        test = applied(data["test"], p["test"], t)
        worst = max(test["packages"].items(), key=lambda kv: kv[1])
        aucs = {s: auc(p[s], y[s]) for s in data if s != "train"}
        aucs["train"] = auc(p["train"][keep], y["train"][keep])
        seeds.append({"seed": seed, "train_packages": sorted(chosen), "train_moves": int(keep.sum()), "auc": aucs,
                      "threshold": t,
                      "validation": {str(k): v["delta_percent"] for k, v in val.items()}, "test": test})
        print(f"| {seed} | {aucs['train']:.3f} / {aucs['validation']:.3f} / {aucs['test']:.3f} | {t} | "
              f"{val[t]['delta_percent']:+.3f}% | **{test['delta_percent']:+.3f}%** | {test['modules_changed']} "
              f"({test['modules_smaller']}) | {worst[0]} {worst[1]:+.2f}% |")
    tests = [r["test"]["delta_percent"] for r in seeds]
    print(f"test mean {np.mean(tests):+.3f}% (±{(max(tests) - min(tests)) / 2:.3f}); test oracle "
          f"{oracle(data['test'])['delta_percent']:+.3f}%")
    return seeds


if __name__ == "__main__":
    main()

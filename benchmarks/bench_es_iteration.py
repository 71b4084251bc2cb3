"""Seconds per ES iteration, as ES runs on a corpus, against the same
iterations without one saving (measured in the same run, each side on a
fresh worker pool, so with cold worker caches alike). ``--without``:

- ``template-and-twins``: every candidate's ``.tflite`` built
  afresh (``_build_tflite``) instead of patching one built graph's weights
  (:mod:`mlopt.tflite.template`), and trajectory replay asking the model
  about every logged row instead of letting each candidate's numpy twin
  settle the rows no float32 order can flip
  (:meth:`mlopt.policy.LoadedPolicy.decide`);
- ``inliner-prefix``: every compile runs the optimizer's passes
  before the inliner again instead of starting from the module they left
  at the module's first compile in the worker ($MLOPT_INLINER_PREFIX_BYTES=0);
- ``trace-start``: a module's trajectory replay starts empty in
  each worker instead of from the heuristic's compile that ``mlopt trace``
  cached (``RolloutTask.start_from_trace=False``), so the first candidate
  to reach a module compiles it even when it decides as the heuristic.

    python3 benchmarks/bench_es_iteration.py splits/train prior.npz --iterations 6 [--without inliner-prefix] \
        [--validation splits/validation --validate-every 2] [--sigma 0.0751 --lr 0.030]
    python3 benchmarks/bench_es_iteration.py --quick [--without trace-start]

Both sides must train alike: the script fails if any iteration's training
delta, update or validation differs. Prints seconds per iteration and
the ratio; writes ``--json`` if given."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from mlopt.compiler.compile import PREFIX_BYTES_ENV
from mlopt.corpus import corpus_entries
from mlopt.policy import mlp
from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.training.environment import CompilerEnvironment
from mlopt.training.es import ESConfig, ESTrainer
from mlopt.workers import make_pool


def run(corpus: Path, prior: Path, args, *, current: bool) -> list[dict]:
    init = load_weights(prior)
    saved = mlp.MLPPolicy.to_tflite
    saved_env = os.environ.get(PREFIX_BYTES_ENV)
    twins = current or args.without != "template-and-twins"
    if not current and args.without == "template-and-twins":
        mlp.MLPPolicy.to_tflite = lambda self, logits_output=False: mlp._build_tflite(self, logits_output)
    if not current and args.without == "inliner-prefix":
        os.environ[PREFIX_BYTES_ENV] = "0"  # read by the pool's workers, started below
    try:
        with make_pool(args.workers) as pool, tempfile.TemporaryDirectory() as tmp:
            ds = trace_corpus(corpus, pool=pool, quiet=True)
            baseline = {m: float(v) for m, v in zip(ds.modules, ds.text_size)}
            train = [e for e in corpus_entries(corpus) if e.name in baseline]
            validation = []
            if args.validation:
                vs = trace_corpus(args.validation, pool=pool, quiet=True)
                baseline.update({m: float(v) for m, v in zip(vs.modules, vs.text_size)})
                validation = [e for e in corpus_entries(args.validation) if e.name in baseline]
            cfg = ESConfig(iterations=args.iterations, modules_per_perturbation=args.modules, seed=args.seed,
                           perturbations=args.pairs, lr=args.lr, sigma=args.sigma, objective=args.objective,
                           validate_every=args.validate_every if validation else 10**9)
            env = CompilerEnvironment(init.problem, pool, twins=twins,
                                      start_from_trace=current or args.without != "trace-start")
            trainer = ESTrainer(init, train, baseline, Path(tmp) / "run", cfg, env=env, validation=validation)
            out = []
            while trainer.iteration < cfg.iterations:
                start = time.perf_counter()
                m = trainer.step()
                m["seconds"] = time.perf_counter() - start
                out.append(m)
                print("current" if current else "baseline", m["iteration"], f"{m['seconds']:.1f} s",
                      f"train {m['train_delta_percent']:+.4f}%", f"hits {m['cache_hit_share']:.2f}", flush=True)
            shutil.rmtree(Path(tmp) / "run", ignore_errors=True)
            return out
    finally:
        mlp.MLPPolicy.to_tflite = saved
        if saved_env is None:
            os.environ.pop(PREFIX_BYTES_ENV, None)
        else:
            os.environ[PREFIX_BYTES_ENV] = saved_env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, nargs="?", help="the modules ES trains on (e.g. splits/train)")
    ap.add_argument("prior", type=Path, nargs="?", help="the starting policy (.npz), e.g. mlopt policy default-prior's")
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--modules", type=int, default=48)
    ap.add_argument("--objective", default="module-rank")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--sigma", type=float, default=ESConfig.sigma, help="ES's sigma (a run's calibrated one: "
                    "its config.json; default: %(default)s)")
    ap.add_argument("--pairs", type=int, default=None, help="antithetic pairs (default: from the parameter count)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--validation", type=Path, help="validate on these modules (e.g. splits/validation), "
                    "as training runs do")
    ap.add_argument("--validate-every", type=int, default=2)
    ap.add_argument("--without", choices=("template-and-twins", "inliner-prefix", "trace-start"),
                    default="template-and-twins",
                    help="the saving the baseline side goes without (default: %(default)s)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--quick", action="store_true",
                    help="the demo's reduced split (train marisa-trie, validate ujson), a 2-epoch BC start, "
                         "1 iteration of 2 pairs on 4 modules")
    args = ap.parse_args()
    if args.quick:
        from _common import quick_inputs

        splits, _, args.prior = quick_inputs(Path(tempfile.mkdtemp(prefix="mlopt-bench-es-iteration-")))
        args.corpus, args.validation = splits / "train", splits / "validation"
        args.iterations, args.modules, args.validate_every, args.pairs = 1, 4, 1, 2
    elif args.corpus is None or args.prior is None:
        ap.error("give CORPUS and PRIOR, or --quick")
    before = run(args.corpus, args.prior, args, current=False)
    after = run(args.corpus, args.prior, args, current=True)
    for a, b in zip(before, after):
        if any(a[k] != b[k] for k in ("train_delta_percent", "update_norm", "validation_delta_percent")):
            raise SystemExit(f"iteration {a['iteration']}: the two sides trained differently "
                             f"({a['train_delta_percent']} vs {b['train_delta_percent']})")
    sb = sum(m["seconds"] for m in before)
    sa = sum(m["seconds"] for m in after)
    print(f"{len(before)} iterations, identical training on both sides")
    label = {"template-and-twins": "fresh .tflite, replay by the model",
             "inliner-prefix": "every compile from the input",
             "trace-start": "replay starts empty"}[args.without]
    print(f"baseline ({label}): {sb / len(before):.2f} s per iteration")
    print(f"current  (everything on): {sa / len(after):.2f} s per iteration")
    print(f"ratio: {sb / sa:.2f}x the iterations per second")
    if args.json:
        report = {"without": args.without, "baseline": before, "current": after, "ratio": sb / sa}
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""``mlopt demo``: the whole job on the default corpus, end to end --
fetch and split the corpus, trace the heuristic, behavioral cloning, ES
from the BC policy (validated on part of the training split), export and
compile the best policy, and evaluate it on the held-out split through
stock clang-19 with the plugin, C and C++ separately and together."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._native import default_llvm
from ..corpus import PACKAGES, corpus_entries, fetch_corpus, split_corpus
from ..corpus.split import split_value
from ..errors import OutputExistsError
from ..evaluation import evaluate, plot_evaluation, plot_training_curve, summarize, verify_with_clang, write_csv
from ..policy import MLPPolicy
from ..problems import inlining
from ..rollouts import trace_corpus
from ..workers import make_pool
from .bc import train_bc
from .es import ESConfig, ESTrainer
from .run_dir import RunDir

SMALL_PACKAGES = ("lz4", "ujson", "marisa-trie")  # one C and two C++ packages: the reduced mode


@dataclass
class DemoConfig:
    small: bool = False
    iterations: int = 8
    perturbations: int = 8
    modules_per_perturbation: int = 16
    sigma: float = 0.02
    lr: float = 0.01
    bc_epochs: int = 10
    seed: int = 0
    workers: int | None = None

    @classmethod
    def reduced(cls) -> DemoConfig:
        return cls(small=True, iterations=1, perturbations=2, modules_per_perturbation=4, bc_epochs=5)


def demo_splits(splits: Path, small: bool = False) -> tuple[list, list, list]:
    """The default corpus (its reduced mode with ``small``), split into
    ``splits/train`` and ``splits/heldout`` (25%); the training split's
    validation part (20%, another seed) is returned apart:
    (train, validation, held-out) corpus entries."""
    corpus = fetch_corpus(None, list(SMALL_PACKAGES) if small else None).output
    split_corpus(corpus, splits, {"train": 0.75, "heldout": 0.25}, by="module", force=True)
    train_all = corpus_entries(splits / "train")
    heldout = corpus_entries(splits / "heldout")
    validation = [e for e in train_all if split_value(e.name, seed=1) < 0.2]
    train = [e for e in train_all if e not in validation] or train_all
    return train, validation, heldout


def language_totals(rows: list) -> dict:
    """Totals (``summarize``) of evaluation rows for C, C++ and all packages."""
    language = {p.name: p.language for p in PACKAGES}
    groups = {"C": [r for r in rows if language.get(r.package) == "c"],
              "C++": [r for r in rows if language.get(r.package) == "c++"], "all": rows}
    return {name: summarize(r)["total"] for name, r in groups.items() if r}


def run_demo(out: str | os.PathLike, config: DemoConfig, *, force: bool = False,
             say: Callable[[str], None] = print, quiet: bool = False) -> dict:
    out = Path(out)
    llvm = default_llvm()  # what this run compiles with (workers inherit $MLOPT_LLVM or the same PATH)
    if (out / "demo.json").exists() and not force:
        raise OutputExistsError(str(out / "demo.json"))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    times = {}

    def stage(name: str) -> None:
        times[name] = time.perf_counter() - t0
        say(f"[{times[name]:6.1f} s] {name}")

    stage("corpus: fetching and building the default corpus" + (" (reduced)" if config.small else ""))
    train, validation, heldout = demo_splits(out / "splits", config.small)
    say(f"         {len(train)} training, {len(validation)} validation, {len(heldout)} held-out modules")

    with make_pool(config.workers) as pool:
        stage("trace: the heuristic's decisions and sizes")
        ds = trace_corpus(out / "splits" / "train", pool=pool, quiet=quiet)
        ds.save(out / "trace.npz", force=True)
        baseline = {m: int(s) for m, s in zip(ds.modules, ds.text_size)}

        stage("behavioral cloning")
        bc = train_bc(ds, inlining.PROBLEM, epochs=config.bc_epochs, seed=config.seed)
        bc_run = RunDir(out / "bc", create=True, force=True)
        bc_run.save_policy(bc.policy, compile_so=False)
        say(f"         agreement with the heuristic: {100 * bc.train_agreement:.2f}% (train rows), "
            + ("n/a" if bc.heldout_agreement is None else f"{100 * bc.heldout_agreement:.2f}% (held-out modules)"))

        stage(f"evolution strategies: {config.iterations} iterations x {config.perturbations} antithetic pairs")
        es_dir = out / "es"
        RunDir(es_dir, create=True, force=True)
        es_cfg = ESConfig(iterations=config.iterations, perturbations=config.perturbations, sigma=config.sigma,
                          lr=config.lr, modules_per_perturbation=config.modules_per_perturbation, seed=config.seed)
        trainer = ESTrainer(bc.policy, [e for e in train if e.name in baseline], baseline, es_dir, es_cfg,
                            validation=[e for e in validation if e.name in baseline], pool=pool)

        def progress(m: dict) -> None:
            val = m["validation_delta_percent"]
            say(f"         iteration {m['iteration']}: reward {m['reward']:+.5f}, validation "
                f"{'n/a' if val is None else f'{val:+.3f}%'}, {m['evaluations_per_s']:.1f} evaluations/s")

        trainer.run(on_iteration=progress)
        start_val = trainer.start_validation
        best = es_dir / "best" / "policy.npz"
        chosen = MLPPolicy.load(best, problem=inlining.PROBLEM) if best.exists() else trainer.current_policy()
        stage("export and compile the policy")
        files = RunDir(es_dir).save_policy(chosen)

        stage(f"evaluation on the held-out split (in process, then stock clang-{llvm} + the plugin)")
        ev = evaluate(files["policy_so"], out / "splits" / "heldout", pool=pool, quiet=quiet)
    verified = verify_with_clang(ev.rows, heldout, files["policy_so"], threads=config.workers)
    summary = language_totals(ev.rows)
    write_csv(ev.rows, out / "heldout.csv")
    plots = []
    try:
        plots = [str(p) for p in plot_evaluation(ev.rows, out, "held-out .text delta vs -Oz")]
        if curve := plot_training_curve(es_dir, out):
            plots.append(str(curve))
    except Exception as e:  # plots are optional
        say(f"         no plots: {e}")
    stage("done")
    result = {"config": config.__dict__, "llvm": llvm, "modules": {"train": len(train), "validation": len(validation),
                                                     "heldout": len(heldout)},
              "bc": bc.report(), "es": {"iterations": trainer.iteration, "validation_start": start_val,
                                        "best_validation_delta_percent": trainer.best},
              "heldout": summary, "per_package": summarize(ev.rows)["packages"],
              "verify_with_clang": verified,
              "failed": ev.failed, "files": {**files, "heldout_csv": str(out / "heldout.csv"), "plots": plots},
              "seconds": times}
    (out / "demo.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_result(result: dict) -> str:
    lines = ["", f"{'held-out':<10}{'modules':>8}{'-Oz .text':>12}{'policy .text':>14}{'delta':>10}"
                 f"{'wins':>6}{'losses':>7}"]
    for name, t in result["heldout"].items():
        lines.append(f"{name:<10}{t['modules']:>8}{t['heuristic_text']:>12}{t['policy_text']:>14}"
                     f"{t['delta_percent']:>+9.2f}%{t['wins']:>6}{t['losses']:>7}")
    v = result["verify_with_clang"]
    llvm = result.get("llvm", 19)
    lines.append(f"stock clang-{llvm} + plugin: {v['modules'] - len(v['mismatches'])}/{v['modules']} modules "
                 "with the in-process .text size")
    lines.append(f"policy: {result['files'].get('policy_so')}")
    lines += [f"plot: {p}" for p in result["files"]["plots"]]
    flags = f"$(mlopt clang-flags --llvm {llvm} --model {result['files'].get('policy_so')})"
    lines.append(f"use it: clang-{llvm} -Oz {flags} -c a.c")
    return "\n".join(lines)

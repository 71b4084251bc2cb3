"""``mlopt demo``: the whole job on the default corpus, end to end --
fetch the corpus and split it by package into train / validation / test
(no package on two sides), trace the heuristic on the training split,
behavioral cloning (vocab and rows from the training split only), ES from
the BC policy (the best policy chosen on the validation split), export and
compile it, and evaluate it on the test split -- packages no step has
seen -- through stock clang with the plugin, C and C++ separately and
together. Every report names the LLVM major that produced it; every delta
is "% vs -Oz, negative = smaller".

Each package's call sites are counted first (one ``-Oz`` compile per
module, ``mlopt corpus call-sites``): the one-site-linkonce rule (inline a
``linkonce_odr`` callee ``-Oz`` declines at the only call its package has
of it) is in every policy compile of ES and of the evaluation, and its
per-package decisions file goes to stock clang beside the policy. The test
split is also scored without the rule and package-linked, so the report
says what the network does and what the rule does."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .._native import default_llvm
from ..corpus import PACKAGES, corpus_entries, fetch_corpus, split_corpus
from ..errors import OutputExistsError
from ..evaluation import evaluate, plot_evaluation, plot_training_curve, summarize, verify_with_clang, write_csv
from ..policy import MLPPolicy
from ..problems import inlining
from ..problems.inlining_linked.call_sites import PACKAGE_CALL_SITES_ENV
from ..rollouts import build_package_call_sites, trace_corpus
from ..workers import make_pool
from .bc import train_bc
from .es import ESConfig, ESTrainer
from .run_dir import RunDir, open_run

SMALL_PACKAGES = ("lz4", "ujson", "marisa-trie")  # one C and two C++ packages: the reduced mode

# Which package goes where (every package pinned: the split is a decision,
# not a hash accident of 7 names). Test: one C and one C++ library of
# different kinds (lz4, a compressor; marisa-trie, a trie), never looked at
# while training or choosing. Validation: one C and one C++ package again
# (zstandard: one large C module; ujson: double-conversion in C++), few
# modules, so validating every ES iteration stays cheap. Training: the
# rest, most of the modules (brotli and pycryptodome in C, jsonnet in C++).
# The reduced mode's three packages: marisa-trie (the most modules) to
# train, ujson to validate, lz4 to test.
SPLIT = {"lz4": "test", "marisa-trie": "test", "zstandard": "validation", "ujson": "validation",
         "brotli": "train", "pycryptodome": "train", "jsonnet": "train"}
SMALL_SPLIT = {"marisa-trie": "train", "ujson": "validation", "lz4": "test"}
SIDES = {"train": 0.7, "validation": 0.15, "test": 0.15}  # every package is pinned: only the names count


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


def demo_packages(small: bool = False) -> dict[str, list[str]]:
    """The packages of each side (train, validation, test)."""
    split = SMALL_SPLIT if small else SPLIT
    return {side: sorted(p for p, s in split.items() if s == side) for side in SIDES}


def demo_splits(splits: Path, small: bool = False) -> tuple[list, list, list]:
    """The default corpus (its reduced mode with ``small``), split by package
    into ``splits/train``, ``splits/validation`` and ``splits/test`` as
    :data:`SPLIT` (:data:`SMALL_SPLIT`) pins them: (train, validation, test)
    corpus entries."""
    corpus = fetch_corpus(None, list(SMALL_PACKAGES) if small else None).output
    split_corpus(corpus, splits, SIDES, by="package", assign=SMALL_SPLIT if small else SPLIT, force=True)
    train, validation, test = (corpus_entries(splits / side) for side in SIDES)
    return train, validation, test


def language_totals(rows: list) -> dict:
    """Totals (``summarize``) of evaluation rows for C, C++ and all packages."""
    language = {p.name: p.language for p in PACKAGES}
    groups = {"C": [r for r in rows if language.get(r.package) == "c"],
              "C++": [r for r in rows if language.get(r.package) == "c++"], "all": rows}
    return {name: summarize(r)["total"] for name, r in groups.items() if r}


@contextmanager
def _environment(name: str, value: str):
    """``$name`` set to ``value`` for the block (worker processes started in it inherit it), then as before."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


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
    train, validation, test = demo_splits(out / "splits", config.small)
    packages = demo_packages(config.small)
    say("         " + "; ".join(f"{side}: {len(e)} modules ({', '.join(packages[side])})"
                                for side, e in zip(SIDES, (train, validation, test))))

    # the rule's table: workers read it when a policy compiles, so it is named before they start
    sites = out / "package-call-sites.npz"
    with _environment(PACKAGE_CALL_SITES_ENV, str(sites.resolve())), make_pool(config.workers) as pool:
        stage("package call sites: each package's -Oz calls, for the one-site-linkonce rule")
        table = build_package_call_sites(train + validation + test, pool=pool, quiet=quiet, skip_failed=True)
        table.save(sites)
        rules = out / "rules"
        rules.mkdir(exist_ok=True)
        rule = {"table": str(sites), "rules_dir": str(rules),
                "callees": {p: table.write_callee_decisions(p, rules / f"{p}.txt") for p in table.packages}}
        say("         the rule inlines " + ", ".join(f"{n} callees in {p}" for p, n in rule["callees"].items()))

        stage(f"trace: the heuristic's decisions and sizes (LLVM {llvm})")
        ds = trace_corpus(out / "splits" / "train", pool=pool, quiet=quiet)
        ds.save(out / "trace.npz", force=True)
        baseline = {m: int(s) for m, s in zip(ds.modules, ds.text_size)}
        # of the validation split only the -Oz sizes: its rows never reach BC or the vocab
        val_ds = trace_corpus(out / "splits" / "validation", pool=pool, quiet=quiet)
        baseline.update({m: int(s) for m, s in zip(val_ds.modules, val_ds.text_size)})

        stage("behavioral cloning (training split only)")
        bc = train_bc(ds, inlining.PROBLEM, epochs=config.bc_epochs, seed=config.seed)
        bc_run = open_run(out / "bc", force=True)
        bc_run.save_policy(bc.policy, compile_so=False)
        held = ("n/a" if bc.heldout_agreement is None else
                f"{100 * bc.heldout_agreement:.2f}% on {bc.heldout_rows} rows of {len(bc.heldout_modules)} "
                f"held-out training modules ({', '.join(bc.heldout_units)})")
        say(f"         agreement with the heuristic: {100 * bc.train_agreement:.2f}% on {bc.train_rows} rows, {held}")

        stage(f"evolution strategies: {config.iterations} iterations x {config.perturbations} antithetic pairs, "
              "the rule in every rollout")
        es_dir = out / "es"
        open_run(es_dir, force=True)
        es_cfg = ESConfig(iterations=config.iterations, perturbations=config.perturbations, sigma=config.sigma,
                          lr=config.lr, modules_per_perturbation=config.modules_per_perturbation, seed=config.seed)
        trainer = ESTrainer(bc.policy, [e for e in train if e.name in baseline], baseline, es_dir, es_cfg,
                            validation=[e for e in validation if e.name in baseline], pool=pool)

        def progress(m: dict) -> None:
            val = m["validation_delta_percent"]
            say(f"         iteration {m['iteration']}: training {-100 * m['reward']:+.3f}% (mean per sampled "
                f"module), validation {'n/a' if val is None else f'{val:+.3f}%'} vs -Oz, "
                f"{m['evaluations_per_s']:.1f} evaluations/s")

        trainer.run(on_iteration=progress)
        start_val = trainer.start_validation
        best = es_dir / "best" / "policy.npz"
        chosen = MLPPolicy.load(best, problem=inlining.PROBLEM) if best.exists() else trainer.current_policy()
        stage("export and compile the policy")
        files = RunDir(es_dir).save_policy(chosen)

        stage(f"evaluation on the test split with the rule (in process, then stock clang-{llvm} + the plugin)")
        ev = evaluate(files["policy_so"], out / "splits" / "test", pool=pool, quiet=quiet, linked=True)
    verified = verify_with_clang(ev.rows, test, files["policy_so"], threads=config.workers,
                                 package_call_sites=str(sites))
    stage("the policy alone on the test split (no rule)")
    alone = evaluate(files["policy_so"], out / "splits" / "test", workers=config.workers, quiet=quiet)
    summary = language_totals(ev.rows)
    write_csv(ev.rows, out / "test.csv")
    plots = []
    try:
        plots = [str(p) for p in plot_evaluation(ev.rows, out, f"test split ({', '.join(packages['test'])})",
                                                 llvm=llvm)]
        if curve := plot_training_curve(es_dir, out, llvm=llvm):
            plots.append(str(curve))
    except Exception as e:  # plots are optional
        say(f"         no plots: {e}")
    stage("done")
    result = {"config": config.__dict__, "llvm": llvm, "packages": packages,
              "modules": {"train": len(train), "validation": len(validation), "test": len(test)},
              "bc": bc.report(), "es": {"iterations": trainer.iteration, "validation_start": start_val,
                                        "best_validation_delta_percent": trainer.best},
              "test": summary, "per_package": summarize(ev.rows)["packages"],
              "test_linked": ev.linked["total"] if ev.linked else None,
              "test_policy_alone": language_totals(alone.rows), "package_rule": rule,
              "verify_with_clang": verified,
              "failed": ev.failed + alone.failed, "files": {**files, "test_csv": str(out / "test.csv"), "plots": plots},
              "seconds": times}
    (out / "demo.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_result(result: dict) -> str:
    llvm = result.get("llvm", 19)
    with_rule = " (the policy with the package rule)" if result.get("package_rule") else ""
    lines = ["", f"test split ({', '.join(result['packages']['test'])}), LLVM {llvm}: "
                 f".text delta % vs -Oz, negative = smaller{with_rule}",
             f"{'test':<10}{'modules':>8}{'-Oz .text':>12}{'policy .text':>14}{'delta':>10}{'wins':>6}{'losses':>7}"]
    for name, t in result["test"].items():
        lines.append(f"{name:<10}{t['modules']:>8}{t['heuristic_text']:>12}{t['policy_text']:>14}"
                     f"{t['delta_percent']:>+9.2f}%{t['wins']:>6}{t['losses']:>7}")
    if linked := result.get("test_linked"):
        lines.append(f"{'linked':<10}{'':>8}{linked['heuristic_text']:>12}{linked['policy_text']:>14}"
                     f"{linked['delta_percent']:>+9.2f}%   (each package's COMDAT code once, as a linker keeps it)")
    rule = result.get("package_rule")
    if rule:
        alone = result["test_policy_alone"]["all"]
        test = result["packages"]["test"]
        lines.append(f"with the package rule: the rule inlined {sum(rule['callees'][p] for p in test)} callees "
                     f"at their package's only call; the policy alone: {alone['delta_percent']:+.2f}%")
    v = result["verify_with_clang"]
    lines.append(f"stock clang-{llvm} + plugin: {v['modules'] - len(v['mismatches'])}/{v['modules']} modules "
                 "with the in-process .text size")
    lines.append(f"policy: {result['files'].get('policy_so')}")
    lines += [f"plot: {p}" for p in result["files"]["plots"]]
    model = f"--model {result['files'].get('policy_so')}"
    if rule:
        flags = f"$(mlopt clang-flags --llvm {llvm} {model} --callee-decisions {rule['rules_dir']}/PACKAGE.txt)"
        lines.append(f"use it: clang-{llvm} -Oz {flags} -c a.cc")
        lines.append("  a rule file for your own package: mlopt corpus call-sites CORPUS -o sites.npz "
                     "--callee-decisions rules/")
    else:
        lines.append(f"use it: clang-{llvm} -Oz $(mlopt clang-flags --llvm {llvm} {model}) -c a.c")
    return "\n".join(lines)

"""The recommended recipe for inlining for size, on any corpus split by
package into train / validation / test (no package on two sides):

1. the package pre-pass: each package's ``-Oz`` call sites (one compile per
   module); the one-site-linkonce rule inlines a ``linkonce_odr`` callee
   ``-Oz`` declines at the only call its package has of it. Its decisions
   go to ``rules/<package>.txt``, the files stock clang takes;
2. training (optional): trace the heuristic on the training split,
   behavioral cloning, then ES with the rule in every rollout, the best
   iterate chosen on validation;
3. the gate: the trained policy (with the rule) is shipped only when it is
   smaller than the rule alone on the validation split, package-linked;
   otherwise the rule alone is shipped and the policy is kept as the
   experiment it is;
4. the test split, never seen by any step: the rule alone, the rule with
   the policy and the policy alone, each per module and package-linked,
   C and C++ apart; the shipped configuration recompiled by stock clang
   with the plugin, every module's ``.text`` checked against the engine's.

Every figure names the LLVM major that produced it; every delta is "% vs
-Oz, negative = smaller". ``run_recipe`` returns (and writes as
``recipe.json``) what :func:`format_recipe` prints."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from .._native import default_llvm
from ..corpus import corpus_entries
from ..corpus.debian import language_of
from ..corpus.split import package_of
from ..errors import CorpusError, OutputExistsError
from ..evaluation import evaluate, plot_evaluation, plot_training_curve, summarize, verify_with_clang, write_csv
from ..problems import get, inlining, load_weights
from ..problems.inlining_default.prior import with_default_prior
from ..problems.inlining_linkage.rule import with_linkage_input
from ..problems.inlining_linked.call_sites import PACKAGE_CALL_SITES_ENV
from ..problems.inlining_linked.shares import LINKED_SHARES_ENV
from ..rollouts import build_linked_shares, build_package_call_sites, trace_corpus
from ..workers import make_pool
from .bc import train_bc
from .es import ESConfig, ESTrainer
from .es_recipe import defaults, recipe_sigma
from .run_dir import RunDir, open_run

SIDES = ("train", "validation", "test")
LINKED = get("inlining-linked")  # the problem ES trains: the 38 inputs and the callee's linkage, paid the linked share
PRIOR_MARGIN = 20.0  # the heuristic's carried vote (mlopt policy default-prior's default)


@dataclass
class RecipeConfig:
    """The recipe's budget; ES's settings are ``mlopt train es``'s defaults (:mod:`.es_recipe`).
    ``train=False``: the rule alone, no training. ``perturbations``/``modules`` None: the
    recipe's (pairs from the network's size, 48 modules an iteration)."""

    train: bool = True
    iterations: int = 10
    perturbations: int | None = None
    modules: int | None = None
    bc_epochs: int = 10
    seed: int = 0
    workers: int | None = None


def package_languages(entries: list, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """``c`` or ``c++`` per package: ``known`` where it names the package, else
    ``c++`` when any of its modules' ``.cmd`` is a C++ compile."""
    known = dict(known or {})
    out: dict[str, str] = {}
    for e in entries:
        package = package_of(e.name)
        if package in known:
            out[package] = known[package]
            continue
        cmd = e.bitcode_path.with_suffix(".cmd")
        language = language_of(cmd.read_bytes()) if e.command is None and cmd.exists() else "c"
        if out.get(package) != "c++":
            out[package] = language
    return out


def language_totals(rows: list, languages: Mapping[str, str]) -> dict:
    """Totals (``summarize``) of evaluation rows for C, C++ and all packages."""
    groups = {"C": [r for r in rows if languages.get(r.package) == "c"],
              "C++": [r for r in rows if languages.get(r.package) == "c++"], "all": rows}
    return {name: summarize(r)["total"] for name, r in groups.items() if r}


def _linked_language_totals(linked: dict | None, languages: Mapping[str, str]) -> dict:
    """The package-linked estimate's totals for C, C++ and all packages."""
    if not linked:
        return {}
    out = {}
    for name, keep in (("C", "c"), ("C++", "c++"), ("all", None)):
        rows = [t for p, t in linked["packages"].items() if keep is None or languages.get(p) == keep]
        if rows:
            h, p = sum(t["heuristic_text"] for t in rows), sum(t["policy_text"] for t in rows)
            out[name] = {"heuristic_text": h, "policy_text": p, "delta": p - h,
                         "delta_percent": 100.0 * (p - h) / h if h else 0.0}
    return out


def _scored(ev, languages: Mapping[str, str]) -> dict:
    """An evaluation as the recipe reports it: per-module and package-linked totals by language."""
    return {"per_module": language_totals(ev.rows, languages),
            "linked": _linked_language_totals(ev.linked, languages),
            "per_package": summarize(ev.rows)["packages"],
            "linked_per_package": ev.linked["packages"] if ev.linked else {},
            "failed": [list(f) for f in ev.failed]}


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


def run_recipe(splits: str | os.PathLike, out: str | os.PathLike, config: RecipeConfig, *,
               languages: Mapping[str, str] | None = None, force: bool = False,
               say: Callable[[str], None] = print, quiet: bool = False, result_name: str = "recipe.json",
               extra: Mapping | None = None) -> dict:
    """The recipe on ``splits/train``, ``splits/validation`` and ``splits/test``
    (corpora split by package, e.g. by ``mlopt corpus split``), writing to
    ``out``. ``languages``: package -> ``c``/``c++`` where known (else read
    from the modules' commands)."""
    splits, out = Path(splits), Path(out)
    llvm = default_llvm()  # what this run compiles with (workers inherit $MLOPT_LLVM or the same PATH)
    if (out / result_name).exists() and not force:
        raise OutputExistsError(str(out / result_name))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    times: dict[str, float] = {}

    def stage(name: str) -> None:
        times[name] = time.perf_counter() - t0
        say(f"[{times[name]:6.1f} s] {name}")

    entries = {side: corpus_entries(splits / side) for side in SIDES}
    empty = [s for s in SIDES if not entries[s]]
    if empty:
        raise CorpusError(f"{splits / empty[0]}: no module (the recipe needs train, validation and test packages)")
    train, validation, test = (entries[s] for s in SIDES)
    packages = {s: sorted({package_of(e.name) for e in entries[s]}) for s in SIDES}
    languages = package_languages(train + validation + test, languages)
    say("         " + "; ".join(f"{s}: {len(entries[s])} modules ({', '.join(packages[s])})" for s in SIDES))

    sites = out / "package-call-sites.npz"
    result: dict = {"llvm": llvm, "config": asdict(config), "packages": packages,
                    "modules": {s: len(entries[s]) for s in SIDES}, "languages": languages, **(extra or {})}
    # the tables workers read when a policy compiles are named before they start
    with _environment(PACKAGE_CALL_SITES_ENV, str(sites.resolve())), \
            _environment(LINKED_SHARES_ENV, str((out / "linked-shares.npz").resolve())), \
            make_pool(config.workers) as pool:
        stage("package call sites: each package's -Oz calls, for the one-site-linkonce rule")
        table = build_package_call_sites(train + validation + test, pool=pool, quiet=quiet, skip_failed=True)
        table.save(sites)
        rules = out / "rules"
        rules.mkdir(exist_ok=True)
        result["rule"] = {"table": str(sites), "rules_dir": str(rules),
                          "callees": {p: table.write_callee_decisions(p, rules / f"{p}.txt") for p in table.packages}}
        counts = result["rule"]["callees"]
        say("         the rule inlines " + ", ".join(f"{n} callees in {p}" for p, n in counts.items()))

        stage(f"the rule alone on the validation and test splits (LLVM {llvm})")
        rule_val = evaluate(None, splits / "validation", pool=pool, quiet=quiet, linked=True, rule=table)
        rule_test = evaluate(None, splits / "test", pool=pool, quiet=quiet, linked=True, rule=table)
        result["validation"] = {"rule": _linked_language_totals(rule_val.linked, languages)["all"]["delta_percent"]}
        result["test"] = {"rule": _scored(rule_test, languages)}
        policy_so = None
        if config.train:
            policy_so, chosen_val, trained = _train(splits, out, config, train, validation, pool, stage, say, quiet)
            result.update(trained)
            result["validation"]["rule_and_policy"] = chosen_val
            stage("the trained policy with the rule, and alone, on the test split")
            with_rule = evaluate(policy_so, splits / "test", pool=pool, quiet=quiet, linked=True)
            result["test"]["rule_and_policy"] = _scored(with_rule, languages)
    if policy_so is not None:
        with _environment(PACKAGE_CALL_SITES_ENV, ""), make_pool(config.workers) as pool:
            alone = evaluate(policy_so, splits / "test", pool=pool, quiet=quiet, linked=True)
        result["test"]["policy_alone"] = _scored(alone, languages)

    ships_policy = policy_so is not None and result["validation"]["rule_and_policy"] < result["validation"]["rule"]
    result["shipped"] = "rule_and_policy" if ships_policy else "rule"
    shipped_eval = with_rule if ships_policy else rule_test
    stage(f"stock clang-{llvm} + the plugin on the test split: the shipped configuration, module by module")
    result["verify_with_clang"] = verify_with_clang(shipped_eval.rows, test, policy_so if ships_policy else None,
                                                    threads=config.workers, package_call_sites=str(sites))
    write_csv(shipped_eval.rows, out / "test.csv")
    plots = []
    try:
        plots = [str(p) for p in plot_evaluation(shipped_eval.rows, out, f"test split ({', '.join(packages['test'])})",
                                                 llvm=llvm)]
        if config.train and (curve := plot_training_curve(out / "es", out, llvm=llvm)):
            plots.append(str(curve))
    except Exception as e:  # plots are optional
        say(f"         no plots: {e}")
    stage("done")
    result["files"] = {**result.get("files", {}), "test_csv": str(out / "test.csv"), "plots": plots}
    result["failed"] = sorted({tuple(f) for ev in result["test"].values() for f in ev["failed"]})
    result["seconds"] = times
    (out / result_name).write_text(json.dumps(result, indent=2) + "\n")
    return result


def _train(splits: Path, out: Path, config: RecipeConfig, train: list, validation: list, pool, stage, say,
           quiet: bool) -> tuple[str, float, dict]:
    """ES as measured best with the rule: from BC's network with the heuristic's vote carried (so the
    start decides exactly as ``-Oz``: with the rule, the start *is* the rule alone), the callee's linkage
    as an input, paid each module's linked share, the rule in every rollout; the iterate chosen on
    validation, exported and compiled, and scored there package-linked with the rule:
    (policy.so, its validation delta, report)."""
    llvm = default_llvm()
    stage(f"trace: the heuristic's decisions on the training split (LLVM {llvm}); the packages' -Oz COMDAT code")
    # with the callee's linkage logged: BC reads its 38 features of it, the calibration the start's 39
    ds = trace_corpus(splits / "train", pool=pool, quiet=quiet, callee_linkage=True)
    ds.save(out / "trace.npz", force=True)
    # the linked-share table over training and validation (named in $MLOPT_LINKED_SHARES before the pool started)
    shares, baseline = build_linked_shares(train + validation, pool=pool, quiet=quiet, skip_failed=True)
    shares.save(os.environ[LINKED_SHARES_ENV])

    stage("behavioral cloning (training split only), then the heuristic's vote carried: the start decides as -Oz")
    bc = train_bc(ds, inlining.PROBLEM, epochs=config.bc_epochs, seed=config.seed)
    bc_run = open_run(out / "bc", force=True)
    bc_run.write_config({"kind": "bc", "problem": inlining.PROBLEM.name, "epochs": config.bc_epochs,
                         "seed": config.seed, "of": "mlopt recipe"})
    bc_run.save_policy(bc.policy, compile_so=False)
    held = ("n/a" if bc.heldout_agreement is None else
            f"{100 * bc.heldout_agreement:.2f}% on {bc.heldout_rows} rows of {len(bc.heldout_modules)} "
            f"held-out training modules")
    say(f"         BC's agreement with the heuristic: {100 * bc.train_agreement:.2f}% on {bc.train_rows} rows, {held}")
    with_linkage_input(with_default_prior(bc.policy, PRIOR_MARGIN)).save(out / "start.npz", overwrite=True)
    start = load_weights(out / "start.npz", LINKED.name)

    recipe = defaults(LINKED)
    calibrated = recipe_sigma(start, ds, set(baseline), recipe["lr"])
    es_cfg = ESConfig(iterations=config.iterations, perturbations=config.perturbations, sigma=calibrated.sigma,
                      lr=calibrated.lr, modules_per_perturbation=config.modules or recipe["modules"],
                      objective=recipe["objective"], seed=config.seed)
    stage(f"evolution strategies ({es_cfg.objective}, sigma {es_cfg.sigma:.3g}: a perturbation changes "
          f"{100 * calibrated.calibration['share']:.1f}% of the training modules): {config.iterations} iterations "
          f"x {es_cfg.perturbations or 'default'} antithetic pairs x {es_cfg.modules_per_perturbation} modules, "
          "the rule in every rollout, the best iterate chosen on validation")
    es_dir = out / "es"
    open_run(es_dir, force=True).write_config({"kind": "es", "problem": LINKED.name, "init": str(out / "start.npz"),
                                               "of": "mlopt recipe", **asdict(es_cfg)})
    trainer = ESTrainer(start, [e for e in train if e.name in baseline], baseline, es_dir, es_cfg,
                        validation=[e for e in validation if e.name in baseline], pool=pool)

    def progress(m: dict) -> None:
        val = m["validation_delta_percent"]
        say(f"         iteration {m['iteration']}: validation {'n/a' if val is None else f'{val:+.3f}%'} "
            f"(linked share, with the rule, vs -Oz), {m['evaluations_per_s']:.1f} evaluations/s")

    trainer.run(on_iteration=progress)
    best = es_dir / "best" / "policy.npz"
    chosen = load_weights(best, LINKED.name) if best.exists() else trainer.current_policy()
    stage("export and compile the chosen policy; validation with the rule, package-linked")
    files = RunDir(es_dir).save_policy(chosen)
    val = evaluate(files["policy_so"], splits / "validation", pool=pool, quiet=quiet, linked=True)
    chosen_val = val.linked["total"]["delta_percent"]
    report = {"bc": bc.report(), "es": {"iterations": trainer.iteration, "validation_start": trainer.start_validation,
                                        "best_validation_delta_percent": trainer.best, "problem": LINKED.name,
                                        "config": asdict(es_cfg), "sigma_calibration": calibrated.calibration},
              "files": files}
    return files["policy_so"], chosen_val, report


_ROWS = (("rule", "-Oz + the rule (no model)"), ("rule_and_policy", "-Oz + the rule + the trained policy"),
         ("policy_alone", "the trained policy alone"))


def format_recipe(result: dict) -> str:
    """The recipe's report: the test split's table, the validation gate, what ships and how to use it."""
    llvm = result["llvm"]
    test = result["test"]
    langs = [k for k in ("C", "C++", "all") if k in test["rule"]["per_module"]]
    lines = ["", f"LLVM {llvm}, test packages no step has seen ({', '.join(result['packages']['test'])}): "
                 ".text % vs -Oz, negative = smaller",
             f"{'':<38}" + "".join(f"{k:>9}" for k in langs) + f"{'linked':>9}"]
    for key, label in _ROWS:
        if key in test:
            t = test[key]
            lines.append(f"{label:<38}" + "".join(f"{t['per_module'][k]['delta_percent']:>+8.2f}%" for k in langs)
                         + f"{t['linked']['all']['delta_percent']:>+8.2f}%")
    lines.append("(linked: each package's COMDAT code once, as a linker keeps it; the others sum the modules)")
    callees = sum(result["rule"]["callees"].get(p, 0) for p in result["packages"]["test"])
    lines.append(f"the rule: {callees} callees inlined at their package's only call on the test packages")
    val = result["validation"]
    rules_dir = result["rule"]["rules_dir"]
    if "rule_and_policy" in val:
        lines.append(f"validation ({', '.join(result['packages']['validation'])}), linked: the rule "
                     f"{val['rule']:+.2f}%, the rule + the trained policy {val['rule_and_policy']:+.2f}%")
    if result["shipped"] == "rule_and_policy":
        lines.append("shipped: the rule + the trained policy (it beat the rule alone on validation)")
    elif "rule_and_policy" in val:
        lines.append(f"shipped: the rule alone; training did not beat it on validation (the trained policy, "
                     f"{result['files']['policy_so']}, is kept as an experiment)")
    else:
        lines.append("shipped: the rule alone (no training)")
    v = result["verify_with_clang"]
    lines.append(f"stock clang-{llvm} + plugin, shipped configuration: {v['modules'] - len(v['mismatches'])}/"
                 f"{v['modules']} test modules with the in-process .text size")
    lines += [f"plot: {p}" for p in result["files"]["plots"]]
    model = f" --model {result['files']['policy_so']}" if result["shipped"] == "rule_and_policy" else ""
    lines.append(f"use it: clang-{llvm} -Oz $(mlopt clang-flags --llvm {llvm}{model} --callee-decisions "
                 f"{rules_dir}/PACKAGE.txt) -c a.cc")
    lines.append("  rule files for your code: mlopt corpus call-sites CORPUS -o sites.npz --callee-decisions rules/")
    return "\n".join(lines)

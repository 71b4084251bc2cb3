"""The recipe (``mlopt recipe``) and the main job (``mlopt demo``, the recipe
on the default corpus): the report's figures agree with the files and with
independent compiles, the rule's share and the training's are apart, the
validation gate decides what ships, and the shipped configuration is what
stock clang with the plugin builds."""

from __future__ import annotations

import csv
import json

import pytest

import mlopt
from mlopt.rollouts import TraceDataset

pytestmark = [pytest.mark.llvm, pytest.mark.network, pytest.mark.slow]


def _rows(path) -> list[dict]:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return list(csv.DictReader(f))


def test_demo_reduced_mode_outputs_are_consistent(tmp_path, capsys):
    """`mlopt demo --small`: corpus -> package split -> the rule -> trace -> BC -> ES ->
    the gate -> the test split through stock clang; its numbers agree with its files,
    and no package is on two sides."""
    from mlopt._native import default_llvm
    from mlopt.cli import main
    from mlopt.corpus import package_of, read_description
    from mlopt.problems.inlining_linked.call_sites import PackageCallSites

    assert main(["demo", "--small", "-o", str(tmp_path / "d"), "--quiet", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verify_with_clang"]["mismatches"] == [] and not result["failed"]
    assert result["llvm"] == default_llvm()
    assert result["packages"] == {"train": ["marisa-trie"], "validation": ["ujson"], "test": ["lz4"]}
    sides = {side: read_description(tmp_path / "d" / "splits" / side)["modules"] for side in result["packages"]}
    for side, modules in sides.items():
        assert {package_of(m) for m in modules} == set(result["packages"][side])
        assert len(modules) == result["modules"][side] > 0
    # BC and its vocab saw the training split only
    trace = TraceDataset.load(tmp_path / "d" / "trace.npz")
    assert trace.modules == sides["train"]
    assert result["bc"]["train_rows"] + result["bc"]["heldout_rows"] == len(trace)
    assert result["bc"]["heldout_module_count"] > 0 and result["bc"]["train_agreement"] > 0.8
    assert result["es"]["iterations"] == 1
    assert result["es"]["best_validation_delta_percent"] <= result["es"]["validation_start"]
    policy = mlopt.load_policy(result["files"]["policy_so"])
    # ES trained inlining-linked (the linkage input, paid the linked share); a loaded policy's problem is
    # read from its inputs, which are inlining-linkage's
    assert result["es"]["problem"] == "inlining-linked" and policy.problem.name == "inlining-linkage"
    assert {p.rsplit("/", 1)[1] for p in result["files"]["plots"]} >= {"delta_distribution.png",
                                                                       "training_curve.png"}
    # the rule: counted over every package, a decisions file per package for stock clang
    rule = result["rule"]
    table = PackageCallSites.load(rule["table"])
    assert sorted(table.packages) == ["lz4", "marisa-trie", "ujson"]
    for package, n in rule["callees"].items():
        lines = (tmp_path / "d" / "rules" / f"{package}.txt").read_text().splitlines()
        assert len(lines) == n + 1 and n == len(table.package_decisions(package))
    assert rule["callees"]["marisa-trie"] > 0 and rule["callees"]["lz4"] == 0
    test = result["test"]
    # lz4 is C: no linkonce_odr callee, so the rule alone is -Oz exactly, and the policy with the rule
    # is the policy alone
    assert test["rule"]["per_module"]["all"]["delta"] == 0 == test["rule"]["linked"]["all"]["delta"]
    assert test["rule_and_policy"]["per_module"] == test["policy_alone"]["per_module"]
    # the gate: the policy ships only when it beat the rule on validation
    val = result["validation"]
    assert result["shipped"] == ("rule_and_policy" if val["rule_and_policy"] < val["rule"] else "rule")
    # the shipped configuration's rows are the CSV, and stock clang gave each its size
    rows = _rows(result["files"]["test_csv"])
    shipped = test[result["shipped"]]["per_module"]["all"]
    assert shipped["modules"] == len(rows) == result["modules"]["test"] == result["verify_with_clang"]["modules"]
    assert {r["module"] for r in rows} == set(sides["test"])
    assert shipped["policy_text"] == sum(int(r["policy_text"]) for r in rows)
    assert shipped["heuristic_text"] == sum(int(r["heuristic_text"]) for r in rows)
    from mlopt.training.demo import format_result

    text = format_result(result)
    assert f"LLVM {result['llvm']}, test packages no step has seen (lz4)" in text
    assert "-Oz + the rule (no model)" in text and "the trained policy alone" in text
    assert ("shipped: the rule alone; training did not beat it on validation" in text) == (
        result["shipped"] == "rule")
    before = (tmp_path / "d" / "demo.json").read_bytes()
    assert main(["demo", "--small", "-o", str(tmp_path / "d")]) == 1  # never over an earlier demo silently
    out = capsys.readouterr()
    assert out.out == "" and "demo.json exists" in out.err and (tmp_path / "d" / "demo.json").read_bytes() == before
    assert main(["demo", "--small", "-o", str(tmp_path / "d"), "--force", "--quiet", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["test"] == result["test"] and again["validation"] == result["validation"]  # same seed, same bytes


def test_recipe_on_a_corpus_of_your_own(tmp_path, capsys):
    """`mlopt recipe CORPUS --no-train`: the rule alone on the packages assigned to test; its per-module
    sizes are the engine's compiles with the rule's decisions, module for module, and stock clang's."""
    from mlopt.cli import main
    from mlopt.corpus import corpus_entries, fetch_corpus
    from mlopt.problems.inlining_linked.call_sites import PackageCallSites
    from mlopt.rollouts import RolloutTask, run_rollouts

    corpus = fetch_corpus(None, ["lz4", "ujson", "marisa-trie"]).output
    out = tmp_path / "r"
    argv = ["recipe", str(corpus), "-o", str(out), "--no-train", "--assign",
            "lz4=train,ujson=validation,marisa-trie=test", "--quiet"]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["shipped"] == "rule" and set(result["test"]) == {"rule"}
    assert result["packages"]["test"] == ["marisa-trie"] and result["languages"]["marisa-trie"] == "c++"
    assert result["verify_with_clang"]["mismatches"] == [] and not result["failed"]
    rule = result["test"]["rule"]
    assert result["rule"]["callees"]["marisa-trie"] > 0 and rule["per_module"]["all"]["delta"] < 0
    # the same sizes from independent compiles with the rule's decisions forced
    table = PackageCallSites.load(result["rule"]["table"])
    test = corpus_entries(out / "splits" / "test")
    done = run_rollouts([RolloutTask(e, None, forced_callees=tuple(sorted(table.decisions(e.name).items())),
                                     cache=False) for e in test], workers=2, quiet=True)
    rows = {r["module"]: int(r["policy_text"]) for r in _rows(result["files"]["test_csv"])}
    assert rows == {e.name: d.value.text_size for e, d in zip(test, done)}
    assert sum(rows.values()) == rule["per_module"]["all"]["policy_text"]
    # the text report says what ships and how to use it
    assert main([*argv, "--force"]) == 0
    text = capsys.readouterr().out
    assert "shipped: the rule alone (no training)" in text and "--callee-decisions" in text
    assert main(argv) == 1  # an earlier run is never replaced silently
    # --exclude reaches the split: without a validation package the recipe says so
    assert main(["recipe", str(corpus), "-o", str(tmp_path / "x"), "--no-train", "--assign",
                 "lz4=train,marisa-trie=test", "--exclude", "ujson"]) == 1
    assert "validation" in capsys.readouterr().err

"""Writes docs/results.md, and the results table between README.md's
``<!-- results:begin -->`` and ``<!-- results:end -->`` lines, from the JSON
the benchmarks record in benchmarks/results/ (``--record``). Nothing in
either is typed by hand: change a figure by running its benchmark.

    python3 docs/make_results.py           # rewrite both
    python3 docs/make_results.py --check   # exit 1 when either differs from the JSON

tests/test_results_page.py runs ``--check``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "results.md"
README = ROOT / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def load_results(directory: Path = RESULTS) -> list[dict]:
    """Every recorded benchmark result, by file name."""
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def _pct(values: list[float | None]) -> str:
    """Mean (± standard deviation over seeds, when several) of % deltas."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    if len(values) == 1 or len(set(values)) == 1:
        return f"{values[0]:+.2f}%"
    return f"{statistics.mean(values):+.2f}% ±{statistics.stdev(values):.2f}"


def _seeds(run: dict, row: dict) -> str:
    return "—" if row["config"] == "rule" else str(len(run["seeds"]))


def _gate(run: dict) -> str:
    shipped = run["shipped"]
    kept = sum(s == "rule_and_policy" for s in shipped)
    return f"{kept} of {len(shipped)} seeds"


STOCK_BENCH = "benchmarks/bench_lto_stock.py"
CONFORMANCE_BENCH = "benchmarks/bench_lto_conformance.py"
HEADROOM_BENCH = "benchmarks/bench_lto_headroom.py"
TRAINERS_BENCH = "benchmarks/bench_lto_trainers.py"
THIN_HEADROOM_BENCH = "benchmarks/bench_thinlto_headroom.py"
TUNE_VERSIONS_BENCH = "benchmarks/bench_tune_versions.py"
ROLLOUTS_BENCH = "benchmarks/bench_lto_rollouts.py"
STOCK_LABELS = {"Oz": "`-Oz`", "Oz+gc+icf": "`-Oz` + gc-sections + ICF", "thin": "ThinLTO", "full": "full LTO",
                "full+gc+icf": "full LTO + gc-sections + ICF"}


def _kind(r: dict) -> str:
    return {Path(STOCK_BENCH).name: "stock", Path(CONFORMANCE_BENCH).name: "conformance",
            Path(HEADROOM_BENCH).name: "headroom", Path(TRAINERS_BENCH).name: "trainers",
            Path(THIN_HEADROOM_BENCH).name: "thin-headroom", Path(TUNE_VERSIONS_BENCH).name: "tune-versions",
            Path(ROLLOUTS_BENCH).name: "rollouts"}.get(
        Path(r["benchmark"]).name, "recipe")


def _signed(value: float) -> str:
    return f"{value:+.2f}%"


def render_stock(r: dict) -> list[str]:
    """The stock configurations, all linked by lld: totals (all, C, C++), then per package."""
    configs = [c for c in r["configs"] if c != r["baseline_config"]] if "baseline_config" in r else \
        [c for c in r["configs"] if c != "Oz"]
    lines = [f"## Stock configurations under LTO: {r['corpus']}", "",
             f"Baseline: {r['baseline']}. Metric: {r['metric']}. Every binary linked by lld; nothing trained. "
             f"LLVM {r['llvm_version']}. Best per package: each package's smallest configuration.", "",
             "| packages | `-Oz` (bytes) | " + " | ".join(STOCK_LABELS[c] for c in configs)
             + " | best per package |", "|---|---|" + "---|" * (len(configs) + 1)]
    for group, label in (("all", "all"), ("c", "C"), ("c++", "C++")):
        t = r["totals"][group]
        if not t["packages"]:
            continue
        lines.append(f"| {label} ({t['packages']}) | {t['text']['Oz']:,} | "
                     + " | ".join(_signed(t["delta_percent"][c]) for c in configs)
                     + f" | **{_signed(t['best_per_package_delta_percent'])}** |")
    wins: dict[str, int] = {}
    for p in r["packages"]:
        wins[p["best"]] = wins.get(p["best"], 0) + 1
    lines += ["", "Best configuration, packages: " + ", ".join(f"{STOCK_LABELS[c]} {n}" for c, n in
                                                               sorted(wins.items(), key=lambda kv: -kv[1])) + ".",
              "", "| package | split | language | `-Oz` (bytes) | " + " | ".join(STOCK_LABELS[c] for c in configs)
              + " | best |", "|---|---|---|---|" + "---|" * (len(configs) + 1)]
    for p in sorted(r["packages"], key=lambda p: (p.get("split", ""), p["package"])):
        base = p["text"]["Oz"]
        lines.append(f"| {p['package']} | {p.get('split', '')} | {p['language']} | {base:,} | "
                     + " | ".join(_signed(100.0 * (p['text'][c] - base) / base) for c in configs)
                     + f" | {STOCK_LABELS[p['best']]} |")
    if r["failed"]:
        lines += ["", "Did not build in every configuration (left out): "
                  + "; ".join(f"{f['package']} ({f['config']}, {f['stage']})" for f in r["failed"]) + "."]
    return lines + ["", f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def render_conformance(r: dict) -> list[str]:
    lines = [f"## The engine against lld: {r['corpus']}", "",
             f"Baseline: {r['baseline']}. Metric: {r['metric']}. LLVM {r['llvm_version']}.", "",
             "| LTO mode | packages | modules | `.text` exact | corpus build (CPU min) | stock LTO build (CPU min) |",
             "|---|---|---|---|---|---|"]
    for mode, m in r["modes"].items():
        lines.append(f"| {'full' if mode == 'full' else 'ThinLTO'} | {m['built']} | {m['modules']} | "
                     f"**{m['exact']} of {m['modules']}** | {m['build_cpu_minutes']:g} | "
                     f"{m['stock_build_cpu_minutes']:g} |")
    failed = sorted({p["package"] for m in r["modes"].values() for p in m["failed"]})
    if failed:
        lines += ["", "Did not build: " + ", ".join(failed) + "."]
    return lines + ["", f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def render_tune_test(r: dict) -> list[str]:
    """The search of ``mlopt tune`` on the test packages' own binaries: the curve (all, C, C++), its cost."""
    exact, binaries = r["exact_binaries"]
    run = r["searches"]["callee"]
    lines = [f"## `mlopt tune` on the test packages: {r['corpus']}", "",
             f"Baseline: {r['baseline']}. Metric: {r['metric']}. The callee search `mlopt tune` runs, on each "
             f"package's own shipped binaries (a user tuning the code they ship), every move a compile and a "
             f"link; each binary's best decisions after that many compiles. {binaries} shipped binaries (the "
             f"heuristic relinked is the stock binary's `.text` on {exact} of them). LLVM {r['llvm_version']}.", "",
             "| search | compiles per binary | all | C | C++ | packages smaller | largest package gain |",
             "|---|---|---|---|---|---|---|"]
    for name, row in r["table"].items():
        search, n = name.rsplit(" x", 1)
        top = min(row["packages"].items(), key=lambda kv: kv[1])
        lines.append(f"| {search} | {n} | **{_signed(row['all'])}** | {_signed(row['c'])} | {_signed(row['c++'])} | "
                     f"{sum(v < 0 for v in row['packages'].values())} of {len(row['packages'])} | "
                     f"{top[0]} {_signed(top[1])} |")
    if r.get("savings"):
        lines += ["", "Where the savings are (bytes the accepted moves saved, by move and callee linkage):", "",
                  *r["savings"]]
    if r.get("growth"):
        lines += ["", "Where full LTO's size comes from on these binaries, against `-Oz` without LTO:", "",
                  *r["growth"]]
    return lines + ["", f"Cost: {run['evaluations']:,} compiles and links, {run['seconds'] / 60:.0f} minutes on "
                        f"2 cores ({run['seconds'] / binaries:.0f} s per binary).", "",
                    f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def render_headroom(r: dict) -> list[str]:
    """The oracle under full LTO: each search's curve (all, C, C++), where LTO's size comes from, the decision."""
    if r.get("split") == "test":
        return render_tune_test(r)
    exact, binaries = r["exact_binaries"]
    lines = [f"## Headroom under full LTO: {r['corpus']}", "",
             f"Baseline: {r['baseline']}. Metric: {r['metric']}. An oracle: the searches of `mlopt train search` "
             f"(callee: all sites of one callee at once; flip: one decision) run on the packages' own binaries, "
             f"every move a compile and a link, so no policy can do better on them within that many compiles. "
             f"{binaries} shipped binaries (the heuristic relinked is the stock binary's `.text` on {exact} of "
             f"them). LLVM {r['llvm_version']}.", "",
             "| search | compiles per binary | all | C | C++ | packages smaller |", "|---|---|---|---|---|---|"]
    for name, row in r["table"].items():
        search, n = name.rsplit(" x", 1)
        smaller = sum(v < 0 for v in row["packages"].values())
        lines.append(f"| {search} | {n} | **{_signed(row['all'])}** | {_signed(row['c'])} | {_signed(row['c++'])} | "
                     f"{smaller} of {len(row['packages'])} |")
    if r.get("savings"):
        lines += ["", "Where the savings are: the bytes the search's accepted moves saved, by move and by the "
                      "callee's linkage after internalization (external: exported from the binary):", "",
                  *r["savings"]]
    if r.get("growth"):
        lines += ["", "Where full LTO's size comes from, against `-Oz` without LTO (the same binaries):", "",
                  *r["growth"]]
    n = r["evaluations_per_binary"]
    best = min(row["all"] for name, row in r["table"].items() if name.endswith(f" x{n}"))
    return lines + ["", f"Decision rule (under 1.5% below stock at {n} compiles per binary: no training past one "
                        f"run for the record): {_signed(best)}, {r['decision']}.", "",
                    f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def _by_trainer(table: dict[str, dict]) -> dict[str, list[dict]]:
    """A trainers table's rows by trainer, its seeds (``es-0``, ``es-1``, ...) together."""
    kinds: dict[str, list[dict]] = {}
    for name, row in table.items():
        kinds.setdefault(name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name, []).append(row)
    return kinds


def render_trainers(r: dict) -> list[str]:
    """The trainers under full LTO on the test packages: one row per trainer (mean ± sd over its seeds)."""
    kinds = _by_trainer(r["table"])
    lines = [f"## Trainers under full LTO: {r['corpus']}", "",
             f"Baseline: {r['baseline']}. Metric: {r['metric']}. Trained on {r['train_binaries']} binaries of "
             f"packages apart from the {r['validation_binaries']} validation and {r['test_binaries']} test binaries; "
             f"every reward a compile and a link. LLVM {r['llvm_version']}.", "",
             "| trainer | test: all | C | C++ | ratio to stock | worst package | validation | seeds | "
             "minutes per seed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind, rows in kinds.items():
        worst = max((row["worst_package"] for row in rows), key=lambda w: w[1])
        minutes = statistics.mean(row["seconds"] for row in rows) / 60
        lines.append(f"| {kind} | **{_pct([row['all'] for row in rows])}** | {_pct([row['c'] for row in rows])} | "
                     f"{_pct([row['c++'] for row in rows])} | {statistics.mean(row['ratio'] for row in rows):.4f} | "
                     f"{worst[0]} {worst[1]:+.2f}% | {_pct([row['validation'] for row in rows])} | {len(rows)} | "
                     f"{minutes:.0f} |")
    thin = r.get("thin")
    if thin:
        lines += ["", f"The same policies under ThinLTO, against stock ThinLTO + gc-sections + ICF: every backend "
                      f"module of the {thin['binaries']} test binaries ({thin['modules']} modules) compiled by the "
                      f"policy, their objects linked; nothing trained again.", "",
                  "| trainer | ThinLTO test: all | C | C++ | ratio to stock | worst package | seeds |",
                  "|---|---|---|---|---|---|---|"]
        for kind, rows in _by_trainer(thin["table"]).items():
            worst = max((row["worst_package"] for row in rows), key=lambda w: w[1])
            lines.append(f"| {kind} | **{_pct([row['all'] for row in rows])}** | {_pct([row['c'] for row in rows])} "
                         f"| {_pct([row['c++'] for row in rows])} | "
                         f"{statistics.mean(row['ratio'] for row in rows):.4f} | {worst[0]} {worst[1]:+.2f}% | "
                         f"{len(rows)} |")
    return lines + ["", f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def render_thin_headroom(r: dict) -> list[str]:
    """The oracle under ThinLTO: one row (all, C, C++), the modules' savings summed beside the binaries'."""
    exact, binaries = r["exact_binaries"]
    row = r["table"]["callee"]
    compiles = sum(b["compiles"] for b in r["binaries"].values()) / max(len(r["binaries"]), 1)
    modules = sum(b["modules"] for b in r["binaries"].values())
    smaller = sum(v < 0 for v in row["packages"].values())
    return [f"## Headroom under ThinLTO: {r['corpus']}", "",
            f"Baseline: {r['baseline']}. Metric: {r['metric']}. The callee search on each backend module, the "
            f"other backends' objects the heuristic's, a binary's compiles shared by its modules' code; each "
            f"binary then linked from every module's best object. {binaries} shipped binaries of {modules} "
            f"backend modules (the heuristic's objects linked are the stock ThinLTO binary on {exact}; the rest "
            f"differ by assembly or by link order's padding). LLVM {r['llvm_version']}.", "",
            "| search | compiles per binary (mean) | all | C | C++ | modules' savings summed | packages smaller |",
            "|---|---|---|---|---|---|---|",
            f"| callee | {compiles:.0f} | **{_signed(row['all'])}** | {_signed(row['c'])} | {_signed(row['c++'])} | "
            f"{_signed(row['summed_modules'])} | {smaller} of {len(row['packages'])} |", "",
            f"Decision rule (under 1.5% below stock at {r['evaluations_per_binary']} compiles per binary: no "
            f"training past one run for the record): {_signed(row['all'])}, {r['decision']}.", "",
            f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def render_tune_versions(r: dict) -> list[str]:
    """mlopt tune across releases: one row per code base."""
    lines = [f"## `mlopt tune` across releases: {r['corpus']}", "",
             f"Baseline: {r['baseline']}. Metric: {r['metric']}. Decisions searched on the old release "
             f"({r['evaluations_per_binary']} compiles per binary), applied by the new release's build "
             f"(`--callee-decisions DIR/%m.txt`); the new release tuned itself for scale. LLVM {r['llvm_version']}.",
             "", "| code base | old: tuned | decisions | new: still apply | new: with the old decisions | "
                 "new: tuned itself | kept | compiles | minutes |", "|---|---|---|---|---|---|---|---|---|"]
    for name, p in r["pairs"].items():
        t, c, f = p["tuned"], p["checked"], p["fresh"]
        decisions = sum(b["decisions"] for b in t["binaries"].values())
        apply = sum(b["apply"] for b in c["binaries"].values())
        pct = lambda a, b: 100.0 * (a - b) / b if b else 0.0  # noqa: E731
        lines.append(f"| {name} {p['old']} → {p['new']} | {_signed(pct(t['after'], t['before']))} | {decisions} | "
                     f"{apply} | **{_signed(pct(c['with'], c['without']))}** | "
                     f"{_signed(pct(f['after'], f['before']))} | {p['kept_share']:.0%} | {t['compiles']} | "
                     f"{p['tune_minutes']:.1f} |")
    return lines + ["", f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def render_rollouts(r: dict) -> list[str]:
    """Evaluations per second under full LTO: the trainers' rollouts against the naive lld relink."""
    n = r["evaluations"]
    return [f"## Rollouts under full LTO: {r['corpus']}", "",
            f"Baseline: {r['baseline']}. Metric: {r['metric']} ({r['workers']} workers, one run). "
            f"The policies are an ES iteration's ({r['policies']} perturbations of a BC policy). "
            f"LLVM {r['llvm_version']}.", "",
            "| loop | evaluations | seconds | evaluations/s | ratio |", "|---|---|---|---|---|",
            f"| naive: lld's LTO link with the plugin | {n} | {r['naive_seconds']:.1f} | "
            f"{n / r['naive_seconds']:.2f} | 1.00 |",
            f"| mlopt rollouts (`inlining-lto`) | {n} | {r['rollout_seconds']:.1f} | "
            f"{n / r['rollout_seconds']:.2f} | **{r['naive_seconds'] / r['rollout_seconds']:.2f}x** |", "",
            f"Rollout costs equal to the naive links' `.text`: {r['equal']} of {n}.", "",
            f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]


def render_recipe(r: dict) -> list[str]:
    """A recipe's record: one row per configuration and LLVM, the gate, the check against stock clang."""
    runs = r["runs"]
    lines = [f"## {r['problem'].capitalize()}: {r['corpus']}", "",
             f"Baseline: `{r['baseline']}`. Metric: {r['metric']} (each package's COMDAT code counted once, "
             "as a linker keeps it); per module: the sum of the modules' `.text`. Test packages: "
             f"{', '.join(runs[0]['test_packages'])} ({runs[0]['test_modules']} modules); the validation "
             f"gate's packages: {', '.join(runs[0]['validation_packages'])}.", "",
             "| recipe | LLVM | package-linked | C | C++ | per module | worst package | seeds |",
             "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        for row in run["configs"]:
            worst, value = row["worst_package"]
            lines.append(f"| {row['label']} | {run['llvm']} | **{_pct(row['linked'])}** | {_pct(row['C'])} | "
                         f"{_pct(row['C++'])} | {_pct(row['per_module'])} | {worst} {value:+.2f}% | "
                         f"{_seeds(run, row)} |")
    lines += ["", "The validation gate ships the trained policy only when it is smaller than the rule alone "
                  "on the validation packages: "
              + "; ".join(f"LLVM {run['llvm']}: {_gate(run)}" for run in runs) + ". "
              "Stock clang with the plugin gave the in-process `.text` of every shipped test module: "
              + "; ".join(f"LLVM {run['llvm']}: {', '.join(run['verified'])}" for run in runs) + ". "
              "Minutes per run (2 cores): "
              + "; ".join(f"LLVM {run['llvm']}: {', '.join(f'{m:g}' for m in run['minutes'])}" for run in runs)
              + ".", "",
              f"Reproduce: `{r['command']}` (recorded {r['date']} at commit {r['commit']}).", ""]
    return lines


RENDERERS = {"stock": render_stock, "conformance": render_conformance, "headroom": render_headroom,
             "trainers": render_trainers, "thin-headroom": render_thin_headroom,
             "tune-versions": render_tune_versions, "rollouts": render_rollouts, "recipe": render_recipe}


def render_page(results: list[dict]) -> str:
    lines = ["# Results", "",
             "<!-- generated by docs/make_results.py from benchmarks/results/*.json: do not edit -->", "",
             "Current figures, each from the benchmark named under its table, on code that no step of training "
             "or selection saw, against the stock configuration a user would build with instead, measured in the "
             "same run. Deltas are `.text` bytes, negative = smaller. What was tried before and did not pay is "
             "in [findings](findings.md).", ""]
    for r in results:
        lines += RENDERERS[_kind(r)](r)
    return "\n".join(lines)


def render_readme_table(results: list[dict]) -> str:
    lines = [BEGIN, "| problem | recipe | package-linked `.text` | against | test packages (never seen) | LLVM | "
                    "command |", "|---|---|---|---|---|---|---|"]
    for r in results:
        if _kind(r) != "recipe":
            continue
        for run in r["runs"]:
            for row in run["configs"]:
                if row["config"] == "policy_alone":
                    continue
                lines.append(f"| {r['problem']} | {row['label']} | **{_pct(row['linked'])}** | `{r['baseline']}` | "
                             f"{', '.join(run['test_packages'])} | {run['llvm']} | `{r['command']}` |")
    lines.append(END)
    return "\n".join(lines)


def readme_with_table(readme: str, table: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"{README}: no {BEGIN} ... {END} lines to write the results table between")
    head, rest = readme.split(BEGIN, 1)
    return head + table + rest.split(END, 1)[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a page differs from the JSON")
    args = ap.parse_args()
    results = load_results()
    page = render_page(results)
    readme = readme_with_table(README.read_text(), render_readme_table(results))
    if args.check:
        stale = [p.relative_to(ROOT) for p, text in ((PAGE, page), (README, readme))
                 if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"{p} differs from benchmarks/results/*.json: run python3 docs/make_results.py", file=sys.stderr)
        return 1 if stale else 0
    PAGE.write_text(page)
    README.write_text(readme)
    print(f"wrote {PAGE.relative_to(ROOT)} and the results table of {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

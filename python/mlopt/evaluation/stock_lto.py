"""What a size-minded user would pick instead of mlopt: each package built by
its own build system (``mlopt corpus debian``) in the stock configurations,
every binary linked by lld, and the ``.text`` of the executables and shared
libraries it ships compared per package, per language and in total, with
each package's best configuration.

==============  ============================================================
``Oz``          ``-Oz``
``Oz+gc+icf``   ``-Oz -ffunction-sections -fdata-sections``, linked with
                ``--gc-sections --icf=all``
``thin``        ``-Oz -flto=thin``
``full``        ``-Oz -flto``
``full+gc+icf`` ``-Oz -flto -ffunction-sections -fdata-sections``, linked
                with ``--gc-sections --icf=all``
==============  ============================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ..corpus.debian import DebianConfig, PackageResult, PackageSpec, build_packages

SECTIONS = ("-ffunction-sections", "-fdata-sections")
GC_ICF = ("-Wl,--gc-sections", "-Wl,--icf=all")
STOCK = {
    "Oz": dict(flags=("-Oz",), lld=True),
    "Oz+gc+icf": dict(flags=("-Oz", *SECTIONS), link_flags=GC_ICF),
    "thin": dict(flags=("-Oz",), lto="thin"),
    "full": dict(flags=("-Oz",), lto="full"),
    "full+gc+icf": dict(flags=("-Oz", *SECTIONS), lto="full", link_flags=GC_ICF),
}
BASELINE = "Oz"


POLICY_SUFFIX = "+policy"
POLICY_IN = ("thin", "full", "full+gc+icf")  # the LTO configurations a policy is built in


def stock_config(name: str, base: DebianConfig | None = None) -> DebianConfig:
    return replace(base or DebianConfig(), **STOCK[name])


def policy_config(name: str, policy: str, base: DebianConfig | None = None) -> DebianConfig:
    """Stock configuration ``name`` with ``policy`` (:func:`with_policy`)."""
    return with_policy(stock_config(name, base), policy)


def with_policy(config: DebianConfig, policy: str) -> DebianConfig:
    """``config`` with ``policy`` deciding inlining in every compile and,
    under LTO, in lld's backends (``mlopt clang-flags --lto MODE --model P``)."""
    from ..compiler.plugin import clang_flags, lld_flags, wl_flags

    flags = clang_flags(model=policy, llvm=config.llvm)
    load = flags.index("-load")  # -fplugin=P, not -Xclang -load -Xclang P: libtool's links read "-load" as a library
    flags[load - 1:load + 3] = [f"-fplugin={flags[load + 2]}"]
    link = wl_flags(lld_flags(model=policy, llvm=config.llvm)) if config.lto is not None else []
    return replace(config, extra_flags=(*config.extra_flags, *flags), link_flags=(*config.link_flags, *link))


def package_language(result: PackageResult) -> str:
    """``c`` or ``c++``: the language of most of the package's code (its
    ``-Oz`` build's modules, by ``.text``)."""
    by: dict[str, int] = {}
    for m in result.modules:
        lang = result.module_language.get(m, "c")
        by[lang] = by.get(lang, 0) + result.module_text.get(m, 0)
    return max(by, key=by.get) if by else "c"


def compare_stock(specs: Sequence[PackageSpec], base: DebianConfig | None = None,
                  configs: Sequence[str] = tuple(STOCK), *, policy: str | None = None, on_progress=None,
                  say: Callable[[str], None] | None = None) -> dict:
    """Builds every package in every configuration (cached per package and
    configuration, as ``mlopt corpus debian`` caches) and returns the report:
    per package its language, each configuration's shipped ``.text`` and its
    best stock configuration; totals over the packages that built in every
    configuration, all and per language, against ``Oz``. With ``policy``,
    also each LTO configuration with the policy (``thin+policy``, ...)."""
    base = base or DebianConfig()
    unknown = [c for c in configs if c not in STOCK]
    if unknown:
        raise ValueError(f"unknown stock configuration {unknown[0]!r} (one of {', '.join(STOCK)})")
    if BASELINE not in configs:
        configs = (BASELINE, *configs)
    built = {c: build_packages(specs, stock_config(c, base), on_progress=on_progress, say=say) for c in configs}
    stock = tuple(configs)
    if policy is not None:
        for c in POLICY_IN:
            built[c + POLICY_SUFFIX] = build_packages(specs, policy_config(c, policy, base), on_progress=on_progress,
                                                      say=say)
        configs = (*configs, *(c + POLICY_SUFFIX for c in POLICY_IN))
    packages, failed = [], []
    for i, spec in enumerate(specs):
        results = {c: built[c][i] for c in configs}
        bad = {c: r for c, r in results.items() if r.status != "built"}
        if bad:
            c, r = next(iter(bad.items()))
            failed.append({"package": spec.name, "config": c, "stage": r.stage, "reason": r.reason})
            continue
        text = {c: sum(r.shipped.values()) for c, r in results.items()}
        best = min(stock, key=lambda c: (text[c], stock.index(c)))
        packages.append({"package": spec.name, "version": results[BASELINE].version,
                         "language": package_language(results[BASELINE]), "text": text, "best": best,
                         "binaries": {c: dict(sorted(r.shipped.items())) for c, r in results.items()}})
    return {"llvm": base.llvm, "compiler": base.compiler_version(), "configs": list(configs), "baseline": BASELINE,
            "policy": policy, "packages": packages, "failed": failed, "totals": _totals(packages, configs)}


def merge_reports(reports: Sequence[dict]) -> dict:
    """One report of several (e.g. one per package, as they finish)."""
    first = reports[0]
    packages = [p for r in reports for p in r["packages"]]
    return {**first, "packages": packages, "failed": [f for r in reports for f in r["failed"]],
            "totals": _totals(packages, first["configs"])}


def _totals(packages: list[dict], configs: Sequence[str]) -> dict:
    stock = [c for c in configs if c in STOCK]  # the best per package is a stock configuration, never a policy's
    out = {}
    for group in ("all", "c", "c++"):
        rows = [p for p in packages if group == "all" or p["language"] == group]
        total = {c: sum(p["text"][c] for p in rows) for c in configs}
        base = total[BASELINE]
        best = sum(min(p["text"][c] for c in stock) for p in rows)
        out[group] = {"packages": len(rows), "text": total, "best_per_package": best,
                      "delta_percent": {c: _pct(total[c], base) for c in configs},
                      "best_per_package_delta_percent": _pct(best, base)}
    return out


def _pct(value: int, base: int) -> float:
    return 100.0 * (value - base) / base if base else 0.0


def stock_table(report: dict) -> str:
    """The report as a Markdown table: one row per package (its shipped
    ``.text`` under ``Oz``, each configuration against it, the best), then the totals."""
    configs = report["configs"]
    head = ["package", "lang", "Oz (bytes)", *[c for c in configs if c != BASELINE], "best stock"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in report["packages"]:
        base = p["text"][BASELINE]
        cells = [p["package"], p["language"], f"{base:,}",
                 *[f"{_pct(p['text'][c], base):+.2f}%" for c in configs if c != BASELINE], p["best"]]
        lines.append("| " + " | ".join(cells) + " |")
    for group, t in report["totals"].items():
        if not t["packages"]:
            continue
        cells = [f"**{group}** ({t['packages']})", "", f"{t['text'][BASELINE]:,}",
                 *[f"{t['delta_percent'][c]:+.2f}%" for c in configs if c != BASELINE],
                 f"{t['best_per_package_delta_percent']:+.2f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

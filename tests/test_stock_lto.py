"""The stock-configuration report (mlopt corpus debian --stock): each
package's shipped .text per configuration, the best stock configuration
(never a policy's), totals per language; builds faked here, real in
benchmarks/bench_lto_stock.py --quick (tests/test_benchmarks.py)."""

from __future__ import annotations

import pytest

from mlopt.corpus.debian import DebianConfig, PackageResult, PackageSpec
from mlopt.evaluation import stock_lto

TEXT = {  # package -> configuration -> shipped .text
    "cpp": {"Oz": 1000, "Oz+gc+icf": 950, "thin": 930, "full": 900, "full+gc+icf": 880},
    "c": {"Oz": 500, "Oz+gc+icf": 500, "thin": 510, "full": 505, "full+gc+icf": 505},
}


@pytest.fixture
def fake_builds(monkeypatch):
    def build(specs, config, **_):
        link = tuple(f for f in config.link_flags if "MLOptPlugin" not in f and "mlopt-" not in f)
        name = next(n for n, kw in stock_lto.STOCK.items()
                    if config.lto == kw.get("lto") and link == kw.get("link_flags", ()) and config.flags == kw["flags"])
        policy = any("-mlopt-inline-model" in f for f in config.extra_flags)
        out = []
        for s in specs:
            text = TEXT[s.name][name] - (7 if policy else 0)  # the policy takes 7 bytes off
            lang = "c++" if s.name == "cpp" else "c"
            out.append(PackageResult(s.name, "1", "built", modules=["m"], module_text={"m": 1},
                                     module_language={"m": lang}, shipped={"bin": text}))
        return out

    monkeypatch.setattr(stock_lto, "build_packages", build)
    monkeypatch.setattr(DebianConfig, "compiler_version", lambda self: "clang-19 (fake)")


def test_best_stock_configuration_and_totals(fake_builds):
    r = stock_lto.compare_stock([PackageSpec("cpp"), PackageSpec("c")])
    best = {p["package"]: p["best"] for p in r["packages"]}
    assert best == {"cpp": "full+gc+icf", "c": "Oz"}  # ties go to the earlier (simpler) configuration
    t = r["totals"]
    assert t["all"]["text"]["full+gc+icf"] == 1385 and t["c++"]["packages"] == 1
    assert t["all"]["best_per_package"] == 880 + 500
    assert t["all"]["delta_percent"]["Oz"] == 0.0
    assert t["c"]["delta_percent"]["thin"] == pytest.approx(2.0)
    assert "| cpp | c++ | 1,000 |" in stock_lto.stock_table(r)


def test_a_policy_is_compared_but_never_the_best_stock(fake_builds, tmp_path):
    policy = tmp_path / "p.so"
    policy.write_bytes(b"")
    r = stock_lto.compare_stock([PackageSpec("cpp"), PackageSpec("c")], policy=str(policy))
    assert r["configs"][-3:] == ["thin+policy", "full+policy", "full+gc+icf+policy"]
    cpp = next(p for p in r["packages"] if p["package"] == "cpp")
    assert cpp["text"]["full+gc+icf+policy"] == 873 and cpp["best"] == "full+gc+icf"
    assert r["totals"]["all"]["best_per_package"] == 880 + 500


def test_merged_reports_total_again(fake_builds):
    one = stock_lto.compare_stock([PackageSpec("cpp")])
    two = stock_lto.compare_stock([PackageSpec("c")])
    both = stock_lto.merge_reports([one, two])
    assert both["totals"] == stock_lto.compare_stock([PackageSpec("cpp"), PackageSpec("c")])["totals"]

"""Every maintained benchmark runs its ``--quick`` mode: the same code path
on the smallest real input (benchmarks/README.md), exit 0, with its report.

A benchmark that is not listed here fails ``test_every_benchmark_has_a_quick_run``:
a new benchmark comes with a ``--quick`` mode and a line in QUICK."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"

llvm, network, slow = pytest.mark.llvm, pytest.mark.network, pytest.mark.slow
needs_apt = pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs Debian's apt (builds a Debian package)")

# file -> (a line of its report, whether it takes --out DIR, marks). "network": the input is fetched (the
# default corpus' sdists from PyPI, or a Debian source package), cached after the first run.
QUICK = {
    "bench_log_reader.py": ("ratio mlopt/pure-Python (same log):", False, ()),
    "bench_plugin.py": ("per-module ratio vs stock", False, (llvm, network, slow)),
    "bench_policy.py": ("per-module ratio vs stock", False, (llvm, network, slow)),
    "bench_feature_upkeep.py": ("so-mlopt / so-llvm: total", False, (llvm, network, slow)),
    "check_feature_upkeep.py": ("objects of mlopt+memo identical to LLVM's upkeep: 2 of 2", False,
                                (llvm, network, slow)),
    "bench_inprocess.py": ("per-module speed-up:", False, (llvm, network, slow)),
    "soak.py": ("identical to each policy's first round: yes", False, (llvm, network, slow)),
    "bench_rollouts.py": ("+trajectory replay", False, (llvm, network, slow)),
    "bench_inliner_prefix.py": ("byte-identical object, log and decisions: 4/4", False, (llvm, network, slow)),
    "bench_es_iteration.py": ("identical training on both sides", False, (llvm, network, slow)),
    "bench_bc_portable.py": ("fixed order / BLAS:", False, (llvm, network, slow)),
    "bench_es_ppo.py": ("test delta vs -Oz: bc", True, (llvm, network, slow)),
    "bench_trainers.py": ("search+imitation", False, (llvm, network, slow)),
    "bench_search_headroom.py": ("| callee x2 |", True, (llvm, network, slow)),
    "linked_estimate.py": ("| -Oz+one-site |", False, (llvm, network, slow)),
    "bench_recipe.py": ("shipped by the validation gate", False, (llvm, network, slow)),
    "bench_regalloc_es.py": ('"es_score_change_percent"', True, (llvm, network, slow)),
    "bench_regalloc_speed.py": ("spearman_score_vs_time", True, (llvm, network, slow)),
    "bench_reward_trace.py": ("rho pred~instr", True, (llvm, network, slow)),
    "bench_regalloc_trace_es.py": ("the training program", True, (llvm, network, slow)),
    "bench_debian_corpus.py": ("built 1 of 1 packages", True, (llvm, network, slow, needs_apt)),
    "bench_lto_stock.py": ("| lz4 | c |", False, (llvm, network, slow, needs_apt)),
    "bench_lto_conformance.py": ("thin: 13 of 13 modules' .text exact", True, (llvm, network, slow, needs_apt)),
    "bench_lto_link.py": ("so-mlopt", False, (llvm, slow)),
    "bench_lto_headroom.py": ("the heuristic relinked is the stock binary on 3 of 3", True, (llvm, slow)),
    "bench_lto_trainers.py": ("| trainer | ThinLTO test all |", True, (llvm, slow)),
    "bench_thinlto_headroom.py": ("the heuristic's objects linked are the stock binary on", True, (llvm, slow)),
    "bench_tune_versions.py": ("| lz4 3.1.3 -> 4.3.3 |", True, (llvm, network, slow)),
    "bench_lto_rollouts.py": ("rollout costs equal to the naive links' .text: 2 of 2", True, (llvm, network, slow)),
}


def test_every_benchmark_has_a_quick_run():
    scripts = {p.name for p in BENCHMARKS.glob("*.py")} - {"_common.py"}
    assert scripts - set(QUICK) == set(), "benchmarks without a --quick run in tests/test_benchmarks.py"
    assert set(QUICK) - scripts == set(), "tests/test_benchmarks.py lists benchmarks that are gone"
    for name in scripts:
        assert "--quick" in (BENCHMARKS / name).read_text(), f"{name} has no --quick mode"


@pytest.mark.parametrize("name", [pytest.param(n, marks=m) for n, (_, _, m) in QUICK.items()])
def test_quick_run(name, tmp_path):
    key, takes_out, _ = QUICK[name]
    cmd = [sys.executable, str(BENCHMARKS / name), "--quick", *(["--out", str(tmp_path / "out")] if takes_out else [])]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{name} --quick: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert key in r.stdout, f"{name} --quick: no {key!r} in its report\n{r.stdout[-3000:]}"

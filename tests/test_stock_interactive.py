"""Conformance: read what stock opt-19's interactive ML inliner really sends."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import mlopt
import reference_reader
from corpus import bitcode, c_sources
from mlopt.interactive import Host

# LLVM 19's inliner features, in tensor order (llvm-mlgo.md 7.2).
INLINER_FEATURES = [
    "sroa_savings", "sroa_losses", "load_elimination", "call_penalty", "call_argument_setup",
    "load_relative_intrinsic", "lowered_call_arg_setup", "indirect_call_penalty",
    "jump_table_penalty", "case_cluster_penalty", "switch_default_dest_penalty",
    "switch_penalty", "unsimplified_common_instructions", "num_loops", "dead_blocks",
    "simplified_instructions", "constant_args", "constant_offset_ptr_args", "callsite_cost",
    "cold_cc_penalty", "last_call_to_static_bonus", "is_multiple_blocks", "nested_inlines",
    "nested_inline_cost_estimate", "threshold", "callee_basic_block_count", "callsite_height",
    "node_count", "nr_ctant_params", "cost_estimate", "edge_count", "caller_users",
    "caller_conditionally_executed_blocks", "caller_basic_block_count",
    "callee_conditionally_executed_blocks", "callee_users", "is_callee_avail_external",
    "is_caller_avail_external",
]


def policy(obs):
    # A deterministic toy policy that says both yes and no.
    return int(obs["cost_estimate"][0] < 20)


def parse_remarks(text: str):
    """(caller, callee, {feature: value}, should_inline) per inline-ml remark."""
    out = []
    for doc in text.split("\n--- ")[0:]:
        if "Pass:            inline-ml" not in doc:
            continue
        caller = re.search(r"^Function:\s+(\S+)", doc, re.M).group(1)
        args = dict(re.findall(r"^  - (\w+):\s+'?([^'\n]*)'?$", doc, re.M))
        feats = {k: int(args[k]) for k in INLINER_FEATURES if k in args}
        out.append((caller, args.get("Callee"), feats, args.get("ShouldInline")))
    return out


@pytest.fixture(scope="module")
def lz4_module(llvm_tools, tmp_path_factory):
    src = next(p for p in c_sources("lz4") if p.name == "lz4.c")
    return bitcode(llvm_tools["clang"], src, tmp_path_factory.mktemp("lz4"))


def opt_command(opt, module, out, *extra):
    return [opt, "-passes=default<Oz>", "-enable-ml-inliner=release",
            "-inliner-interactive-channel-base={channel}", str(module), "-o", str(out), *extra]


def test_stock_opt_stream_reads_exactly(llvm_tools, lz4_module, tmp_path):
    remarks = tmp_path / "remarks.yaml"
    result = Host(policy, timeout=300, capture=True).run(
        opt_command(llvm_tools["opt"], lz4_module, tmp_path / "out.bc",
                    f"-pass-remarks-output={remarks}"))
    assert result.returncode == 0, result.stderr
    assert result.sessions == 1
    stream = result.streams[0]
    log = mlopt.read_log(stream)

    # The header: 38 int64 [1] features in LLVM 19's order, advice, no score.
    assert log.feature_names == INLINER_FEATURES
    assert all(s.type == "int64_t" and s.shape == (1,) and s.port == 0 for s in log.features)
    assert log.advice_spec == mlopt.TensorSpec("inlining_decision", "int64_t", [1])
    assert log.score_spec is None
    # One observation per reply, numbered 0..n-1 in the single context "".
    n = result.observations
    assert n > 50 and len(log) == n
    assert log.contexts == [""]
    assert np.array_equal(log.observation_id, np.arange(n))
    assert len(stream) == len(log.header.to_json()) + 1 + len(b'{"context":""}\n') + sum(
        len(f'{{"observation":{i}}}\n') + 38 * 8 + 1 for i in range(n))

    # Values equal an independent pure-Python parse of the same bytes ...
    _, contexts, rows = reference_reader.read(stream)
    assert contexts == [""] and len(rows) == n
    for i, name in enumerate(INLINER_FEATURES):
        expected = np.array([np.frombuffer(r[2][i], np.int64)[0] for r in rows])
        assert np.array_equal(log[name].ravel(), expected), name

    # ... and LLVM's own inline-ml remarks, which carry every feature of every
    # decision and whether the advice was to inline.
    decided = parse_remarks(remarks.read_text())
    assert len(decided) == n
    matrix = np.hstack([log[name] for name in INLINER_FEATURES])
    for row, (caller, callee, feats, should) in zip(matrix, decided):
        assert [feats[k] for k in INLINER_FEATURES] == row.tolist(), (caller, callee)
        assert should == ("true" if policy_row(row) else "false")


def policy_row(row):
    return int(row[INLINER_FEATURES.index("cost_estimate")] < 20)


def test_regular_file_replay_is_byte_identical(llvm_tools, lz4_module, tmp_path):
    """Pre-filled .in + plain .out file reproduce the FIFO session byte for byte."""
    live = Host(policy, timeout=300, capture=True).run(
        opt_command(llvm_tools["opt"], lz4_module, tmp_path / "live.bc"))
    assert live.returncode == 0, live.stderr
    base = tmp_path / "replay"
    (tmp_path / "replay.in").write_bytes(np.array(live.decisions, np.int64).tobytes())
    cmd = [a.replace("{channel}", str(base)) for a in
           opt_command(llvm_tools["opt"], lz4_module, tmp_path / "replay.bc")]
    subprocess.run(cmd, check=True, timeout=300)
    recorded = (tmp_path / "replay.out").read_bytes()
    assert recorded == live.streams[0]
    assert (tmp_path / "replay.bc").read_bytes() == (tmp_path / "live.bc").read_bytes()
    # The reader handles the file LLVM wrote directly.
    log = mlopt.read_log(tmp_path / "replay.out")
    assert len(log) == len(live.decisions)


def test_stream_is_readable_while_opt_runs(llvm_tools, lz4_module, tmp_path):
    """LogStream-level use: observations arrive one at a time over the FIFO."""
    seen = []

    def record(obs):
        seen.append((obs.context, obs.id, int(obs["callee_users"][0])))
        return 0

    result = Host(record, timeout=300).run(opt_command(llvm_tools["opt"], lz4_module, tmp_path / "o.bc"))
    assert result.returncode == 0
    assert [s[1] for s in seen] == list(range(len(seen))) and all(s[0] == "" for s in seen)

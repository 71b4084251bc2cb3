"""Conformance: read what stock opt-19's interactive ML inliner really sends."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import mlopt
from mlopt.compiler.interactive import Host
from mlopt.problems import inlining as inliner
from tests.support import reference_reader
from tests.support.corpus import bitcode, c_sources

INLINER_FEATURES = list(inliner.FEATURES)


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
        args = re.findall(r"^  - (\w+):\s+'?([^'\n]*)'?$", doc, re.M)
        feats = [(k, int(v)) for k, v in args if k not in ("Callee", "ShouldInline")]
        named = dict(args)
        out.append((caller, named.get("Callee"), feats, named.get("ShouldInline")))
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
        # LLVM lists the features in tensor order: names and values both match.
        assert [k for k, _ in feats] == INLINER_FEATURES
        assert [v for _, v in feats] == row.tolist(), (caller, callee)
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

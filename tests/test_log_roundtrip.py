"""Property tests: writer -> readers round trips, and writer == LLVM's Logger."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mlopt
from mlopt import TensorSpec
from tests.support import reference_reader
from tests.support.oracle import run_oracle

TYPES = ["float", "double", "int8_t", "uint8_t", "int16_t", "uint16_t",
         "int32_t", "uint32_t", "int64_t", "uint64_t"]

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10)
specs = st.builds(
    TensorSpec,
    name=names,
    type=st.sampled_from(TYPES),
    shape=st.lists(st.integers(0, 4), max_size=3),
    port=st.integers(0, 3),
)
score_specs = st.builds(TensorSpec, name=names, type=st.sampled_from(TYPES),
                        shape=st.sampled_from([[], [1], [2]]))
# Context names are raw bytes: LLVM's StringRef may hold anything (invalid
# UTF-8 is repaired when written).
context_names = st.one_of(st.sampled_from([b"", b"f", b"main", "ü\"\\\n".encode()]),
                          st.binary(max_size=6))


@st.composite
def log_programs(draw, max_features=5):
    features = draw(st.lists(specs, max_size=max_features))
    score = draw(st.one_of(st.none(), score_specs))
    advice = draw(st.one_of(st.none(), specs))
    segments = draw(st.lists(st.tuples(context_names, st.integers(0, 4)), max_size=6))
    ops = []
    for name, n in segments:
        ops.append(("context", name))
        for _ in range(n):
            ops.append(("start",))
            for i, f in enumerate(features):
                ops.append(("tensor", i, draw(st.binary(min_size=f.byte_size, max_size=f.byte_size))))
            ops.append(("end",))
            if score is not None:
                ops.append(("reward", draw(st.binary(min_size=score.byte_size, max_size=score.byte_size))))
    return features, score, advice, ops


def write_with_mlopt(features, score, advice, ops) -> bytes:
    w = mlopt.LogWriter(None, features, score=score, advice=advice)
    for op in ops:
        if op[0] == "context":
            w.switch_context(op[1])
        elif op[0] == "start":
            w.start_observation()
        elif op[0] == "tensor":
            w._w.log_tensor_bytes(op[1], op[2])
        elif op[0] == "end":
            w.end_observation()
        else:
            w._w.log_reward_bytes(op[1])
    return w.getvalue()


def expected_rows(features, score, ops):
    """(context, id, [bytes], score) per observation, from the call list."""
    rows, counters, ctx, current = [], {}, None, None
    for op in ops:
        if op[0] == "context":
            ctx = op[1]
        elif op[0] == "start":
            counters[ctx] = counters.get(ctx, -1) + 1
            current = [ctx, counters[ctx], [], None]
        elif op[0] == "tensor":
            current[2].append(op[2])
        elif op[0] == "end":
            rows.append(current)
        else:
            current[3] = op[1]
    return rows


def check_log_matches(log, features, score, advice, ops, data):
    header, ref_contexts, ref_rows = reference_reader.read(data)
    rows = expected_rows(features, score, ops)
    assert len(log) == len(rows) == len(ref_rows)
    assert log.header.features == tuple(features)
    assert log.score_spec == score and log.advice_spec == advice
    assert log.contexts == ref_contexts
    for i, spec in enumerate(features):
        col = log[i]
        assert col.dtype == spec.dtype and col.shape == (len(rows), *spec.shape)
        assert col.flags.c_contiguous
        for r, (_, _, values, _) in enumerate(rows):
            assert col[r].tobytes() == values[i] == ref_rows[r][2][i]
    for r, (_ctx, oid, _, sc) in enumerate(rows):
        assert log.contexts[log.context_index[r]] == ref_rows[r][0]
        assert log.observation_id[r] == oid == ref_rows[r][1]
        if score is not None:
            assert log.score[r].tobytes() == sc == ref_rows[r][3]
    if score is None:
        assert log.score is None


@settings(max_examples=300, deadline=None)
@given(log_programs())
def test_roundtrip_reader_equals_reference_reader(program):
    features, score, advice, ops = program
    data = write_with_mlopt(features, score, advice, ops)
    check_log_matches(mlopt.read_log(data), features, score, advice, ops, data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log_programs(), st.integers(1, 97))
def test_roundtrip_through_files_and_streams(tmp_path, program, chunk):
    features, score, advice, ops = program
    data = write_with_mlopt(features, score, advice, ops)
    path = tmp_path / "x.log"
    path.write_bytes(data)
    check_log_matches(mlopt.read_log(path), features, score, advice, ops, data)

    # The streaming parser fed in small pieces yields the same observations.
    rows = expected_rows(features, score, ops)
    with open(path, "rb") as f:
        stream = mlopt.LogStream(f, chunk_size=chunk)
        seen = list(stream)
    assert len(seen) == len(rows)
    for obs, (_, oid, values, sc) in zip(seen, rows):
        assert obs.id == oid
        assert obs.payload == b"".join(values)
        assert obs.score_bytes == sc
    assert len(stream.contexts) == len(reference_reader.read(data)[1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log_programs(max_features=4))
def test_writer_is_byte_identical_to_llvm_logger(llvm_logger_oracle, tmp_path, program):
    features, score, advice, ops = program
    assert write_with_mlopt(features, score, advice, ops) == run_oracle(
        llvm_logger_oracle, tmp_path, features, score, advice, ops)


def test_payload_bytes_equal_to_newline():
    f = TensorSpec("nl", "int64_t", [3])
    s = TensorSpec("r", "int64_t", [1])
    nl = 0x0A0A0A0A0A0A0A0A
    w = mlopt.LogWriter(None, [f], score=s)
    w.switch_context("\n")
    w.log_observation([[nl, nl, 10]], score=10)
    w.log_observation([[10, 10, 10]], score=nl)
    log = mlopt.read_log(w.getvalue())
    assert log["nl"].tolist() == [[nl, nl, 10], [10, 10, 10]]
    assert log.score.tolist() == [[10], [nl]]
    assert log.contexts == ["\n"]


def test_zero_observation_and_consecutive_and_revisited_contexts():
    f = TensorSpec("x", "int32_t", [1])
    w = mlopt.LogWriter(None, [f])
    w.switch_context("empty1")
    w.switch_context("empty2")
    w.switch_context("a")
    w.log_observation([1])
    w.switch_context("b")
    w.log_observation([2])
    w.switch_context("a")  # numbering continues for a revisited name
    w.log_observation([3])
    w.switch_context("empty3")
    log = mlopt.read_log(w.getvalue())
    assert log.contexts == ["empty1", "empty2", "a", "b", "empty3"]
    assert log.observation_id.tolist() == [0, 0, 1]
    assert log.row_contexts == ["a", "b", "a"]
    a = log.context("a")
    assert a["x"].ravel().tolist() == [1, 3] and a.observation_id.tolist() == [0, 1]
    assert len(log.context("empty2")) == 0 and log.context("empty2")["x"].shape == (0, 1)
    assert list(log.by_context()) == log.contexts
    b = log.context("b")
    assert np.shares_memory(b["x"], log["x"])  # contiguous rows are views


def test_empty_input_and_header_only():
    # 0 bytes is not a log (a compiler that died before writing its header);
    # allow_truncated reads it as an empty, headerless log and says so.
    with pytest.raises(mlopt.LogFormatError, match="empty input: not an MLGO training log"):
        mlopt.read_log(b"")
    with pytest.warns(mlopt.TruncatedLogWarning, match="empty input"):
        empty = mlopt.read_log(b"", allow_truncated=True)
    assert len(empty) == 0 and empty.header is None and empty.contexts == []
    w = mlopt.LogWriter(None, [TensorSpec("x", "float", [2, 2])], score=TensorSpec("r", "float", []))
    log = mlopt.read_log(w.getvalue())
    assert len(log) == 0 and log["x"].shape == (0, 2, 2) and log.score.shape == (0,)


def test_large_tensor_records_cross_read_chunks(tmp_path):
    # One record far larger than the reader's 4 MiB chunk.
    f = TensorSpec("big", "uint8_t", [6 << 20])
    rng = np.random.default_rng(0)
    values = [rng.integers(0, 256, f.element_count, dtype=np.uint8) for _ in range(2)]
    path = tmp_path / "big.log"
    with mlopt.LogWriter(path, [f]) as w:
        w.switch_context("c")
        for v in values:
            w.log_observation([v])
    log = mlopt.read_log(path)
    assert len(log) == 2 and all(np.array_equal(log["big"][i], values[i]) for i in range(2))

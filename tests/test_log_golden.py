"""The worked 247-byte example of llvm-mlgo.md section 4.4, exactly."""

import numpy as np

import mlopt
from mlopt import TensorSpec
from tests.support.golden import BODY, GOLDEN, HEADER  # noqa: F401

A = TensorSpec("a", "int64_t", [1])
B = TensorSpec("b", "float", [2])
R = TensorSpec("reward", "float", [1])


def test_golden_is_what_the_reference_says():
    assert len(HEADER) == 177
    assert len(GOLDEN) == 247


def test_writer_produces_golden_bytes():
    w = mlopt.LogWriter(None, [A, B], score=R)
    w.switch_context("f")
    w.start_observation()
    w.log_tensor("a", 5)
    w.log_tensor("b", [1.5, -2.0])
    w.end_observation()
    w.log_reward(0.25)
    assert w.getvalue() == GOLDEN


def test_writer_golden_via_file_and_bulk(tmp_path):
    path = tmp_path / "g.log"
    with mlopt.LogWriter(path, [A, B], score=R) as w:
        w.switch_context("f")
        w.log_observations({"a": [[5]], "b": [[1.5, -2.0]]}, scores=[[0.25]])
    assert path.read_bytes() == GOLDEN


def test_llvm_logger_writes_golden_bytes(llvm_logger_oracle, tmp_path):
    from tests.support.oracle import run_oracle

    script = [("context", b"f"), ("start",), ("tensor", 0, (5).to_bytes(8, "little")),
              ("tensor", 1, np.array([1.5, -2.0], np.float32).tobytes()), ("end",),
              ("reward", np.float32(0.25).tobytes())]
    assert run_oracle(llvm_logger_oracle, tmp_path, [A, B], R, None, script) == GOLDEN


def test_reader_reads_golden(tmp_path):
    for source in (GOLDEN, _write(tmp_path, GOLDEN)):
        log = mlopt.read_log(source)
        assert log.header.features == (A, B) and log.score_spec == R and log.advice_spec is None
        assert len(log) == 1
        assert log.contexts == ["f"]
        assert log["a"].dtype == np.int64 and log["a"].shape == (1, 1) and log["a"][0, 0] == 5
        assert log["b"].dtype == np.float32 and log["b"].tolist() == [[1.5, -2.0]]
        assert log.score.tolist() == [[0.25]] and log["reward"] is log.score
        assert log.context_index.tolist() == [0] and log.observation_id.tolist() == [0]
        assert log.input_bytes == 247 and log.truncated_bytes == 0


def _write(tmp_path, data):
    p = tmp_path / "golden.log"
    p.write_bytes(data)
    return p

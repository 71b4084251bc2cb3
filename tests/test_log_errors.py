"""Every class of malformed input: the error type, the byte offset, the reason."""

import os
import warnings

import pytest

import mlopt
from mlopt import LogFormatError, TensorSpec
from tests.support.golden import GOLDEN, HEADER

# Layout of GOLDEN (llvm-mlgo.md 4.4): header 0..176, context line 177..192,
# observation line 193..210, a 211..218, b 219..226, '\n' 227,
# outcome line 228..241, score 242..245, '\n' 246.
CTX, OBS, A, B, TERM, OUTCOME, SCORE, END = 177, 193, 211, 219, 227, 228, 242, 246


def error_of(data: bytes, **kw) -> LogFormatError:
    with pytest.raises(LogFormatError) as info:
        mlopt.read_log(data, **kw)
    # The streaming parser agrees on type and offset.
    parser = mlopt._core.LogParser()
    with pytest.raises(LogFormatError) as streamed:
        parser.feed(data)
        parser.finish()
    assert (streamed.value.offset, streamed.value.reason) == (info.value.offset, info.value.reason)
    return info.value


def test_golden_layout_offsets():
    assert GOLDEN[CTX:OBS] == b'{"context":"f"}\n'
    assert GOLDEN[TERM] == 0x0A and GOLDEN[END] == 0x0A and len(GOLDEN) == END + 1


@pytest.mark.parametrize(
    "header,offset,reason",
    [
        (b'{"features":[\n', 13, "bad header JSON: unexpected end of JSON"),
        (b'{"features":[}]}\n', 13, "bad header JSON: invalid JSON value"),
        (b"[1,2]\n", 0, "bad header: expected a JSON object"),
        (b'{"score":{}}\n', 0, "bad header: missing 'features' list"),
        (b'{"features":[{"name":"x","type":"int128_t","port":0,"shape":[1]}]}\n', 0,
         "bad header: tensor spec 'x': unknown tensor type 'int128_t'"),
        (b'{"features":[{"name":"x","type":"float","shape":[1]}]}\n', 0,
         "bad header: tensor spec 'x': needs an integer 'port'"),
        (b'{"features":[],"score":{"name":"r","type":"float","port":0,"shape":[-2]}}\n', 0,
         "negative dimension -2"),
    ],
)
def test_bad_header(header, offset, reason):
    e = error_of(header + b'{"context":""}\n')
    assert e.offset == offset and reason in e.reason


def test_header_without_newline():
    e = error_of(HEADER[:-1])
    assert e.offset == 0 and "without the header's terminating newline" in e.reason


def test_missing_outcome_before_next_observation():
    obs = GOLDEN[OBS:OUTCOME]
    data = GOLDEN[:OUTCOME] + obs.replace(b":0}", b":1}") + GOLDEN[OUTCOME:]
    e = error_of(data)
    assert e.offset == OUTCOME
    assert e.reason.startswith("missing outcome for observation 0 of context \"f\"")


def test_missing_outcome_at_end_of_input():
    e = error_of(GOLDEN[:OUTCOME])
    assert e.offset == OUTCOME and e.reason.startswith("missing outcome for observation 0")


def test_mismatched_outcome():
    e = error_of(GOLDEN.replace(b'{"outcome":0}', b'{"outcome":7}'))
    assert e.offset == OUTCOME and e.reason == 'outcome 7 does not match observation 0 of context "f"'


def test_outcome_without_observation():
    data = GOLDEN[:OBS] + GOLDEN[OUTCOME:]
    e = error_of(data)
    assert e.offset == OBS and e.reason == "outcome record without a preceding observation"


@pytest.mark.parametrize("cut,offset,name,left", [(A + 3, A, "a", 3), (B + 5, B, "b", 5), (OBS + 18, A, "a", 0)])
def test_truncated_tensor(cut, offset, name, left):
    e = error_of(GOLDEN[:cut])
    assert e.offset == offset
    assert e.reason.startswith(f"truncated tensor '{name}' in observation 0 of context \"f\"")
    assert e.reason.endswith(f"input ends after {left}")


def test_truncated_score_tensor():
    e = error_of(GOLDEN[:SCORE + 1])
    assert e.offset == SCORE and e.reason.startswith("truncated tensor 'reward' (outcome of observation 0")


def test_missing_observation_terminator():
    data = GOLDEN[:TERM] + b"X" + GOLDEN[TERM + 1:]
    e = error_of(data)
    assert e.offset == TERM
    assert e.reason == ('missing observation terminator: expected 0x0a after the 16 payload bytes '
                        'of observation 0 of context "f", found 0x58')


def test_missing_observation_terminator_at_end_of_input():
    e = error_of(GOLDEN[:TERM])
    assert e.offset == TERM and e.reason.startswith("missing observation terminator: input ends")


def test_missing_outcome_terminator():
    e = error_of(GOLDEN[:END] + b"\x00")
    assert e.offset == END and e.reason.startswith("missing outcome terminator")
    e = error_of(GOLDEN[:END])
    assert e.offset == END and e.reason.startswith("missing outcome terminator: input ends")


def test_observation_before_context():
    e = error_of(GOLDEN[:CTX] + GOLDEN[OBS:])
    assert e.offset == CTX and e.reason == "observation 0 comes before any context record"


def test_binary_garbage_where_a_record_should_be():
    e = error_of(GOLDEN + b"\x00\x01")
    assert e.offset == len(GOLDEN) and "found byte 0x00" in e.reason


def test_unknown_record_and_bad_record_json():
    assert error_of(GOLDEN + b'{"bogus":1}\n').reason == "unknown record kind 'bogus'"
    e = error_of(GOLDEN + b'{"context":"x"\n')
    assert e.offset == len(GOLDEN) + 14 and e.reason.startswith("bad JSON record")
    e = error_of(GOLDEN + b'{"observation":-1}\n')
    assert "non-negative" in e.reason


def test_truncated_json_line():
    e = error_of(GOLDEN + b'{"conte')
    assert e.offset == len(GOLDEN) and "input ends inside a JSON record line" in e.reason


def test_error_names_the_file(tmp_path):
    path = tmp_path / "bad.log"
    path.write_bytes(GOLDEN[:B + 1])
    with pytest.raises(LogFormatError) as info:
        mlopt.read_log(path)
    assert info.value.path == str(path)
    assert str(info.value) == f"{path}: byte {B}: {info.value.reason}"
    with pytest.raises(LogFormatError, match=str(path)):
        list(mlopt.LogStream(path))


def test_allow_truncated_drops_only_the_incomplete_tail(tmp_path):
    w = mlopt.LogWriter(None, [TensorSpec("x", "int64_t", [1])])
    w.switch_context("")
    for i in range(3):
        w.log_observation([i])
    data = w.getvalue()
    cut = data[:-5]
    with pytest.warns(mlopt.TruncatedLogWarning, match="dropped an incomplete last record"):
        log = mlopt.read_log(cut, allow_truncated=True)
    assert log["x"].ravel().tolist() == [0, 1] and log.truncated_bytes == 18 + 8 + 1 - 5
    assert "truncated tensor 'x' in observation 2" in log.truncation_reason
    # Corruption (not truncation) is still an error in that mode.
    with pytest.raises(LogFormatError):
        mlopt.read_log(data[:-1] + b"X" + data, allow_truncated=True)
    # Complete logs give no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(mlopt.read_log(data, allow_truncated=True)) == 3


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        mlopt.read_log(tmp_path / "nope.log")
    assert info.value.filename == str(tmp_path / "nope.log")


def test_stream_error_on_a_pipe():
    r, wfd = os.pipe()
    os.write(wfd, GOLDEN[:TERM] + b"X")
    os.close(wfd)
    with pytest.raises(LogFormatError) as info:
        list(mlopt.LogStream(r))
    os.close(r)
    assert info.value.offset == TERM


def test_writer_refuses_out_of_order_calls(tmp_path):
    x, y = TensorSpec("x", "int64_t", [1]), TensorSpec("y", "float", [2])
    w = mlopt.LogWriter(None, [x, y], score=TensorSpec("r", "float", [1]))
    with pytest.raises(mlopt.LogUsageError, match="no context yet"):
        w.start_observation()
    w.switch_context("c")
    w.start_observation()
    with pytest.raises(mlopt.LogUsageError, match="logged out of order"):
        w.log_tensor("y", [1, 2])
    with pytest.raises(mlopt.LogUsageError, match="got 3 values"):
        w.log_tensor("x", [1, 2, 3])
    with pytest.raises(mlopt.LogUsageError, match="do not fit int64_t"):
        w.log_tensor("x", 1.5)
    w.log_tensor("x", 1)
    with pytest.raises(mlopt.LogUsageError, match="feature 'y' was not logged"):
        w.end_observation()
    w.log_tensor("y", [1, 2])
    w.end_observation()
    with pytest.raises(mlopt.LogUsageError, match="has no reward yet"):
        w.start_observation()
    w.log_reward(1.0)
    with pytest.raises(mlopt.LogUsageError, match="already has its reward"):
        w.log_reward(1.0)
    before = w.getvalue()
    assert len(mlopt.read_log(before)) == 1  # nothing corrupt was written


def test_writer_never_overwrites_by_default(tmp_path):
    path = tmp_path / "keep.log"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        mlopt.LogWriter(path, [])
    assert path.read_bytes() == b"precious"
    mlopt.LogWriter(path, [], overwrite=True).close()
    assert path.read_bytes() == b'{"features":[]}\n'

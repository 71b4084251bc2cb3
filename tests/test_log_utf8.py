"""Bytes that are not UTF-8 in every string position of a log: read
faithfully where they are data (tensor names, context names come back with
surrogate escapes), rejected with LogFormatError and an offset inside the
record where they break the format, never another exception; by the
strict and the lenient reader, the streaming parser and LogStream. Error
messages quote such bytes as \\xNN (a valid str)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import mlopt
from mlopt import LogFormatError
from tests.support.golden import GOLDEN


def _records(data: bytes, allow_truncated: bool) -> list:
    """The observations as LogStream yields them."""
    with mlopt.LogStream(io.BytesIO(data), chunk_size=7, allow_truncated=allow_truncated) as stream:
        return [(obs.context, obs.id, [np.asarray(obs[i]).tobytes() for i in range(len(obs.schema.features))])
                for obs in stream]


def _every_reader(data: bytes):
    """(name, callable) for each reader; each returns what it read."""
    for lenient in (False, True):
        yield f"read_log(allow_truncated={lenient})", lambda lenient=lenient: mlopt.read_log(
            data, allow_truncated=lenient)
        yield f"LogStream(allow_truncated={lenient})", lambda lenient=lenient: _records(data, lenient)

    def parser():
        p = mlopt._core.LogParser()
        p.feed(data)
        p.finish()
        return p

    yield "LogParser", parser


DATA_CASES = {  # position -> (bytes replaced, by)
    "feature name": (b'"name":"a"', b'"name":"a\xff"'),
    "feature name (truncated sequence)": (b'"name":"b"', b'"name":"b\xe2\x82"'),
    "score name": (b'"name":"reward"', b'"name":"rew\xc0\xafard"'),  # an overlong '/'
    "context name": (b'{"context":"f"}', b'{"context":"f\xfe\xed\xa0\x80"}'),  # and a UTF-8-encoded surrogate
}


@pytest.mark.parametrize("case", sorted(DATA_CASES))
def test_non_utf8_data_is_read_faithfully(case):
    old, new = DATA_CASES[case]
    data = GOLDEN.replace(old, new, 1)
    reference = mlopt.read_log(GOLDEN)
    raw = new.split(b'"')[-2]
    name = raw.decode("utf-8", "surrogateescape")
    assert name.encode("utf-8", "surrogateescape") == raw
    for lenient in (False, True):
        log = mlopt.read_log(data, allow_truncated=lenient)
        names = [s.name for s in log.features] + ([log.score_spec.name] if log.score_spec is not None else [])
        if "context" in case:
            assert log.contexts == [name]
        else:
            assert name in names
        for spec, ref in zip(log.features, reference.features):
            np.testing.assert_array_equal(log[spec.name], reference[ref.name])
    stream = _records(data, False)
    assert stream == [(c if "context" not in case else name, i, cols) for c, i, cols in _records(GOLDEN, False)]


FORMAT_CASES = {  # position -> (bytes replaced, by, the record that breaks: where it starts in the new bytes)
    "header key": (b'"port":0,"shape":[1]}', b'"port":0,"sh\xffape":[1]}', b"{"),
    "header type": (b'"type":"int64_t"', b'"type":"int64\xff"', b"{"),
    # an unknown header key is ignored (as LLVM does): the log then has no score, and its outcome breaks
    "header top-level key": (b'"score":', b'"sc\xf5ore":', b'{"outcome"'),
    "context key": (b'{"context"', b'{"cont\xffext"', b'{"cont'),
    "observation key": (b'{"observation"', b'{"observ\xffation"', b'{"observ'),
    "observation value": (b'{"observation":0}', b'{"observation":"\xff"}', b'{"observation"'),
    "observation bare byte": (b'{"observation":0}', b'{"observation":\xff}', b'{"observation"'),
    "outcome key": (b'{"outcome"', b'{"out\x80come"', b'{"out'),
    "outcome value": (b'{"outcome":0}', b'{"outcome":"\xc3"}', b'{"outcome"'),
    "unknown record key": (b'{"outcome":0}', b'{"x\xff":0}', b'{"x'),
}


@pytest.mark.parametrize("case", sorted(FORMAT_CASES))
def test_non_utf8_that_breaks_the_format_is_a_log_format_error(case):
    old, new, record = FORMAT_CASES[case]
    data = GOLDEN.replace(old, new, 1)
    assert data != GOLDEN
    start = data.index(record)
    end = data.index(b"\n", start)
    errors = []
    for reader, read in _every_reader(data):
        with pytest.raises(LogFormatError) as info:
            read()
        e = info.value
        assert start <= e.offset <= end, (reader, e.offset, start, end, str(e))
        str(e).encode("utf-8")  # a message that can be printed: no surrogates, no undecodable bytes
        errors.append((e.offset, e.reason))
    assert len(set(errors)) == 1, errors  # every reader reports the same offset and reason


def test_messages_quote_non_utf8_bytes_as_escapes():
    data = GOLDEN.replace(b'"type":"int64_t"', b'"type":"int64\xff"', 1)
    with pytest.raises(LogFormatError) as info:
        mlopt.read_log(data)
    assert "int64\\xff" in info.value.reason
    assert isinstance(info.value, ValueError)


def test_non_utf8_names_through_the_writer_are_written_as_llvm_writes_them(tmp_path):
    """JSON cannot carry them: llvm::json writes U+FFFD for each ill-formed
    subpart (fixUTF8), and so does LogWriter; the reader reads that back."""
    name = b"f\xff".decode("utf-8", "surrogateescape")
    spec = mlopt.TensorSpec(name, "int64_t", [1])
    assert spec.name == name and repr(spec) == f"TensorSpec({name!r}, 'int64_t', [1])"
    assert spec.to_json() == '{"name":"f\ufffd","type":"int64_t","port":0,"shape":[1]}'
    with mlopt.LogWriter(tmp_path / "x.log", [spec]) as w:
        w.switch_context(b"c\xfe".decode("utf-8", "surrogateescape"))
        w.log_observation({name: 7})
    log = mlopt.read_log(tmp_path / "x.log")
    assert log.feature_names == ["f\ufffd"] and int(log["f\ufffd"][0, 0]) == 7
    assert log.contexts == ["c\ufffd"]

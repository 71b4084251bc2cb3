"""Atheris harness: mlopt's Python entry points on untrusted bytes.

    python3 fuzz/python_harness.py TARGET [libFuzzer options] [CORPUS...]

TARGET is read_log (whole logs, strict and lenient), log_stream (the same
bytes fed to LogStream in random chunks) or load_policy (a .tflite file
loaded as the plugin would, then read by the policy compiler). Only the
documented error types may escape: anything else is a finding.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings

import atheris

with atheris.instrument_imports():  # the modules themselves (mlopt's facade imports lazily)
    import mlopt
    import mlopt.log
    import mlopt.policy
    import mlopt.problems.inlining
    import mlopt.tflite
    from mlopt.policy import generate_source

warnings.simplefilter("ignore")
MODEL = os.path.join(tempfile.mkdtemp(prefix="mlopt-fuzz-"), "model.tflite")


class Chunks(io.RawIOBase):
    """A stream that returns the data in the chunk sizes it is given."""

    def __init__(self, data: bytes, sizes: list[int]):
        self.data, self.sizes, self.at, self.k = data, sizes or [len(data) or 1], 0, 0

    def readable(self):
        return True

    def read(self, n=-1):
        size = self.sizes[self.k % len(self.sizes)]
        self.k += 1
        out = self.data[self.at : self.at + max(1, min(size, n if n > 0 else size))]
        self.at += len(out)
        return out


def read_log(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    lenient = fdp.ConsumeBool()
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    try:
        log = mlopt.read_log(body, allow_truncated=lenient)
        for name in log.keys():  # noqa: SIM118 (a Log is not a dict)
            log[name].sum()
    except mlopt.LogFormatError:
        pass


def log_stream(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    sizes = [fdp.ConsumeIntInRange(1, 64) for _ in range(fdp.ConsumeIntInRange(1, 8))]
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    try:
        with mlopt.LogStream(Chunks(body, sizes), chunk_size=64) as stream:
            for obs in stream:
                for i in range(len(obs.schema.features)):
                    obs[i]
    except mlopt.LogFormatError:
        pass


def load_policy(data: bytes) -> None:
    with open(MODEL, "wb") as f:
        f.write(data)
    with contextlib.suppress(mlopt.PolicyError):
        mlopt.load_policy(MODEL).evaluate(__import__("numpy").zeros((1, 38), "int64"))
    with contextlib.suppress(mlopt.PolicyCompileError):
        generate_source(MODEL)


TARGETS = {"read_log": read_log, "log_stream": log_stream, "load_policy": load_policy}

if __name__ == "__main__":
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()

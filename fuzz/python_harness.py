"""Atheris harness: mlopt's Python entry points on untrusted bytes.

    python3 fuzz/python_harness.py TARGET [libFuzzer options] [CORPUS...]

Every public parser entry point, through the Python binding (TARGETS):

- read_log: a log's bytes, strict and lenient; read_log_path: the same from a file
- log_stream: the same bytes fed to LogStream in random chunks
- load_policy: a .tflite file loaded as the plugin would, then read by the policy compiler
- load_policy_so: bytes as a compiled policy .so (dlopen must refuse them)
- output_spec: a model directory (a valid model.tflite) with fuzzed output_spec.json
- corpus: corpus_description.json and a module's .cmd file (a valid .bc)
- vocab: a vocab directory's .buckets / .zscore files
- ir2vec_vocab: an IR2Vec vocabulary JSON (its dimension, then LLVM 22 reading it)

Only mlopt's documented errors (MloptError and its subclasses) may escape:
anything else is a finding.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings

import atheris

with atheris.instrument_imports():  # every mlopt module (the facade imports lazily: import them all now)
    import importlib
    import pkgutil

    import mlopt
    import mlopt.compiler
    import mlopt.corpus
    import mlopt.log
    import mlopt.policy
    import mlopt.problems.inlining
    import mlopt.problems.inlining.ir2vec
    import mlopt.tflite
    from mlopt.policy import generate_source

    for _info in pkgutil.walk_packages(mlopt.__path__, "mlopt."):
        if not _info.name.startswith(("mlopt.cli", "mlopt.__main__", "mlopt.workers", "mlopt.training")):
            importlib.import_module(_info.name)

warnings.simplefilter("ignore")
# Files the harnesses write live in memory (tmpfs) where the machine has one.
_SHM = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
WORK = tempfile.mkdtemp(prefix="mlopt-fuzz-", dir=_SHM)
MODEL = os.path.join(WORK, "model.tflite")


def _path(*parts: str) -> str:
    path = os.path.join(WORK, *parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


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


def read_log_path(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    lenient = fdp.ConsumeBool()
    path = _write(_path("in.log"), fdp.ConsumeBytes(fdp.remaining_bytes()))
    try:
        log = mlopt.read_log(path, allow_truncated=lenient)
        assert len(log.contexts) >= 0 and log.features is not None
    except mlopt.LogFormatError as e:
        assert e.path == path and e.offset >= 0, (e.path, e.offset)


def load_policy_so(data: bytes) -> None:
    path = _write(_path("so", "policy.so"), data)
    with contextlib.suppress(mlopt.PolicyError):
        mlopt.load_policy(path)


_VALID_MODEL = None


def _valid_model() -> bytes:
    global _VALID_MODEL
    if _VALID_MODEL is None:
        import numpy as np

        from mlopt.problems.inlining import InlinePolicy

        features = mlopt.problems.get("inlining").feature_names
        vocab = mlopt.Vocab({f: np.arange(4.0) for f in features})
        d = os.path.join(tempfile.mkdtemp(dir=WORK), "m")
        InlinePolicy.random(vocab, hidden=(4,), seed=0).export(d)
        with open(os.path.join(d, "model.tflite"), "rb") as f:
            _VALID_MODEL = f.read()
    return _VALID_MODEL


def output_spec(data: bytes) -> None:
    d = os.path.dirname(_write(_path("dir", "model.tflite"), _valid_model()))
    _write(os.path.join(d, "output_spec.json"), data)
    with contextlib.suppress(mlopt.MloptError):
        mlopt.load_policy(d)


def corpus(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    d = os.path.dirname(_path("corpus", "x"))
    _write(os.path.join(d, "corpus_description.json"), fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 512)))
    _write(os.path.join(d, "m.cmd"), fdp.ConsumeBytes(fdp.remaining_bytes()))
    with contextlib.suppress(mlopt.MloptError):
        mlopt.corpus.corpus_entries(d)
    with contextlib.suppress(mlopt.MloptError):
        mlopt.corpus.Module.from_corpus(_bitcode(), name="m")


def _bitcode() -> str:
    path = os.path.join(WORK, "corpus", "m.bc")
    if not os.path.exists(path):
        import subprocess

        subprocess.run(["clang-19", "-O0", "-c", "-emit-llvm", "-x", "c", "-", "-o", path],
                       input=b"int f(int x) { return x + 1; }\n", check=True)
    return path


def vocab(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    d = tempfile.mkdtemp(dir=WORK)
    _write(os.path.join(d, "a.buckets"), fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 256)))
    if fdp.ConsumeBool():
        _write(os.path.join(d, "b.zscore"), fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 128)))
    _write(os.path.join(d, fdp.ConsumeUnicodeNoSurrogates(8).replace("/", "_").replace("\0", "") + ".buckets"),
           fdp.ConsumeBytes(fdp.remaining_bytes()))
    try:
        with contextlib.suppress(mlopt.MloptError):
            mlopt.Vocab.load(d)
    finally:
        import shutil

        shutil.rmtree(d, ignore_errors=True)


def ir2vec_vocab(data: bytes) -> None:
    path = _write(_path("ir2vec.json"), data)
    with contextlib.suppress(mlopt.MloptError):
        dim = mlopt.problems.inlining.ir2vec.ir2vec_dimension(path)
        mlopt.compiler.inlining_problem(path)
        assert dim > 0


TARGETS = {"read_log": read_log, "read_log_path": read_log_path, "log_stream": log_stream,
           "load_policy": load_policy, "load_policy_so": load_policy_so, "output_spec": output_spec,
           "corpus": corpus, "vocab": vocab, "ir2vec_vocab": ir2vec_vocab}

if __name__ == "__main__":
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()

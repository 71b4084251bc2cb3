"""Seed corpora for the fuzz harnesses, made by mlopt's own tools from real
inputs: training logs written by LogWriter and (when LLVM 19 is here) by
the pass plugin on real C code, tensor specs from those logs' headers,
compiled-policy signatures from `mlopt policy compile`, and .tflite models
from the exporter. Writes fuzz/seeds/<harness>/ (existing files are kept).

    python3 fuzz/make_seeds.py [--out fuzz/seeds]
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the golden log, the corpus builder

import mlopt  # noqa: E402
from mlopt.problems import inlining  # noqa: E402
from tests.support.golden import GOLDEN  # noqa: E402


def put(directory: Path, data: bytes) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / hashlib.sha1(data).hexdigest()[:16]
    if not path.exists():
        path.write_bytes(data)


def logs(tmp: Path) -> list[bytes]:
    out = [GOLDEN]
    specs = [mlopt.TensorSpec("i", "int64_t", [1]), mlopt.TensorSpec("f", "float", [2, 3]),
             mlopt.TensorSpec("u", "uint8_t", [0]), mlopt.TensorSpec("d", "double", [])]
    w = mlopt.LogWriter(None, specs, score=mlopt.TensorSpec("r", "float", [1]),
                        advice=mlopt.TensorSpec("a", "int64_t", [1]))
    for ctx in ("f", "g\n\"q\"", "f"):
        w.switch_context(ctx)
        for i in range(3):
            w.log_observation([i, np.full(6, i / 3), np.zeros(0), 1e300], score=0.5 * i)
    out.append(w.getvalue())
    if shutil.which("opt-19") and shutil.which("clang-19"):
        from mlopt.compiler.plugin import opt_flags
        from tests.support.corpus import bitcode, c_sources, include_flags

        for source in c_sources("lz4")[:2]:
            bc = bitcode("clang-19", source, tmp, flags=include_flags("lz4"))
            log = tmp / f"{bc.stem}.log"
            subprocess.run(["opt-19", *opt_flags(training_log=log, llvm=19), "-passes=default<Oz>", str(bc), "-o",
                            "/dev/null"], check=True)
            data = log.read_bytes()
            header = data.index(b"\n") + 1
            out.append(data[: header + 8 * 1024])  # the header and the first records
    return out


def models(tmp: Path) -> tuple[list[bytes], list[bytes]]:
    rng = np.random.default_rng(0)
    vocab = mlopt.Vocab({f: np.sort(rng.integers(-50, 500, 10)).astype(float) for f in inlining.FEATURES})
    tflites, signatures = [], []
    for i, policy in enumerate([mlopt.InlinePolicy.random(vocab, hidden=(4,), seed=1),
                                mlopt.InlinePolicy.constant(1)]):
        directory = policy.export(tmp / f"m{i}", logits_output=i == 0)
        tflites.append((directory / "model.tflite").read_bytes())
        so = mlopt.compile_policy(directory, tmp / f"m{i}.so")
        lib = ctypes.CDLL(str(so))
        lib.mlopt_policy_signature.restype = ctypes.c_char_p
        signatures.append(lib.mlopt_policy_signature())
    return tflites, signatures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "fuzz" / "seeds"))
    out = Path(ap.parse_args().out)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        all_logs = logs(tmp)
        for data in all_logs:
            put(out / "log_parser", data)
            header = json.loads(data[: data.index(b"\n")])
            for spec in header["features"] + [header.get("score")] + [header.get("advice")]:
                if spec:
                    put(out / "tensor_spec", json.dumps(spec, separators=(",", ":")).encode())
        tflites, signatures = models(tmp)
        for data in tflites:
            put(out / "tflite_verifier", data)
            put(out / "model_load", data)
        for data in signatures:
            put(out / "compiled_signature", data)
    for name in sorted(p.name for p in out.iterdir()):
        print(f"{name}: {len(list((out / name).iterdir()))} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())

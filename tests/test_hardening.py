"""Nothing mlopt does aborts a compiler or leaves a log that looks complete
when it is not: a full disk is one error line and a non-zero exit."""

from __future__ import annotations

import errno
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import mlopt
from mlopt.cli import main
from mlopt.compiler.plugin import clang_flags, opt_flags
from tests.support.corpus import c_sources, include_flags

FULL = "error: mlopt: cannot write training log '/dev/full': No space left on device"


def test_plugin_log_on_a_full_disk_is_one_error_in_opt(llvm_tools, plugin, corpus_modules):
    r = subprocess.run([llvm_tools["opt"], *opt_flags(training_log="/dev/full"), "-passes=default<Oz>",
                        str(corpus_modules[0]), "-o", "/dev/null"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert r.stderr == FULL + "\n"  # no "terminate called", no stack dump


def test_plugin_log_on_a_full_disk_is_one_error_in_clang(llvm_tools, plugin, corpus_modules, tmp_path):
    source = c_sources("lz4")[0]
    r = subprocess.run([llvm_tools["clang"], "-Oz", *include_flags("lz4"), *clang_flags(training_log="/dev/full"),
                        "-c", str(source), "-o", str(tmp_path / "x.o")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert FULL in r.stderr and "Stack dump" not in r.stderr and "terminate" not in r.stderr
    assert not (tmp_path / "x.o").exists()


def test_log_writer_on_a_full_disk_raises_and_is_failed():
    spec = mlopt.TensorSpec("a", "int64_t", [1])
    w = mlopt.LogWriter("/dev/full", [spec], overwrite=True)
    w.switch_context("f")
    w.log_observation([1])
    with pytest.raises(OSError) as info:
        w.close()
    assert info.value.errno == errno.ENOSPC and info.value.filename == "/dev/full"
    with pytest.raises(mlopt.LogUsageError):
        w.log_observation([2])


def test_an_incomplete_log_file_is_removed(tmp_path):
    """A log that hits a write error part-way (here the file size limit) is
    not left behind looking like a shorter, complete log."""
    path = tmp_path / "cut.log"
    code = f"""
import resource, signal, mlopt, numpy as np
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
w = mlopt.LogWriter({str(path)!r}, [mlopt.TensorSpec("a", "int64_t", [1000])])
w.switch_context("f")
try:
    for i in range(400):
        w.log_observation([np.full(1000, i)])
    w.close()
except OSError as e:
    print("errno", e.errno)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout == f"errno {errno.EFBIG}\n", r.stderr
    assert not path.exists()


def test_compile_cli_log_on_a_full_disk_is_one_line(tmp_path, capsys):
    module = tmp_path / "m.ll"
    module.write_text("define i32 @f(i32 %x) {\n  ret i32 %x\n}\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "m.log").symlink_to("/dev/full")
    pytest.importorskip("mlopt._engine19")
    assert main(["compile", str(module), "--log-dir", str(logs), "--force"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"mlopt: error: {logs / 'm.log'}: No space left on device"


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """A real policy .tflite (the exporter's graph, 38 BUCKETIZE inputs)."""
    import numpy as np

    from mlopt.problems import inlining

    rng = np.random.default_rng(0)
    vocab = mlopt.Vocab({f: np.sort(rng.integers(-50, 500, 20)).astype(float) for f in inlining.FEATURES})
    path = tmp_path_factory.mktemp("model") / "policy.tflite"
    path.write_bytes(mlopt.InlinePolicy.random(vocab, hidden=(8,), seed=3).to_tflite(logits_output=True))
    return path


def test_every_truncation_of_a_real_model_is_a_typed_error(small_model, tmp_path):
    data = small_model.read_bytes()
    cut = tmp_path / "cut.tflite"
    for n in range(len(data)):
        cut.write_bytes(data[:n])
        with pytest.raises(mlopt.PolicyError) as info:
            mlopt.load_policy(cut)
        assert "truncated or corrupt" in str(info.value) or "no TFL3 identifier" in str(info.value), n
        with pytest.raises(mlopt.PolicyCompileError):
            mlopt.policy.generate_source(cut)
    assert mlopt.load_policy(small_model).kind == "tflite"  # the whole file is fine


def test_truncated_models_in_opt_clang_and_the_cli(llvm_tools, plugin, corpus_modules, small_model, tmp_path):
    data = small_model.read_bytes()
    source = c_sources("lz4")[0]
    lengths = sorted({0, 7, 8, 100, len(data) // 3, len(data) // 2, len(data) - 1, *range(9, len(data), 2749)})
    for n in lengths:
        cut = tmp_path / f"cut{n}.tflite"
        cut.write_bytes(data[:n])
        runs = {
            "opt": [llvm_tools["opt"], *opt_flags(model=cut), "-passes=default<Oz>", str(corpus_modules[0]),
                    "-o", "/dev/null"],
            "clang": [llvm_tools["clang"], "-Oz", *include_flags("lz4"), *clang_flags(model=cut), "-c",
                      str(source), "-o", str(tmp_path / "x.o")],
            "check": [sys.executable, "-m", "mlopt", "policy", "check", str(cut)],
        }
        for tool, argv in runs.items():
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert r.returncode == 1, (tool, n, r.returncode, r.stderr[-500:])
            errors = [line for line in r.stderr.splitlines() if "error" in line]
            assert errors and "mlopt" in errors[0] and str(cut) in errors[0], (tool, n, r.stderr)
            assert "Stack dump" not in r.stderr, (tool, n)


@pytest.mark.parametrize("header,reason", [
    # found by fuzzing: a header announcing a 400 GB tensor made read_log allocate it
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[100000000000]}]}\n{"context":"f"}\n'
     b'{"observation":0}\n', "truncated tensor 'a'"),
    # found by fuzzing: 100,000 dimensions aborted the interpreter (numpy allows 64)
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[' + b",".join([b"1"] * 100000) + b"]}]}\n",
     "100000 dimensions (at most 32)"),
    (b'{"features":' + b"[" * 100000 + b"]" * 100000 + b"}\n", "nested too deeply"),
])
def test_hostile_headers_are_format_errors(header, reason):
    with pytest.raises(mlopt.LogFormatError, match=re.escape(reason)):
        mlopt.read_log(header)
    with pytest.raises(mlopt.LogFormatError, match=re.escape(reason)):
        list(mlopt.LogStream(io.BytesIO(header)))


def test_a_model_changed_under_a_loaded_policy(small_model, tmp_path):
    """A loaded policy runs from its own verified copy: the file may be
    truncated or replaced; a new load reports the new contents."""
    model = tmp_path / "live.tflite"
    model.write_bytes(small_model.read_bytes())
    so = mlopt.compile_policy(small_model, tmp_path / "live.so")
    code = f"""
import mlopt, numpy as np
rows = np.zeros((4, 38), np.int64)
t, s = mlopt.load_policy({str(model)!r}), mlopt.load_policy({str(so)!r})
before = (t.decide(rows).tolist(), s.decide(rows).tolist())
for p in ({str(model)!r}, {str(so)!r}):
    with open(p, "r+b") as f:
        f.truncate(100)           # in place, as a half-finished copy would
after = (t.decide(rows).tolist(), s.decide(rows).tolist())
print(before == after)
for p in ({str(model)!r}, {str(so)!r}):
    try:
        mlopt.load_policy(p)
    except mlopt.PolicyError as e:
        print(type(e).__name__)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]  # no SIGBUS from the truncated .so
    assert r.stdout.split() == ["True", "PolicyError", "PolicyError"]


def test_compiled_policies_loaded_in_turn_stay_distinct(tmp_path):
    """Each compiled policy is dlopen()ed from its own unnamed copy, through
    a descriptor number that a later load reuses once it is closed: the
    loader, which hands back a loaded library of the same name, must still
    load each new policy, and no descriptor may stay open."""
    rows = np.zeros((3, 38), np.int64)
    sos = [mlopt.compile_policy(mlopt.InlinePolicy.constant(d).export(tmp_path / f"m{k}"), tmp_path / f"p{k}.so")
           for k, d in enumerate((1, 0, 1, 0))]
    fds = len(os.listdir("/proc/self/fd"))
    for so, expected in zip(sos * 2, (1, 0, 1, 0) * 2):
        assert mlopt.load_policy(so).decide(rows).tolist() == [expected] * 3, so
    assert len(os.listdir("/proc/self/fd")) == fds


def test_errors_do_not_depend_on_how_input_arrives():
    """Found by fuzzing: a missing outcome was "bad JSON record" read whole
    and "missing outcome" read in pieces. Same offset, same reason now."""
    w = mlopt.LogWriter(None, [mlopt.TensorSpec("a", "int64_t", [1])], score=mlopt.TensorSpec("r", "float", [1]))
    w.switch_context("f")
    w.log_observation([1], score=0.5)
    good = w.getvalue()
    cut = good.rindex(b'{"outcome"')
    bad = good[:cut] + b"\x00garbage\n" + good[cut:]
    with pytest.raises(mlopt.LogFormatError) as whole:
        mlopt.read_log(bad)
    for chunk in (1, 2, 7, 64):
        with pytest.raises(mlopt.LogFormatError) as pieces:
            list(mlopt.LogStream(io.BytesIO(bad), chunk_size=chunk))
        assert (pieces.value.offset, pieces.value.reason) == (whole.value.offset, whole.value.reason)
    assert whole.value.offset == cut and "missing outcome" in whole.value.reason


def test_a_model_asking_for_gigabytes_is_refused(tmp_path):
    """Found by fuzzing: a mutated model whose signature tensor needed 5 GB
    had mlopt allocate it. Policy tensors are limited (64 MiB each)."""
    import numpy as np

    from mlopt.tflite import GraphBuilder
    from tests.support.models import good_inputs

    g = GraphBuilder(signature_key="action")
    first = [g.input(n.split(":")[0].removeprefix("action_"), n, d, s) for n, d, s in good_inputs()][0]
    huge = g.op("CAST", [first], np.float32, [1 << 28], g.options("CastOptions", inDataType=4, outDataType=0))
    g.output("inlining_decision", g.op("ARG_MAX", [huge, g.const("axis", np.array([0], np.int32))], np.int64, [1],
                                       g.options("ArgMaxOptions", outputType=4), name="inlining_decision:0"))
    model = tmp_path / "huge.tflite"
    model.write_bytes(g.finish())
    with pytest.raises(mlopt.PolicyError, match=r"1073741824 bytes \(a policy tensor may have at most 64 MiB\)"):
        mlopt.load_policy(model)


def _patched(model_bytes: bytes, patch) -> bytes:
    """A model re-packed after patch(ModelT) (the flatbuffers object API)."""
    import flatbuffers

    from mlopt.tflite import schema

    s = schema()
    m = s.ModelT.InitFromObj(s.Model.GetRootAs(model_bytes, 0))
    patch(m)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_an_operator_writing_a_constant_is_refused_before_litert(tmp_path):
    """Found by fuzzing: a verified model whose operator wrote into a constant
    tensor crashed LiteRT (SEGV writing the read-only model). The verifier
    checks the dataflow: every tensor read is written first, nothing writes a
    constant or an input, each tensor is written once."""
    import numpy as np

    from tests.support.models import good_inputs, tiny_model

    good = tiny_model(good_inputs())
    constant = next(i for i, t in enumerate(_tensors(good)) if t.buffer)

    def write_constant(m):
        m.subgraphs[0].operators[0].outputs = np.array([constant], np.int32)

    path = tmp_path / "bad.tflite"
    path.write_bytes(_patched(good, write_constant))
    with pytest.raises(mlopt.PolicyError, match=r"operator #0: writes tensor #\d+, which is a constant"):
        mlopt.load_policy(path)


def _tensors(model_bytes):
    from mlopt.tflite import schema

    s = schema()
    return s.ModelT.InitFromObj(s.Model.GetRootAs(model_bytes, 0)).subgraphs[0].tensors


def test_undecodable_names_are_not_a_crash_of_the_reader(tmp_path):
    """Found by fuzzing: a signature name that is not UTF-8 raised
    UnicodeDecodeError from the policy compiler's reader."""
    from tests.support.models import good_inputs, tiny_model

    def bad_name(m):
        m.signatureDefs[0].inputs[0].name = b"\xfc\xfd"

    path = tmp_path / "names.tflite"
    path.write_bytes(_patched(tiny_model(good_inputs()), bad_name))
    # Inputs bind by tensor name, so the model still loads; the reader keeps
    # the name with a replacement character instead of failing.
    assert mlopt.load_policy(path).kind == "tflite"
    assert "\\ufffd" in mlopt.policy.generate_source(path)


@pytest.mark.parametrize("suffix", [".buckets", ".zscore"])
def test_vocab_file_with_non_utf8_bytes_is_a_vocab_error(tmp_path, suffix):
    """Found by fuzz/python_harness.py vocab: it raised UnicodeDecodeError."""
    (tmp_path / f"a{suffix}").write_bytes(b"\xff2\n")
    with pytest.raises(mlopt.VocabError, match=rf"a{re.escape(suffix)}:1: .*'\\\\xff2"):
        mlopt.Vocab.load(tmp_path)


def test_a_truncated_compiled_policy_is_a_policy_error(small_model, tmp_path):
    """Found by fuzz/python_harness.py load_policy_so: the first 4 KiB of a
    shared object made dlopen map segments past the end of the file (SIGBUS).
    In a subprocess: a regression would kill the interpreter."""
    import struct

    whole = mlopt.compile_policy(small_model, tmp_path / "p.so").read_bytes()
    phoff, = struct.unpack_from("<Q", whole, 32)
    phentsize, phnum = struct.unpack_from("<HH", whole, 54)
    loaded_end = max(offset + filesz for kind, offset, filesz in
                     (struct.unpack_from("<I4xQ16xQ", whole, phoff + i * phentsize) for i in range(phnum))
                     if kind == 1)  # PT_LOAD: where the last byte the loader maps lies
    cuts = [0, 16, 63, 64, 200, loaded_end // 2, loaded_end - 1]
    code = f"""
import mlopt
whole = open({str(tmp_path / 'p.so')!r}, "rb").read()
for cut in {cuts!r}:
    path = {str(tmp_path)!r} + f"/cut{{cut}}.so"
    open(path, "wb").write(whole[:cut])
    try:
        mlopt.load_policy(path)
    except mlopt.PolicyError as e:
        print(cut, str(e).split(": cannot load the compiled policy: ")[1])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    reasons = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert sorted(map(int, reasons)) == cuts
    assert reasons["0"] == reasons["16"] == reasons["63"] == "not an ELF file"
    for cut in cuts[3:]:
        assert reasons[str(cut)].startswith("truncated or corrupt ELF file"), (cut, reasons[str(cut)])

"""The in-process compiler against the real tools: opt-19 (+ the plugin) and llc-19."""

from __future__ import annotations

import json
import re
import subprocess
import threading

import numpy as np
import pytest

import mlopt
from mlopt.compiler.plugin import opt_flags
from mlopt.problems import inlining as inliner
from tests.support.llvm import llc, llvm_size_text, opt

pytestmark = pytest.mark.llvm  # the in-process engine (libLLVM-19)


@pytest.fixture(scope="module")
def modules(llvm_tools, corpus_modules):
    """Compiled as `opt-19 -passes='default<Oz>'` + `llc-19` do (a module
    given without flags is compiled as clang-19 would: see
    test_commandless_module_is_compiled_like_clang)."""
    return [mlopt.Module(p, opt_level="Oz", reloc_model="static", llvm=llvm_tools["major"]) for p in corpus_modules]


@pytest.fixture(scope="module")
def heuristic_results(modules):
    return mlopt.compile_many(modules, keep_object=True, threads=2)


@pytest.fixture(scope="module")
def tflite_policy(heuristic_results, tmp_path_factory):
    """A random MLP over a vocab of real features: it decides both ways."""
    vocab = mlopt.Vocab.from_logs([r.log for r in heuristic_results[:12]], num_buckets=200)
    policy = mlopt.InlinePolicy.random(vocab, hidden=(32, 16), seed=5)
    return policy, policy.export(tmp_path_factory.mktemp("policy") / "model", logits_output=True)


def test_heuristic_objects_equal_opt_then_llc(llvm_tools, corpus_modules, heuristic_results, tmp_path):
    """On every corpus module the in-process object is byte-identical to
    `opt-19 -passes='default<Oz>'` + `llc-19 -filetype=obj`, and text_size is
    the .text size llvm-size reports for llc's object."""
    total = 0
    for path, result in zip(corpus_modules, heuristic_results):
        opt(llvm_tools, path, tmp_path / "o.bc")
        llc(llvm_tools, tmp_path / "o.bc", tmp_path / "o.o")
        assert result.object == (tmp_path / "o.o").read_bytes(), path.name
        assert result.text_size == llvm_size_text(llvm_tools, tmp_path / "o.o"), path.name
        assert not result.warnings
        total += result.text_size
    assert total > 300_000


def test_heuristic_log_identical_to_plugin_log(llvm_tools, plugin, corpus_modules, heuristic_results, tmp_path):
    """The in-process training log is byte-identical to the plugin's
    development-mode log from opt-19, and decisions are its last column."""
    total = 0
    for path, result in zip(corpus_modules, heuristic_results):
        log = tmp_path / f"{path.stem}.log"
        opt(llvm_tools, path, tmp_path / "o.bc", *opt_flags(training_log=log))
        assert result.log_bytes == log.read_bytes(), path.name
        assert np.array_equal(result.decisions, result.log[inliner.DECISION][:, 0])
        assert np.array_equal(result.decisions, result.default_decisions)
        total += len(result.decisions)
    assert total > 2000


def test_tflite_policy_equals_plugin(llvm_tools, plugin, corpus_modules, modules, tflite_policy, tmp_path):
    """With a .tflite policy, objects and logs equal opt-19 with the plugin
    running the same model, + llc-19; the policy really decides."""
    policy, model = tflite_policy
    loaded = mlopt.load_policy(model)
    results = mlopt.compile_many(modules, policy=loaded, keep_object=True, threads=2)
    differs = 0
    for path, result in zip(corpus_modules, results):
        log = tmp_path / f"{path.stem}.log"
        opt(llvm_tools, path, tmp_path / "o.bc", *opt_flags(model=model, training_log=log))
        llc(llvm_tools, tmp_path / "o.bc", tmp_path / "o.o")
        assert result.object == (tmp_path / "o.o").read_bytes(), path.name
        assert result.log_bytes == log.read_bytes(), path.name
        assert np.array_equal(result.decisions, policy.decide(result.log)), path.name
        differs += int((result.decisions != result.default_decisions).sum())
    assert differs > 100


def test_compiled_policy_and_python_callable_equal_tflite(modules, tflite_policy, tmp_path):
    """The compiled .so and the numpy policy called from C++ (slow path) make
    the same decisions as the .tflite inside the engine: same objects."""
    policy, model = tflite_policy
    so = mlopt.compile_policy(model, tmp_path / "p.so")
    some = modules[:6]
    expected = mlopt.compile_many(some, policy=mlopt.load_policy(model), keep_object=True, log=False)
    compiled = mlopt.compile_many(some, policy=mlopt.load_policy(so), keep_object=True, log=False)
    calls = []

    def decide(row):
        calls.append(row.copy())
        return policy.decide(row)[0]

    called = [mlopt.compile(m, policy=decide, keep_object=True) for m in some]
    for e, c, p in zip(expected, compiled, called):
        assert c.object == e.object and p.object == e.object, e.module
        assert np.array_equal(p.decisions, e.decisions)
    assert len(calls) == sum(len(e.decisions) for e in expected)
    assert all(r.dtype == np.int64 and r.shape == (len(inliner.FEATURES),) for r in calls)
    # the callable saw exactly the logged rows
    logged = np.concatenate([inliner.feature_matrix(p.log) for p in called])
    assert np.array_equal(np.stack(calls), logged)


def test_threads_equal_sequential(modules, tflite_policy):
    """Two threads, each compile in its own context: same objects and logs
    byte for byte as one at a time, with and without a policy."""
    _, model = tflite_policy
    loaded = mlopt.load_policy(model)
    some = modules[:10]
    for policy in (None, loaded):
        seq = mlopt.compile_many(some, policy=policy, keep_object=True, threads=1)
        par = mlopt.compile_many(some, policy=policy, keep_object=True, threads=2)
        for s, p in zip(seq, par):
            assert (s.object, s.log_bytes) == (p.object, p.log_bytes), s.module
    assert loaded.loaded_instances == 2  # one per concurrent compile


def test_gil_is_released_while_compiling(modules):
    """A Python thread keeps running while another thread compiles."""
    big = max(modules, key=lambda m: len(m.bitcode))
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        mlopt.compile(big)
    finally:
        done.set()
        t.join()
    assert ticks > 10000


def test_corpus_element_takes_level_target_and_relocation(llvm_tools, corpus_modules, tmp_path):
    """A .bc + .cmd corpus element compiles as its command line says: the -O
    level picks the pipeline and llc's -O, the relocation model goes to codegen."""
    src = corpus_modules[0]
    element = tmp_path / "corpus" / "lz4.bc"
    element.parent.mkdir()
    element.write_bytes(src.read_bytes())
    element.with_suffix(".cmd").write_bytes(
        b"\0".join([b"-cc1", b"-triple", b"x86_64-pc-linux-gnu", b"-O3", b"-mrelocation-model", b"pic",
                    b"-vectorize-loops", b"-vectorize-slp", b"-emit-obj"]))
    m = mlopt.Module.from_corpus(element)
    assert (m.opt_level, m.target, m.reloc_model) == ("O3", "x86_64-pc-linux-gnu", "pic")
    assert (m.loop_vectorize, m.slp_vectorize, m.notes) == (True, True, [])
    result = mlopt.compile(m, keep_object=True)
    opt(llvm_tools, src, tmp_path / "o.bc", "-relocation-model=pic", pipeline="default<O3>")
    llc(llvm_tools, tmp_path / "o.bc", tmp_path / "o.o", "-O3", "-relocation-model=pic")
    assert result.object == (tmp_path / "o.o").read_bytes()
    (tmp_path / "corpus" / "corpus_description.json").write_text('{"modules": ["lz4"]}')
    [again] = mlopt.load_corpus(tmp_path / "corpus")
    assert mlopt.compile(again, keep_object=True).object == result.object


def test_driver_command_lines():
    parse = mlopt.corpus.parse_command_line
    assert parse(["clang", "-Oz", "-c", "x.c"]) == {"opt_level": "Oz", "target": None, "reloc_model": "pic",
                                                    "loop_vectorize": False, "slp_vectorize": True}
    assert parse(["clang", "-O2", "-fno-pic", "--target=aarch64-linux-gnu", "-fno-slp-vectorize"]) == {
        "opt_level": "O2", "target": "aarch64-linux-gnu", "reloc_model": "static",
        "loop_vectorize": True, "slp_vectorize": False}
    assert parse(["-cc1", "-Oz", "-vectorize-slp"])["slp_vectorize"] is True
    assert parse(["-cc1", "-Oz"])["slp_vectorize"] is False  # cc1 runs only what it is told
    assert parse(["-cc1", "-Os"])["reloc_model"] is None  # cc1 without the flag: target default


def test_function_properties_equal_opt_printer(llvm_tools, corpus_modules):
    """Every field of every function equals what
    `opt -passes='print<func-properties>' -enable-detailed-function-properties`
    of the same major prints (LLVM 22 has 5 branch and switch fields more)."""
    for path in corpus_modules[:4]:
        table = mlopt.function_properties(path)
        out = subprocess.run([llvm_tools["opt"], "-passes=print<func-properties>",
                              "-enable-detailed-function-properties", "-disable-output", str(path)],
                             check=True, capture_output=True, text=True).stderr
        printed = {}
        for block in out.split("Printing analysis results of CFA for function '")[1:]:
            name, body = block.split("':", 1)
            printed[name] = {k: int(v) for k, v in re.findall(r"^(\w+): (-?\d+)$", body, re.M)}
        assert list(table["function"]) == list(printed), path.name
        fields = [k for k in table if k != "function"]
        assert len(fields) == {19: 44, 22: 49}[llvm_tools["major"]] and set(fields) == set(next(iter(printed.values())))
        for i, name in enumerate(table["function"]):
            assert {f: int(table[f][i]) for f in fields} == printed[name], (path.name, name)
        basic = mlopt.function_properties(path, detailed=False)
        assert len(basic) == 1 + 9
        assert all(np.array_equal(basic[k], table[k]) for k in basic if k != "function")


def test_bad_input_errors(tmp_path):
    with pytest.raises(mlopt.ModuleError, match=r"^<bytes>:1:2: expected top-level entity"):
        mlopt.Module(b"\x00not ir at all")
    good = mlopt.Module(b"define i32 @f() {\n  ret i32 0\n}\n").bitcode
    with pytest.raises(mlopt.ModuleError, match=r"^cut\.bc: .*"):
        mlopt.Module(good[: len(good) // 2], name="cut.bc")
    bad = tmp_path / "bad.ll"
    bad.write_text("define i32 @f() {\n  ret i32 %nope\n}\n")
    with pytest.raises(mlopt.ModuleError, match=r"bad\.ll:2:\d+: use of undefined value '%nope'"):
        mlopt.Module(bad)
    broken = tmp_path / "broken.ll"
    broken.write_text("define i32 @f(i32 %a) {\n  %b = add i32 %c, 1\n  %c = add i32 %a, 1\n  ret i32 %b\n}\n")
    with pytest.raises(mlopt.ModuleError,
                       match=r"broken\.ll: input module is broken: Instruction does not dominate all uses!"):
        mlopt.Module(broken)
    with pytest.raises(FileNotFoundError, match="missing.bc"):
        mlopt.Module(tmp_path / "missing.bc")
    ok = mlopt.Module(b"define i32 @f() {\n  ret i32 0\n}\n", name="ok.ll")
    with pytest.raises(mlopt.CompileError, match=r"invalid pipeline 'default<Q9>'"):
        mlopt.compile(ok, pipeline="default<Q9>")
    with pytest.raises(mlopt.PolicyError, match="no-such-model"):
        mlopt.compile(ok, policy=tmp_path / "no-such-model.tflite")
    with pytest.raises(mlopt.CompileError, match="unknown relocation model 'weird'"):
        mlopt.compile(mlopt.Module(b"define i32 @f() {\n  ret i32 0\n}\n", reloc_model="weird"))


def test_policy_callable_errors(modules):
    m = modules[0]

    class Boom(Exception):
        pass

    calls = 0

    def explode(row):
        nonlocal calls
        calls += 1
        raise Boom("policy failed")

    with pytest.raises(Boom, match="policy failed"):
        mlopt.compile(m, policy=explode)
    assert calls == 1  # not called again after the first exception
    with pytest.raises(mlopt.PolicyError, match=r"returned 7 for inlining_decision \(expected 0 or 1\)"):
        mlopt.compile(m, policy=lambda row: 7)
    with pytest.raises(mlopt.PolicyError, match=r"returned 0\.5"):
        mlopt.compile(m, policy=lambda row: 0.5)
    # the engine is still usable and deterministic afterwards
    assert mlopt.compile(m).log_bytes == mlopt.compile(m).log_bytes


def test_callable_taking_the_heuristic_decision(modules, heuristic_results):
    """A callable with ``takes_default = True`` gets the heuristic's decision
    as a 39th feature: answering with it is the heuristic's compile, byte
    for byte; answering against it changes every decision. Without the
    attribute it gets the 38 features only."""
    widths = []

    def follow(row):
        widths.append(len(row))
        return int(row[38])

    follow.takes_default = True
    for m, h in list(zip(modules, heuristic_results))[:4]:
        r = mlopt.compile(m, policy=follow)
        assert r.log_bytes == h.log_bytes and r.text_size == h.text_size, m.name
    assert set(widths) == {39}

    def against(row):
        return 1 - int(row[38])

    against.takes_default = True
    m = next(m for m, h in zip(modules, heuristic_results) if len(h.decisions) > 20)
    r = mlopt.compile(m, policy=against)
    assert np.array_equal(r.decisions, 1 - r.default_decisions)
    seen = []
    mlopt.compile(m, policy=lambda row: seen.append(len(row)) or 0)
    assert set(seen) == {38}


def test_cli_compile(corpus_modules, heuristic_results, tflite_policy, tmp_path, capsys):
    from mlopt.cli import main

    paths = [str(p) for p in corpus_modules[:3]]
    assert main(["compile", *paths, "--threads", "2", "--log-dir", str(tmp_path / "logs"), "--json"]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert out.err.count("no compile command; compiled as clang-19 -Oz -c would by default") == 3
    as_clang = mlopt.compile_many(paths)  # what the CLI does with a bare .bc
    assert [r["text_size"] for r in report["modules"]] == [r.text_size for r in as_clang]
    assert report["total"]["decisions"] == sum(len(r.decisions) for r in as_clang)
    for p, r in zip(corpus_modules[:3], as_clang):
        assert (tmp_path / "logs" / f"{p.stem}.log").read_bytes() == r.log_bytes
    # logs are never replaced without --force
    assert main(["compile", paths[0], "--log-dir", str(tmp_path / "logs")]) == 1
    assert "exists (use --force" in capsys.readouterr().err
    _, model = tflite_policy
    assert main(["compile", paths[0], "--model", str(model)]) == 0
    assert main(["compile", str(tmp_path / "nope.bc")]) == 1
    assert "nope.bc: cannot read module" in capsys.readouterr().err
    assert main(["compile", paths[0], "--pipeline", "bogus"]) == 1
    assert "invalid pipeline 'bogus'" in capsys.readouterr().err
    assert main(["compile", paths[0], "--threads", "0"]) == 2


def test_out_of_range_policy_warns_once_per_compile(modules, heuristic_results, tmp_path):
    """A model answering 7 is not a decision: the heuristic decides, and
    every compile reports one warning (not printed: returned)."""
    from tests.support.models import good_inputs, tiny_model

    model = tmp_path / "seven.tflite"
    model.write_bytes(tiny_model(good_inputs(), value=7))
    results = mlopt.compile_many(modules[:2], policy=model, keep_object=True, threads=1)
    for r, h in zip(results, heuristic_results):
        assert len(r.warnings) == 1 and "answered 7 for inlining_decision (expected 0 or 1)" in r.warnings[0]
        assert r.object == h.object and np.array_equal(r.decisions, r.default_decisions)


def test_one_policy_instance_serves_evaluate_and_compiles(modules, heuristic_results, tflite_policy):
    """A loaded policy is loaded once: batch evaluation and a compile share it."""
    _, model = tflite_policy
    loaded = mlopt.load_policy(model)
    assert loaded.loaded_instances == 1
    rows = heuristic_results[0].log
    before = loaded.decide(rows)
    result = mlopt.compile(modules[0], policy=loaded)
    assert loaded.loaded_instances == 1
    assert np.array_equal(loaded.decide(result.log), result.decisions)
    assert np.array_equal(loaded.decide(rows), before)


def test_commandless_module_is_compiled_like_clang(llvm_tools, corpus_modules, tmp_path):
    """A module given without a command line gets clang-19 -Oz -c's .text
    size (PIE, SLP vectorizer on, relative lookup tables) on every corpus
    module, and says how it was compiled."""
    from tests.support.corpus import SDISTS, c_sources, include_flags

    sources = {f"{s.parent.name}_{s.stem}": (s, include_flags(name))
               for name in ("lz4", "brotli") for s in c_sources(name)}
    assert SDISTS and len(sources) == len(corpus_modules)
    results = mlopt.compile_many([mlopt.Module(p) for p in corpus_modules], log=False, threads=2)
    for path, result in zip(corpus_modules, results):
        src, flags = sources[path.stem]
        subprocess.run([llvm_tools["clang"], "-Oz", *flags, "-c", str(src), "-o", str(tmp_path / "c.o")],
                       check=True)
        assert result.text_size == llvm_size_text(llvm_tools, tmp_path / "c.o"), path.name
    note = mlopt.Module(corpus_modules[0]).notes
    assert len(note) == 1 and "compiled as clang-19 -Oz -c would by default" in note[0]


def test_already_optimized_and_optnone_bitcode_are_noted(llvm_tools, corpus_modules, tmp_path):
    src = corpus_modules[0]
    opt(llvm_tools, src, tmp_path / "o.bc")
    optimized = mlopt.Module(tmp_path / "o.bc", opt_level="Oz")
    assert optimized.already_optimized and not mlopt.Module(src, opt_level="Oz").already_optimized
    assert any("already optimized" in n for n in optimized.notes)
    c = tmp_path / "a.c"
    c.write_text("static int f(int x) { return x + 1; }\nint g(int y) { return f(y) * 2; }\n")
    subprocess.run([llvm_tools["clang"], "-O0", "-emit-llvm", "-c", str(c), "-o", str(tmp_path / "a.bc")],
                   check=True)
    [note] = mlopt.Module(tmp_path / "a.bc", opt_level="Oz").notes
    assert "2 of 2 functions are optnone" in note


def test_text_size_cache_gives_uncached_sizes_on_every_module(modules, tflite_policy, tmp_path):
    """The codegen cache returns exactly the .text an uncached compile gives,
    on every corpus module, for the heuristic and two policies that differ
    on some modules and agree on others; repeated decisions hit."""
    policy, _ = tflite_policy
    nudged = mlopt.InlinePolicy(policy.vocab, [(w * 1.02, b) for w, b in policy.layers])
    policies = [None, mlopt.load_policy(policy.export(tmp_path / "a")),
                mlopt.load_policy(nudged.export(tmp_path / "b"))]
    cache = mlopt.compiler.TextSizeCache()
    hits = 0
    for p in policies:
        uncached = mlopt.compile_many(modules, p, log=False, threads=2)
        for m, u in zip(modules, uncached):
            first = mlopt.compile(m, p, log=False, cache=cache)
            again = mlopt.compile(m, p, log=False, cache=cache)
            assert first.text_size == again.text_size == u.text_size, m.name
            assert again.cache_hit
            hits += first.cache_hit
    assert hits > 0  # the nudged policy repeats the first one's decisions on some modules
    assert cache.hits == hits + len(policies) * len(modules)
    with pytest.raises(TypeError):
        mlopt.compile(modules[0], cache=object())


def test_forced_decisions_override_the_policy_then_hand_back(modules, heuristic_results, tflite_policy, llvm_tools,
                                                            tmp_path):
    """Forcing a compile to the heuristic's own decisions reproduces its
    object byte for byte; forcing a prefix with one decision flipped makes
    exactly those decisions, then the policy decides the rest (its answers
    on the logged features); forcing all the decisions a compile made
    reproduces its object (a searched trajectory is a reproducible artifact)."""
    policy, model = tflite_policy
    loaded = mlopt.load_policy(model)
    changed = 0
    for m, h in zip(modules[:12], heuristic_results[:12]):
        same = mlopt.compile(m, forced_decisions=h.decisions, keep_object=True)
        assert same.object == h.object and np.array_equal(same.decisions, h.decisions)
        if len(h.decisions) < 3:
            continue
        k = len(h.decisions) // 2
        forced = h.decisions[:k + 1].copy()
        forced[k] ^= 1
        flipped = mlopt.compile(m, loaded, forced_decisions="".join(map(str, forced)), keep_object=True)
        assert np.array_equal(flipped.decisions[:k + 1], forced), m.name
        free = mlopt.compile(m, loaded)  # the policy's own answers after the prefix: at the same sites when
        tail = flipped.decisions[k + 1:]  # the log's features match
        rows = {f: flipped.log[f][k + 1:] for f in inliner.FEATURES}
        assert np.array_equal(tail, policy.decide(rows)), m.name
        replay = mlopt.compile(m, forced_decisions=flipped.decisions, keep_object=True)
        assert replay.object == flipped.object
        changed += flipped.text_size != h.text_size or not np.array_equal(free.decisions, flipped.decisions)
    assert changed > 0
    with pytest.raises(ValueError, match="'0' and '1'"):
        mlopt.compile(modules[0], forced_decisions="01x")
    with pytest.raises(ValueError, match="0/1"):
        mlopt.compile(modules[0], forced_decisions=[0, 2])


NON_UTF8_NAMES = b"""
define internal i32 @"\\FFhelper"(i32 %x) {
  %y = add i32 %x, 1
  ret i32 %y
}

define i32 @"caller\\C3"(i32 %x) {
  %a = call i32 @"\\FFhelper"(i32 %x)
  %b = call i32 @"\\FFhelper"(i32 %a)
  ret i32 %b
}
"""


@pytest.mark.llvm
def test_function_names_that_are_not_utf8_come_back_with_surrogate_escapes(tmp_path):
    """IR names may hold any bytes: every name the engine returns (call
    sites, call-site costs, function properties) is a str whose
    surrogate-escaped bytes are the IR's, never a UnicodeDecodeError."""
    path = tmp_path / "names.ll"
    path.write_bytes(NON_UTF8_NAMES)
    helper, caller = b"\xffhelper".decode("utf-8", "surrogateescape"), b"caller\xc3".decode("utf-8", "surrogateescape")
    m = mlopt.Module(path)
    r = mlopt.compile(m, call_sites=True)
    assert r.call_sites and set(r.call_sites) == {(caller, helper)}
    costs = mlopt.compiler.call_site_costs(m)
    assert list(costs["caller"]) == [caller, caller] and list(costs["callee"]) == [helper, helper]
    assert set(mlopt.compiler.function_properties(m)["function"]) == {helper, caller}
    assert helper.encode("utf-8", "surrogateescape") == b"\xffhelper"

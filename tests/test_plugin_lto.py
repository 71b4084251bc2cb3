"""The pass plugin in stock ld.lld's LTO backends (full LTO and in-process
ThinLTO), on the example project's three binaries: a C++ shared library with
templates, a C++ executable, a C executable with a C static library."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import mlopt
from mlopt.compiler.interactive import Host
from mlopt.compiler.plugin import clang_flags, lld_flags
from mlopt.problems import inlining as inliner
from tests.support.lto import BINARIES, lto_build

pytestmark = [pytest.mark.llvm]

MODES = ("full", "thin")


_BUILDS: dict = {}


def _build(mode, llvm_tools, tmp_path_factory):
    """The objects of one LTO mode (stock pre-link compile) and the stock link, once per major."""
    key = (mode, llvm_tools["major"])
    if key not in _BUILDS:
        b = lto_build(tmp_path_factory.mktemp(f"lto-{mode}-{key[1]}"), mode, key[1])
        b.stock = b.link(b.root / "stock")
        _BUILDS[key] = b
    return _BUILDS[key]


@pytest.fixture(params=MODES)
def build(request, llvm_tools, plugin, tmp_path_factory):
    return _build(request.param, llvm_tools, tmp_path_factory)


@pytest.fixture
def thin_build(llvm_tools, plugin, tmp_path_factory):
    return _build("thin", llvm_tools, tmp_path_factory)


@pytest.fixture
def full_build(llvm_tools, plugin, tmp_path_factory):
    return _build("full", llvm_tools, tmp_path_factory)


def _same_binaries(a: dict, b: dict) -> bool:
    return all(a[name].read_bytes() == b[name].read_bytes() for name in BINARIES)


def _flat(path) -> str:
    """A source file as a log names it (TrainingLogPath.h): '/' as '_'."""
    return str(path).lstrip("/").replace("/", "_")


def _backend_logs() -> dict[str, set[str]]:
    """Each binary's ThinLTO backend logs: one per module, named after its source."""
    from tests.support.lto import CUTIL, EXAMPLE

    return {name: {_flat(EXAMPLE / s) + ".log" for s in sources + (CUTIL if with_cutil else [])}
            for name, (sources, with_cutil, *_) in BINARIES.items()}


def test_training_log_link_equals_stock(build, llvm_tools, tmp_path):
    """With a training log, every binary is byte-identical to the stock link;
    full LTO: one log per binary, the merged module's rows; ThinLTO: one log
    per backend module, each with its context; decisions are the heuristic's."""
    out = tmp_path / "logged"
    built = build.link(out, *lld_flags(training_log="logs/", llvm=llvm_tools["major"]))
    assert _same_binaries(built, build.stock)
    logs = out / "logs"
    if build.mode == "full":
        assert sorted(p.name for p in logs.iterdir()) == sorted(f"{n}.lto.log" for n in BINARIES)
        per_binary = {n: [logs / f"{n}.lto.log"] for n in BINARIES}
    else:
        assert sorted(p.name for p in logs.iterdir()) == sorted(f"{n}.thinlto" for n in BINARIES)
        per_binary = {}
        for name, expected in _backend_logs().items():
            files = sorted((logs / f"{name}.thinlto").iterdir())
            assert {f.name for f in files} == expected, name
            per_binary[name] = files
    rows = 0
    for files in per_binary.values():
        for f in files:
            log = mlopt.read_log(f)
            assert log.contexts == [""], f
            assert log.feature_names == [*inliner.FEATURES, inliner.DEFAULT_DECISION, inliner.DECISION]
            assert np.array_equal(log[inliner.DECISION], log[inliner.DEFAULT_DECISION]), f
            rows += len(log)
    assert rows > 20
    assert sum(len(mlopt.read_log(f)) for f in per_binary["libgeom.so"]) > 0


def test_thinlto_jobs_one_and_two_agree(thin_build, llvm_tools, tmp_path):
    """--thinlto-jobs=1 and =2: the same binaries and byte-identical logs."""
    build = thin_build
    results = []
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        built = build.link(out, *lld_flags(training_log="logs/", llvm=llvm_tools["major"]), f"--thinlto-jobs={jobs}")
        logs = {p.relative_to(out / "logs"): p.read_bytes() for p in (out / "logs").rglob("*.log")}
        results.append((built, logs))
    (b1, l1), (b2, l2) = results
    assert _same_binaries(b1, b2) and _same_binaries(b1, build.stock)
    assert l1 == l2 and len(l1) == sum(len(s) for s in _backend_logs().values())


def _random_mlp(build, major, out):
    """A random MLP over the vocabulary of the heuristic's link-time logs."""
    build.link(out / "heuristic", *lld_flags(training_log="logs/", llvm=major))
    logs = sorted((out / "heuristic" / "logs").rglob("*.log"))
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=50)
    return mlopt.InlinePolicy.random(vocab, hidden=(16,), seed=3)


def _random_policy(build, major, out):
    """_random_mlp exported (a model directory)."""
    return _random_mlp(build, major, out).export(out / "random")


@pytest.fixture
def policies(build, llvm_tools, tmp_path_factory):
    """A random MLP (decides both ways) and the same MLP behind the
    heuristic's vote with a margin it cannot overturn (decides exactly as
    the heuristic)."""
    from mlopt.problems.inlining_default.prior import with_default_prior

    out = tmp_path_factory.mktemp("policies")
    random = _random_mlp(build, llvm_tools["major"], out)
    copy = with_default_prior(random, margin=1e4)
    return {"random": random.export(out / "random"), "copy": copy.export(out / "copy")}


def test_policy_copying_the_heuristic_gives_the_stock_binary(build, policies, llvm_tools, tmp_path):
    built = build.link(tmp_path / "copy", *lld_flags(model=policies["copy"], llvm=llvm_tools["major"]))
    assert _same_binaries(built, build.stock)


def test_random_policy_changes_the_binary_and_logs_its_decisions(build, policies, llvm_tools, tmp_path):
    out = tmp_path / "random"
    built = build.link(out, *lld_flags(model=policies["random"], training_log="logs/", llvm=llvm_tools["major"]))
    assert not _same_binaries(built, build.stock)
    decided = [mlopt.read_log(p) for p in (out / "logs").rglob("*.log")]
    flips = sum(int((log[inliner.DECISION] != log[inliner.DEFAULT_DECISION]).sum()) for log in decided)
    assert flips > 0
    # the binaries still run: the C program checksums its input
    run = subprocess.run([built["cksum"]], input=b"hello\n", capture_output=True, timeout=60)
    stock = subprocess.run([build.stock["cksum"]], input=b"hello\n", capture_output=True, timeout=60)
    assert run.returncode == stock.returncode == 0 and run.stdout == stock.stdout


def test_replay_and_callee_decisions_reach_the_link(build, llvm_tools, tmp_path):
    """-mlopt-inline-replay (all '0': no inlining the heuristic chose) and
    -mlopt-inline-callee-decisions change the binaries at link time; replaying
    the heuristic's own decisions gives the stock binaries."""
    major = llvm_tools["major"]
    heur = tmp_path / "heuristic"
    build.link(heur, *lld_flags(training_log="logs/", llvm=major))
    # the heuristic's decisions as replay files, one per module (%m)
    replay = tmp_path / "replay"
    for log_path in (heur / "logs").rglob("*.log"):
        target = replay / log_path.relative_to(heur / "logs").with_suffix(".txt")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(str(int(d)) for d in mlopt.read_log(log_path)[inliner.DECISION].ravel()))
    same = build.link(tmp_path / "same", *lld_flags(replay=f"{replay}/%m.txt", llvm=major))
    assert _same_binaries(same, build.stock)
    zeros = tmp_path / "zeros.txt"
    zeros.write_text("0" * 100000)
    none = build.link(tmp_path / "none", *lld_flags(replay=zeros, llvm=major))
    assert not _same_binaries(none, build.stock)
    decisions = tmp_path / "never.txt"
    names = subprocess.run([f"llvm-nm-{major}", "--defined-only", "-j", build.stock["libgeom.so"]],
                           capture_output=True, text=True, check=True).stdout.split()
    decisions.write_text("".join(f"0 {n}\n" for n in names))
    forced = build.link(tmp_path / "forced", *lld_flags(callee_decisions=decisions, llvm=major))
    assert forced["libgeom.so"].read_bytes() != build.stock["libgeom.so"].read_bytes()


def test_two_modules_on_one_log_is_one_clear_error(thin_build, llvm_tools, tmp_path):
    """ThinLTO backends given one plain log file: an error naming both modules."""
    build = thin_build
    with pytest.raises(AssertionError, match="would write one training log"):
        build.link(tmp_path / "one", *lld_flags(training_log="one.log", llvm=llvm_tools["major"]))


def test_interactive_host_decides_a_full_lto_link(full_build, llvm_tools, tmp_path):
    """LLVM's interactive protocol at link time (one channel: the merged
    module): a host answering the heuristic's decision gives the stock
    binary, one answering 0 a different one."""
    build = full_build
    major = llvm_tools["major"]
    obj = build.root / "obj"
    sources, _, _, _ = BINARIES["libgeom.so"]
    objects = [str(obj / (s.rsplit("/", 1)[-1] + ".o")) for s in sources] + [str(obj / "libcutil.a")]

    def link(out, answer):
        flags = lld_flags(llvm=major)[:-1]  # -mllvm -load=P
        cmd = [f"clang++-{major}", "-flto=full", "-fuse-ld=lld", "-shared", *objects,
               *(f"-Wl,-mllvm,{f}" for f in flags[1::2]),
               "-Wl,-mllvm,-mlopt-inline-interactive={channel}",
               "-Wl,-mllvm,-mlopt-inline-interactive-include-default",
               f"-Wl,--load-pass-plugin={lld_flags(llvm=major)[-1].split('=', 1)[1]}", "-o", str(out)]
        result = Host(answer, timeout=120).run(cmd)
        assert result.returncode == 0, result.stderr
        return out.read_bytes()

    heuristic = link(tmp_path / "h.so", lambda obs: int(obs[inliner.DEFAULT_DECISION][0]))
    assert heuristic == build.stock["libgeom.so"].read_bytes()
    assert link(tmp_path / "z.so", lambda obs: 0) != build.stock["libgeom.so"].read_bytes()


def test_clang_flags_lto_work_on_compile_and_link(llvm_tools, plugin, tmp_path):
    """`mlopt clang-flags --lto` flags, verbatim on both command lines, with
    a log directory: the compile's and the link's logs, the stock binary.
    (The link's log is named after its output as given, here relative.)"""
    major = llvm_tools["major"]
    src = tmp_path / "a.c"
    src.write_text("static int sq(int x) { return x * x; }\nint f(int x) { return sq(x) + sq(x + 1); }\n"
                   "int main(int c, char **v) { return f(c); }\n")
    for mode in MODES:
        d = tmp_path / mode
        d.mkdir()
        flags = clang_flags(lto=mode, training_log=f"{d}/logs/", llvm=major)
        clang = llvm_tools["clang"]
        subprocess.run([clang, "-Oz", *flags, "-c", src, "-o", d / "a.o"], check=True, capture_output=True)
        r = subprocess.run([clang, "-Oz", *flags, "a.o", "-o", "prog"], cwd=d, capture_output=True, text=True)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        subprocess.run([clang, "-Oz", f"-flto={mode}", "-fuse-ld=lld", "-c", src, "-o", d / "s.o"], check=True)
        subprocess.run([clang, "-Oz", f"-flto={mode}", "-fuse-ld=lld", "s.o", "-o", "stock"], cwd=d, check=True)
        assert (d / "prog").read_bytes() == (d / "stock").read_bytes()
        logs = sorted(str(p.relative_to(d / "logs")) for p in (d / "logs").rglob("*.log"))
        link_log = "prog.lto.log" if mode == "full" else f"prog.thinlto/{_flat(src)}.log"
        assert logs == sorted([f"{_flat(src)}.log", link_log]), logs


def _text_size(path) -> int:
    from mlopt.corpus.elf import read_sections, text_bytes

    return text_bytes(read_sections(path))


def test_engine_compiles_the_objects_lld_links(build, policies, llvm_tools, tmp_path):
    """lld's --save-temps modules (full LTO: the merged, internalized module;
    ThinLTO: each backend's post-import module) compiled in process with the
    policy that ran in lld: the engine's objects are lld's native objects,
    byte for byte; relinked, they give the binary's .text size exactly."""
    major = llvm_tools["major"]
    policy = mlopt.load_policy(policies["random"])
    b = build.copy(tmp_path / "copy")
    checked = 0
    out = tmp_path / "out"
    for name in BINARIES:
        built = b.link(out, *lld_flags(model=policies["random"], llvm=major), "--save-temps", only=(name,))[name]
        if build.mode == "full":
            pairs = [(out / f"{name}.0.2.internalize.bc", out / f"{name}.lto.o")]
        else:
            # lld names a backend's object <output>.lto.<module>, archive members with ".o" added
            # in the link's order (the relink below lays the code out alike): objects, then archive members
            from tests.support.lto import CUTIL

            order = [Path(src).name + ".o" for src in BINARIES[name][0]] + [Path(src).name + ".o" for src in CUTIL]
            rank = lambda bc, order=order: next(i for i, o in enumerate(order) if o in bc.name)  # noqa: E731
            pairs = []
            for bc in sorted((b.root / "obj").glob("*.3.import.bc"), key=rank):
                module = bc.name.removesuffix(".3.import.bc")
                native = bc.parent / f"{name}.lto.{module}{'.o' if module.endswith(')') else ''}"
                pairs.append((bc, native))

        objects = []
        for bc, native in pairs:
            r = mlopt.compile(mlopt.Module(bc, lto=build.mode, llvm=major), policy, keep_object=True)
            assert r.object == native.read_bytes(), (name, bc.name)
            objects.append(native)
            checked += 1
            if build.mode == "thin":  # the next binary's link writes its own temps
                bc.rename(bc.with_suffix(".done"))
        shared = ["-shared"] if BINARIES[name][2] else []
        relinked = tmp_path / "relinked"
        libs = ["-L", str(out), "-lgeom"] if name == "shapes" else []
        subprocess.run([f"clang++-{major}", "-fuse-ld=lld", *shared, *map(str, objects), *libs, "-o", str(relinked)],
                       check=True, capture_output=True)
        assert _text_size(relinked) == _text_size(built), name
    assert checked >= (3 if build.mode == "full" else 8)


def test_log_callee_linkage_and_ir2vec_reach_the_link(build, llvm_tools, tmp_path):
    """-mlopt-inline-log-callee-linkage and (LLVM 22) -mlopt-inline-ir2vec-vocab
    at link time: the logs carry their columns, the binaries stay stock's."""
    major = llvm_tools["major"]
    extra = {}
    if major >= 22:
        from tests.test_ir2vec import write_vocab

        extra["ir2vec_vocab"] = write_vocab(tmp_path / "vocab.json", 4, 0)
    out = tmp_path / "linkage"
    built = build.link(out, *lld_flags(training_log="logs/", log_callee_linkage=True, llvm=major, **extra))
    assert _same_binaries(built, build.stock)
    logs = [mlopt.read_log(p) for p in (out / "logs").rglob("*.log")]
    assert logs and all("callee_linkage" in log.feature_names for log in logs)
    linkage = np.concatenate([log["callee_linkage"].ravel() for log in logs])
    assert set(np.unique(linkage)) <= {0, 1, 2, 3, 4} and len(np.unique(linkage)) > 1
    if major >= 22:
        assert all({"callee_embedding", "caller_embedding"} <= set(log.feature_names) for log in logs)


def test_regalloc_training_logs_at_link_time(build, llvm_tools, tmp_path):
    """LLVM 19: the eviction advisor runs in the LTO backends' code
    generation: a regalloc training log of the default advisor's decisions
    per link-time module (%m: one per ThinLTO backend, two threads), and the
    binary stock's."""
    major = llvm_tools["major"]
    if major not in (19,):
        pytest.skip("mlopt's regalloc eviction advisor is LLVM 19's")
    logs = tmp_path / "evict"
    flags = lld_flags(llvm=major)
    built = build.link(tmp_path / "ra", *flags[:-1], "-mllvm", f"-mlopt-regalloc-training-log={logs}/%m.log",
                       flags[-1], "--thinlto-jobs=2", only=("libgeom.so",))
    assert built["libgeom.so"].read_bytes() == build.stock["libgeom.so"].read_bytes()
    files = sorted(logs.rglob("*.log"))
    expected = 1 if build.mode == "full" else len(_backend_logs()["libgeom.so"])
    rows = [len(mlopt.read_log(f)) for f in files]  # a module may evict nothing
    assert len(files) == expected and sum(rows) > 0


def test_a_bad_policy_is_one_error_naming_the_binary_and_the_policy(full_build, llvm_tools, tmp_path):
    """A file that is not a policy, at link time: the link fails with one
    line naming the binary and the file; no crash, no hang, no output."""
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model")
    with pytest.raises(AssertionError) as e:
        full_build.link(tmp_path / "bad", *lld_flags(model=bad, llvm=llvm_tools["major"]), only=("libgeom.so",))
    lines = [ln for ln in str(e.value).splitlines() if "mlopt:" in ln]
    assert len(lines) == 1 and f"mlopt: libgeom.so: {bad}: not a .tflite model" in lines[0], str(e.value)
    assert "Stack dump" not in str(e.value) and not (tmp_path / "bad" / "libgeom.so").exists()


def test_interactive_channels_per_thinlto_backend(thin_build, llvm_tools, tmp_path):
    """ThinLTO backends in parallel threads, each with its own interactive
    channel (a base with %m): channels that answer the heuristic's decisions
    (regular files, pre-filled) give the stock binaries, and every backend
    wrote its own observations."""
    major = llvm_tools["major"]
    heur = tmp_path / "heuristic"
    thin_build.link(heur, *lld_flags(training_log="logs/", llvm=major))
    chan = tmp_path / "chan"
    for log_path in (heur / "logs").rglob("*.log"):
        decisions = mlopt.read_log(log_path)[inliner.DECISION].ravel().astype("<i8")
        base = chan / log_path.relative_to(heur / "logs").with_suffix("")
        base.parent.mkdir(parents=True, exist_ok=True)
        base.with_name(base.name + ".in").write_bytes(decisions.tobytes())
    flags = lld_flags(llvm=major)
    built = thin_build.link(tmp_path / "asked", *flags[:-1], "-mllvm", f"-mlopt-inline-interactive={chan}/%m",
                            flags[-1], "--thinlto-jobs=2")
    assert _same_binaries(built, thin_build.stock)
    outs = sorted(chan.rglob("*.out"))
    assert len(outs) == sum(len(s) for s in _backend_logs().values())
    for out in outs:
        stream = mlopt.read_log(out.read_bytes())
        answers = (out.with_name(out.name[:-4] + ".in")).stat().st_size // 8
        assert len(stream) == answers, out

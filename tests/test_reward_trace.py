"""The trace-based speed reward: the BB address map reader against
llvm-readobj-19, a small program (tests/fixtures/reward_prog.c) built with
`mlopt reward build-flags` by clang-19 twice -- the default eviction advisor
and a random EvictionPolicy loaded by the plugin -- traced once under
valgrind, and each variant's predicted instruction count checked against
callgrind's measured count of the same run; the error cases. The blocks'
order (paths, mlopt's valgrind tool mlopt-bbseq): every block entry in
exactly one path, and the path cycles model on a loop (reward_chain.c) where
costing blocks alone invents a dependency chain."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mlopt.cli import main
from mlopt.errors import BBAddrMapError, RewardToolError, TraceError
from mlopt.reward import Trace, build_flags, estimate, read_bb_addr_map, record, sequence
from mlopt.reward.bbaddrmap import parse_bb_addr_map
from mlopt.reward.trace import path_block_counts

FIXTURE = Path(__file__).parent / "fixtures" / "reward_prog.c"
CHAIN = Path(__file__).parent / "fixtures" / "reward_chain.c"
ARGS = ["30"]


def _uleb(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_parser_decodes_version_2_with_ranges_and_successors():
    """Two ranges (feature bit 3), successors with probabilities (bit 2) and
    block frequencies (bit 1): offsets count from the previous block's end."""
    data = bytes([2, 0b1110]) + _uleb(2)
    data += (0x1000).to_bytes(8, "little") + _uleb(2)
    data += _uleb(0) + _uleb(0) + _uleb(5) + _uleb(8)       # id 0 at 0x1000, 5 bytes, can fall through
    data += _uleb(3) + _uleb(11) + _uleb(200) + _uleb(1)    # id 3 at 0x1010 (11 bytes of padding), returns
    data += (0x2000).to_bytes(8, "little") + _uleb(1)
    data += _uleb(7) + _uleb(0) + _uleb(2) + _uleb(0)       # id 7 at 0x2000
    for succ in ([3, 7], [], [3]):
        data += _uleb(1000) + _uleb(len(succ)) + b"".join(_uleb(s) + _uleb(1 << 30) for s in succ)
    (address, blocks), = parse_bb_addr_map(data)
    assert address == 0x1000
    assert [(b.id, b.start, b.size, b.metadata, b.successors) for b in blocks] == [
        (0, 0x1000, 5, 8, (3, 7)), (3, 0x1010, 200, 1, ()), (7, 0x2000, 2, 0, (3,))]
    with pytest.raises(BBAddrMapError, match="byte 3: truncated"):
        parse_bb_addr_map(data[:3])
    with pytest.raises(BBAddrMapError, match="version 9"):
        parse_bb_addr_map(bytes([9, 0]))


def test_build_flags_are_one_line_and_llvm_19_only(capsys):
    assert main(["reward", "build-flags"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert out.split() == build_flags(19)
    for option in ("-fbasic-block-address-map", "-disable-branch-fold", "-enable-tail-merge=false",
                   "-tail-dup-placement=false", "-disable-tail-duplicate", "-pgo-analysis-map=br-prob"):
        assert option in out
    assert main(["reward", "build-flags", "--llvm", "22"]) == 2


def test_random_regalloc_policies_need_no_data_and_follow_the_seed(tmp_path, capsys):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        assert main(["policy", "export", "--problem", "regalloc", "--random", "--seed", str(seed),
                     "-o", str(tmp_path / name)]) == 0
    model = {n: (tmp_path / n / "model.tflite").read_bytes() for n in "abc"}
    assert model["a"] == model["b"] != model["c"]
    assert main(["policy", "export", "--problem", "regalloc", "--constant", "0", "-o", str(tmp_path / "d")]) == 2


def _need_order() -> None:
    """mlopt's valgrind tool is built wherever valgrind's tool libraries are
    (ci/install.sh installs them): required in CI, skipped elsewhere."""
    from tests.conftest import IN_CI

    if not sequence.available():
        (pytest.fail if IN_CI else pytest.skip)("mlopt-bbseq is not built (install valgrind, reinstall mlopt)")


def _paths(result: dict) -> list[tuple[tuple[int, ...], int]]:
    rows, off, count = result["path_rows"], result["path_offsets"], result["path_count"]
    return [(tuple(rows[off[i]:off[i + 1]].tolist()), int(count[i])) for i in range(len(count))]


def test_paths_end_at_calls_back_edges_and_their_length_whatever_the_chunks():
    """Blocks 0-5 of one function, 6-8 of another (owner: the identity):
    a path ends where the next block is in another function or not after it
    in the layout, or at max_blocks; chunking the stream changes nothing."""
    owner, func = np.arange(9), np.array([0] * 6 + [1] * 3)
    stream = np.array([0, 1, 2, 1, 2, 1, 2, 6, 7, 3, 5, 0, 1, 2, 3, 4, 5, 5, 8], np.uint32)
    one = sequence.PathCounter(owner, func, max_blocks=4)
    one.feed(stream, last=True)
    expected = sorted([((0, 1, 2), 1), ((1, 2), 2), ((6, 7), 1), ((3, 5), 1), ((0, 1, 2, 3), 1), ((4, 5), 1),
                       ((5,), 1), ((8,), 1)])
    assert _paths(one.result()) == expected and one.entries == len(stream)
    rng = np.random.default_rng(0)
    for _ in range(20):
        cuts = np.sort(rng.choice(np.arange(1, len(stream)), size=rng.integers(1, 8), replace=False))
        counter = sequence.PathCounter(owner, func, max_blocks=4)
        for piece in np.split(stream, cuts):
            counter.feed(piece)
        got = counter.result()
        assert _paths(got) == expected
        assert all(np.array_equal(got[k], one.result()[k]) for k in got)
    # Block rows, not start indices: two starts owned by other rows.
    counter = sequence.PathCounter(np.array([4, 2, 0]), np.zeros(3, np.int64))
    counter.feed(np.array([0, 1, 2, 0], np.uint32), last=True)
    assert _paths(counter.result()) == [((4,), 1), ((4, 2, 0), 1)]
    with pytest.raises(RewardToolError, match="block 3 of 3"):
        counter.feed(np.array([3], np.uint32))


# -- built with clang-19 -------------------------------------------------------------------

@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    """reward_prog built with the build flags: default advisor, a random
    eviction policy, and (for the errors) without the map / another program."""
    from mlopt import _native, compiler
    from tests.conftest import _tool

    clang = _tool("clang-19")
    _tool("valgrind")
    _tool("llvm-mca-19")
    if 19 not in _native.built_majors() or not compiler.regalloc_supported(19):
        pytest.skip("this mlopt build has no regalloc eviction advisor for LLVM 19")
    d = tmp_path_factory.mktemp("reward")
    assert main(["policy", "export", "--problem", "regalloc", "--random", "--seed", "3", "-o", str(d / "evict")]) == 0
    assert main(["policy", "compile", str(d / "evict"), "-o", str(d / "evict.so")]) == 0
    policy_flags = compiler.plugin.clang_flags(llvm=19, regalloc_model=d / "evict.so")
    flags = build_flags(19)
    out = {}
    for name, extra, src in (("default", flags, FIXTURE), ("random", flags + policy_flags, FIXTURE),
                             ("nomap", [], FIXTURE)):
        out[name] = d / name
        subprocess.run([clang, "-O2", *extra, str(src), "-o", str(out[name])], check=True)
    other = d / "other.c"
    other.write_text("#include <stdio.h>\nint twice(int x) { return 2 * x; }\n"
                     "int main(void) { printf(\"%d\\n\", twice(21)); return 0; }\n")
    out["other"] = d / "other_prog"
    subprocess.run([clang, "-O2", *flags, str(other), "-o", str(out["other"])], check=True)
    out["dir"] = d
    return out


@pytest.fixture(scope="module")
def trace(progs):
    return record(str(progs["default"]), ARGS, stdout=subprocess.DEVNULL)


@pytest.mark.llvm
def test_the_order_puts_every_block_entry_in_one_path(progs, trace):
    """mlopt-bbseq's paths, against callgrind's counts of the same run: each
    non-empty block's entries in the paths are its first instruction's
    count; a path stays in one function and goes forward in the layout."""
    _need_order()
    assert trace.has_order
    a = trace.arrays
    n = len(a["func"])
    counts = path_block_counts(a, n)
    nonempty = a["instrs"] > 0
    assert trace.order_count_mismatch == 0
    assert np.array_equal(counts[nonempty], a["count"][nonempty]) and not counts[~nonempty].any()
    assert trace.order_entries == int(counts.sum()) > 10_000
    starts = read_bb_addr_map(progs["default"])
    start = np.array([b.start for f in starts for b in f.blocks])
    rows, off = a["path_rows"], a["path_offsets"]
    for i in range(len(off) - 1):
        p = rows[off[i]:off[i + 1]]
        assert len(p) <= sequence.MAX_BLOCKS and len(set(a["func"][p].tolist())) == 1
        assert np.all(np.diff(start[p]) > 0)
    # The hot loop runs as a path of several blocks, once per iteration.
    heaviest = int(np.argmax(a["path_count"] * np.diff(off)))
    assert off[heaviest + 1] - off[heaviest] >= 2 and a["path_count"][heaviest] >= 1000


@pytest.mark.llvm
def test_an_order_tool_that_does_not_run_is_one_clear_error(progs, monkeypatch):
    """valgrind cannot start the tool (e.g. valgrind upgraded after mlopt
    was built): a RewardToolError, not a trace without order or a hang."""
    _need_order()
    monkeypatch.setattr(sequence, "tool_path", lambda: Path("/bin/true"))
    with pytest.raises(RewardToolError, match="mlopt-bbseq recorded no block order"):
        record(str(progs["default"]), ARGS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = record(str(progs["default"]), ARGS, stdout=subprocess.DEVNULL, order=False)
    assert not t.has_order and t.order_entries == 0


@pytest.mark.llvm
def test_the_path_model_costs_a_loop_in_the_order_its_blocks_run(tmp_path):
    """reward_chain.c: six in-place multiplies in one block of a loop whose
    other block loads a fresh value each iteration. Costed alone, the block
    chains its multiplies across repetitions (6 x 3 cycles per iteration on
    skylake); costed in the path it runs in, the load starts each chain
    anew and iterations overlap: the path model predicts well under half
    the per-block model's cycles for the loop. Without the order the
    estimate is the per-block model's."""
    from tests.conftest import _tool

    _need_order()
    exe = tmp_path / "chain"
    subprocess.run([_tool("clang-19"), "-O2", *build_flags(19), str(CHAIN), "-o", str(exe)], check=True)
    t = record(str(exe), ["200000"], stdout=subprocess.DEVNULL)
    e = estimate(t, exe, cpu="skylake")
    assert e.cycles_model == "path" and e.paths_costed >= 1
    loop_block = e.block_cycles - 1.0 * t.outside_instructions
    loop_path = e.cycles - 1.0 * t.outside_instructions
    iterations = 200_000
    assert loop_block / iterations > 18 and loop_path / iterations < 9, (loop_block, loop_path)
    plain = Trace(**{**t.__dict__, "arrays": {k: v for k, v in t.arrays.items() if not k.startswith("path_")}})
    p = estimate(plain, exe, cpu="skylake")
    assert p.cycles_model == "block" and p.cycles == p.block_cycles == e.block_cycles


@pytest.mark.llvm
def test_reader_equals_llvm_readobj(progs):
    r = subprocess.run(["llvm-readobj-19", "--bb-addr-map", "--elf-output-style=JSON", str(progs["random"])],
                       capture_output=True, text=True, check=True)
    theirs = json.loads(r.stdout)[0]["BBAddrMap"]
    ours = read_bb_addr_map(progs["random"])
    assert [f["Function"]["Name"] for f in theirs] == [f.name for f in ours]
    for t, f in zip(theirs, ours):
        fn = t["Function"]
        assert fn["At"] == f.address
        entries = [e for r in fn["BB Ranges"] for e in r["BB Entries"]]
        base = fn["BB Ranges"][0]["Base Address"]
        assert [(e["ID"], base + e["Offset"], e["Size"], e["HasReturn"], e["CanFallThrough"]) for e in entries] == \
            [(b.id, b.start, b.size, bool(b.metadata & 1), bool(b.metadata & 8)) for b in f.blocks]
        succ = [tuple(s["ID"] for s in e["Successors"]) for e in fn["PGO analyses"]["PGO BB entries"]]
        assert succ == [b.successors for b in f.blocks]


@pytest.mark.llvm
def test_eviction_variants_differ_in_code_but_keep_the_cfg(progs, trace):
    default = {f.name: f for f in read_bb_addr_map(progs["default"])}
    random = {f.name: f for f in read_bb_addr_map(progs["random"])}
    assert default.keys() == random.keys()
    assert all(default[n].cfg() == random[n].cfg() for n in default)
    assert all(default[n].has_successors for n in default)
    sizes = {n: [b.size for b in f.blocks] for n, f in default.items()}
    assert any(sizes[n] != [b.size for b in random[n].blocks] for n in default), "the policy changed nothing"
    e = estimate(trace, progs["random"], cycles=False)
    assert e.cfg_differs == [] and e.cfg_differs_share == 0.0 and e.cfg_differs_unexecuted == 0
    assert e.executed_functions == 5 and not e.same_binary_as_traced


@pytest.mark.llvm
@pytest.mark.slow
def test_predicted_instructions_equal_callgrinds_count(progs, trace):
    """The same run (same arguments) of each variant under callgrind: the
    prediction from the default build's trace is within 0.5%; the traced
    build itself is exact by construction."""
    assert trace.exit_code == 0
    assert estimate(trace, progs["default"], cycles=False).instructions == trace.total_instructions
    predicted, measured = {}, {}
    for name in ("default", "random"):
        predicted[name] = estimate(trace, progs[name], cycles=False).instructions
        measured[name] = record(str(progs[name]), ARGS, stdout=subprocess.DEVNULL).total_instructions
        assert abs(predicted[name] - measured[name]) <= 0.005 * measured[name], (name, predicted, measured)
    # The variants differ by more than the error, and the prediction sees which way.
    change = measured["random"] - measured["default"]
    assert abs(change) > 0.01 * measured["default"]
    assert np.sign(predicted["random"] - predicted["default"]) == np.sign(change)


@pytest.mark.llvm
def test_cycles_from_llvm_mca_are_deterministic_per_cpu(progs, trace, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    a = estimate(trace, progs["random"], cpu="skylake")
    b = estimate(trace, progs["random"], cpu="skylake")  # from the cache now
    assert (tmp_path / "mlopt" / "reward-mca" / "19-skylake-v2.json").is_file()
    assert a.cycles == b.cycles and a.cycles > trace.outside_instructions and a.mca_fallbacks == 0
    assert a.cpu == "skylake" and a.blocks_costed > 20
    c = estimate(trace, progs["random"], cpu="znver4")
    assert c.cycles != a.cycles
    with pytest.raises(RewardToolError, match="no-such-cpu"):
        estimate(trace, progs["random"], cpu="no-such-cpu")


@pytest.mark.llvm
def test_a_changed_cfg_is_reported_and_scaled(progs, trace):
    """A trace whose record of ``mix`` says another CFG: ``mix`` is costed
    by scaling, named, and its share of the traced instructions reported."""
    tampered = Trace(**{**trace.__dict__, "cfgs": list(trace.cfgs)})
    i = tampered.functions.index("mix")
    tampered.cfgs[i] = "0" * 16
    e = estimate(tampered, progs["default"], cycles=False)
    assert e.cfg_differs == ["mix"] and e.cfg_differs_share == 1 / 5
    assert 0.3 < e.cfg_differs_instruction_share < 1
    assert abs(e.instructions - trace.total_instructions) <= 1  # the traced build scaled by 1


@pytest.mark.llvm
def test_trace_cli_and_its_three_errors(progs, trace, tmp_path, capsys):
    t = tmp_path / "prog.trace"
    assert main(["reward", "trace", "-o", str(t), "--", str(progs["default"]), *ARGS]) == 0
    loaded = Trace.load(t)
    assert loaded.sha256 == trace.sha256 and loaded.args == ARGS and loaded.functions == trace.functions
    assert np.array_equal(loaded.arrays["count"], trace.arrays["count"])
    # the same run (same output handling, same environment: libc's start-up
    # counts with its size) gives the same file, byte for byte
    record(str(progs["default"]), ARGS, stdout=subprocess.DEVNULL).save(tmp_path / "a.trace")
    record(str(progs["default"]), ARGS, stdout=subprocess.DEVNULL).save(tmp_path / "b.trace")
    assert (tmp_path / "a.trace").read_bytes() == (tmp_path / "b.trace").read_bytes()
    assert main(["reward", "trace", "-o", str(t), "--", str(progs["default"])]) == 1  # never overwritten
    capsys.readouterr()
    assert main(["reward", "estimate", str(t), str(progs["random"]), "--json", "--no-cycles"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["instructions"] == estimate(loaded, progs["random"], cycles=False).instructions

    # 1. a binary without BB address maps
    with pytest.raises(BBAddrMapError, match="no basic-block address map.*build-flags"):
        record(str(progs["nomap"]), ARGS)
    assert main(["reward", "trace", "-o", str(tmp_path / "x.trace"), "--", str(progs["nomap"])]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no basic-block address map" in err
    assert not (tmp_path / "x.trace").exists()
    # 2. a trace of another program
    with pytest.raises(TraceError, match="recorded of .*default.*missing from it.*mix"):
        estimate(trace, progs["other"])
    assert main(["reward", "estimate", str(t), str(progs["other"])]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    # 3. a truncated trace
    cut = tmp_path / "cut.trace"
    cut.write_bytes(t.read_bytes()[: t.stat().st_size // 2])
    with pytest.raises(TraceError, match="truncated or corrupt"):
        Trace.load(cut)
    assert main(["reward", "estimate", str(cut), str(progs["random"])]) == 1
    assert "truncated" in capsys.readouterr().err
    assert zipfile.is_zipfile(t)


@pytest.mark.llvm
def test_clang_flags_load_an_eviction_policy(progs, capsys):
    so = progs["dir"] / "evict.so"
    assert main(["clang-flags", "--llvm", "19", "--regalloc-model", str(so)]) == 0
    out = capsys.readouterr().out.split()
    assert out[-2:] == ["-mllvm", f"-mlopt-regalloc-model={so.resolve()}"]
    assert main(["clang-flags", "--llvm", "19", "--regalloc-model", str(progs["dir"] / "missing.so")]) == 1


# -- in process: the engine compiles, the objects are costed without a link or a run -----------

@pytest.fixture(scope="module")
def engine_builds(progs):
    """reward_prog's -O2 bitcode allocated in process (traceable code
    generation) with the default advisor and the random policy: the objects,
    and each linked by clang-19 into a program (for the trace and for
    callgrind's measured count)."""
    from mlopt.compiler.allocate import allocate
    from tests.conftest import _tool

    clang, d = _tool("clang-19"), progs["dir"]
    bc = d / "reward_prog.bc"
    subprocess.run([clang, "-O2", "-emit-llvm", "-c", str(FIXTURE), "-o", str(bc)], check=True)
    out = {"bc": bc}
    for name, policy in (("default", None), ("random", d / "evict.so")):
        r = allocate(bc, policy, pipeline="", log=False, keep_object=True, traceable=True, llvm=19)
        out[name] = r.object
        (d / f"e_{name}.o").write_bytes(r.object)
        subprocess.run([clang, "-no-pie", str(d / f"e_{name}.o"), "-o", str(d / f"e_{name}")], check=True)
        out[f"{name}_exe"] = d / f"e_{name}"
    out["trace"] = record(str(out["default_exe"]), ARGS, stdout=subprocess.DEVNULL)
    return out


@pytest.mark.llvm
def test_objects_from_the_engine_estimate_as_their_linked_program(engine_builds):
    from mlopt.reward import estimate_objects

    t = engine_builds["trace"]
    assert engine_builds["default"] != engine_builds["random"]
    for name in ("default", "random"):
        objects = [("reward_prog.o", engine_builds[name])]
        a = estimate_objects(t, objects, cpu="skylake")
        b = estimate(t, engine_builds[f"{name}_exe"], cpu="skylake")
        assert a.cfg_differs == [] and a.functions_not_compiled == 0
        assert (a.instructions, a.mapped_instructions, a.cycles) == (b.instructions, b.mapped_instructions, b.cycles)
    assert estimate_objects(t, [("p.o", engine_builds["default"])], cycles=False).instructions == t.total_instructions


@pytest.mark.llvm
@pytest.mark.slow
def test_in_process_prediction_equals_callgrinds_count(engine_builds):
    from mlopt.reward import estimate_objects

    t = engine_builds["trace"]
    predicted = estimate_objects(t, [("reward_prog.o", engine_builds["random"])], cycles=False).instructions
    measured = record(str(engine_builds["random_exe"]), ARGS, stdout=subprocess.DEVNULL).total_instructions
    assert abs(predicted - measured) <= 0.005 * measured
    assert abs(measured - t.total_instructions) > 0.01 * t.total_instructions  # the policy matters


@pytest.mark.llvm
def test_traceable_code_generation_is_scoped_to_its_compile(engine_builds):
    """After traceable compiles, an ordinary one is as before: no address map,
    the allocation-dependent passes back on."""
    from mlopt.compiler.allocate import allocate
    from mlopt.reward import estimate_objects
    from mlopt.reward.elf import SHT_LLVM_BB_ADDR_MAP, ElfImage

    plain = allocate(engine_builds["bc"], None, pipeline="", log=False, keep_object=True, llvm=19).object
    image = ElfImage.from_bytes(plain, "plain.o")
    assert not any(s.type == SHT_LLVM_BB_ADDR_MAP for s in image.sections)
    again = allocate(engine_builds["bc"], None, pipeline="", log=False, keep_object=True, llvm=19).object
    assert plain == again
    traceable = engine_builds["default"]
    assert any(s.type == SHT_LLVM_BB_ADDR_MAP for s in ElfImage.from_bytes(traceable, "t.o").sections)
    with pytest.raises(BBAddrMapError, match="plain.o: no basic-block address map"):
        estimate_objects(engine_builds["trace"], [("plain.o", plain)])


@pytest.mark.llvm
def test_objects_of_another_program_are_refused(engine_builds, progs, tmp_path):
    from mlopt.compiler.allocate import allocate
    from mlopt.reward import estimate_objects

    other = tmp_path / "other.bc"
    other.write_bytes(b"")
    src = progs["dir"] / "other.c"
    subprocess.run(["clang-19", "-O2", "-emit-llvm", "-c", str(src), "-o", str(other)], check=True)
    obj = allocate(other, None, pipeline="", log=False, keep_object=True, traceable=True, llvm=19).object
    with pytest.raises(TraceError, match="has no function twice"):
        estimate_objects(engine_builds["trace"], [("other.o", obj)], cycles=False)
    with pytest.raises(TraceError, match="not a relocatable object"):
        estimate_objects(engine_builds["trace"], [("exe", engine_builds["default_exe"].read_bytes())])


# -- the trace objective: problem regalloc-trace, one module per rollout -------------------------

@pytest.mark.llvm
def test_the_trace_objective_costs_a_corpus_module_as_its_clang_build_runs(progs, trace, tmp_path, monkeypatch):
    """reward_prog as a one-module corpus (pre-optimization bitcode and its
    command line): a regalloc-trace rollout compiles it in process and costs
    it by the trace of the clang build. With the default advisor that is the
    traced run's instructions in the program's own functions; with the
    random policy, what its clang build's estimate says."""
    from mlopt.corpus import CorpusEntry
    from mlopt.rollouts.tasks import REWARD_TRACE_ENV, RolloutTask, run_rollout
    from tests.conftest import _tool

    bc = tmp_path / "reward_prog.bc"
    subprocess.run([_tool("clang-19"), "-O2", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", str(FIXTURE),
                    "-o", str(bc)], check=True)
    entry = CorpusEntry("reward_prog", bc, ("-O2", "-c", "reward_prog.c"))
    saved = tmp_path / "prog.trace"
    trace.save(saved)
    with pytest.raises(TraceError, match="--reward-trace"):
        monkeypatch.delenv(REWARD_TRACE_ENV, raising=False)
        run_rollout(RolloutTask(entry, problem="regalloc-trace", llvm=19))
    monkeypatch.setenv(REWARD_TRACE_ENV, str(saved))
    default = run_rollout(RolloutTask(entry, problem="regalloc-trace", llvm=19))
    assert default.cost == trace.total_instructions - trace.outside_instructions
    random = run_rollout(RolloutTask(entry, str(progs["dir"] / "evict.so"), problem="regalloc-trace", llvm=19))
    assert random.cost == estimate(trace, progs["random"], cycles=False).compiled_instructions
    assert random.cost != default.cost and random.decisions > 0
    # regalloc-trace-cycles: the cycles model's share of the module, as its clang build's estimate says
    _need_order()
    monkeypatch.setenv("MLOPT_REWARD_CPU", "skylake")
    for so, binary in ((None, progs["default"]), (progs["dir"] / "evict.so", progs["random"])):
        got = run_rollout(RolloutTask(entry, None if so is None else str(so), problem="regalloc-trace-cycles",
                                      llvm=19))
        want = estimate(trace, binary, cpu="skylake")
        assert want.cycles_model == "path" and got.cost == pytest.approx(want.compiled_cycles, rel=1e-9)
        assert want.compiled_cycles == pytest.approx(want.cycles - trace.outside_instructions, rel=1e-12)


def test_training_on_the_trace_objective_without_a_trace_is_a_usage_error(tmp_path, capsys):
    from mlopt.policy import Vocab
    from mlopt.problems import load_weights, regalloc

    vocab = Vocab({f: np.array([0.0]) for f in regalloc.FEATURES}, regalloc.FEATURES)
    regalloc.EvictionPolicy.random(vocab, hidden=(4,), seed=0).save(tmp_path / "bc.npz")
    assert load_weights(tmp_path / "bc.npz", "regalloc-trace").problem.name == "regalloc-trace"  # starts_from
    assert main(["train", "es", str(tmp_path), "--init", str(tmp_path / "bc.npz"), "--problem", "regalloc-trace",
                 "-o", str(tmp_path / "run")]) == 2
    assert "--reward-trace TRACE" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()

"""Regalloc eviction: the problem's tensors are what
stock llc sends on its eviction interactive channel, and the eviction
policy network (shared per-candidate encoder, masked argmax) decides the
same in numpy, as .tflite and as a compiled .so, and drives stock llc."""

from __future__ import annotations

import numpy as np
import pytest

import mlopt
from mlopt.compiler.interactive import Host
from mlopt.policy import LoadedPolicy, Vocab, compile_policy
from mlopt.problems import get as get_problem
from mlopt.problems import load_weights, regalloc

pytestmark = [pytest.mark.llvm, pytest.mark.network]


def first_allowed(obs) -> int:
    """Evict nothing when allowed, else the first allowed column."""
    mask = np.asarray(obs["mask"]).reshape(-1)
    return regalloc.NO_EVICTION if mask[regalloc.NO_EVICTION] else int(np.flatnonzero(mask)[0])


@pytest.fixture(scope="module")
def optimized(llvm_tools, tmp_path_factory):
    """-O2 bitcode of two brotli modules with enough register pressure."""
    import subprocess

    from tests.support.corpus import c_sources, include_flags

    out = tmp_path_factory.mktemp(f"ra{llvm_tools['major']}")
    modules = []
    for name in ("backward_references_hq.c", "decode.c"):
        src = next(p for p in c_sources("brotli") if p.name == name)
        bc = out / src.with_suffix(".bc").name
        subprocess.run([llvm_tools["clang"], "-O2", *include_flags("brotli"), "-emit-llvm", "-c", str(src), "-o",
                        str(bc)], check=True)
        modules.append(bc)
    return modules


def stock_session(llvm_tools, module, policy, out):
    r = Host(policy, timeout=300, capture=True).run(
        [llvm_tools["llc"], "-O2", "-regalloc-enable-advisor=release",
         "-regalloc-evict-interactive-channel-base={channel}", str(module), "-filetype=obj", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    return r


def test_stock_llc_sends_the_problems_tensors(llvm_tools, optimized, tmp_path):
    for module in optimized:
        r = stock_session(llvm_tools, module, first_allowed, tmp_path / "o.o")
        log = mlopt.read_log(r.streams[0])
        assert [(s.name, s.type, list(s.shape)) for s in log.features] == [
            (s.name, s.type, list(s.shape)) for s in regalloc.PROBLEM.features]
        assert log.advice_spec == mlopt.TensorSpec(regalloc.DECISION, "int64_t", [1])
        assert len(log) == r.observations > 300
        # One context per machine function, with or without decisions.
        assert len(log.contexts) > 5 and len(set(log.contexts)) == len(log.contexts)
        mask = log["mask"].reshape(len(log), regalloc.CANDIDATES)
        assert set(np.unique(mask)) <= {0, 1} and mask.any(axis=1).all()
        # LLVM divides every float column feature by its maximum over the columns.
        for name, t in regalloc.COLUMN_FEATURES:
            x = log[name].reshape(len(log), regalloc.CANDIDATES)
            if t == "float":
                # Stock LLVM sends NaN for use_def_density where a live range's
                # spill weight is infinite (inf / inf); policies must cope.
                if name != "use_def_density":
                    assert np.isfinite(x).all(), name
                x = np.nan_to_num(x, nan=0.0)
                assert x.min() >= 0 and x.max(axis=1).max() <= 1.0 + 1e-6, name
            assert not x[mask == 0].any(), name  # unavailable columns are all zero
        progress = log["progress"].reshape(-1)
        assert ((progress >= 0) & (progress <= 1.0 + 1e-6)).all()
        expected = np.where(mask[:, regalloc.NO_EVICTION] == 1, regalloc.NO_EVICTION, np.argmax(mask, axis=1))
        assert np.array_equal(np.array(r.decisions), expected)


@pytest.fixture(scope="module")
def eviction_policy(llvm_tools, optimized, tmp_path_factory):
    """A random eviction policy over a vocab of real features, exported."""
    d = tmp_path_factory.mktemp(f"evp{llvm_tools['major']}")
    logs = [mlopt.read_log(stock_session(llvm_tools, m, first_allowed, d / "o.o").streams[0]) for m in optimized]
    vocab = Vocab.from_logs(logs, num_buckets=100, features=regalloc.FEATURES)
    policy = regalloc.EvictionPolicy.random(vocab, hidden=(16, 16), seed=1)
    policy.export(d / "model", logits_output=True)
    return {"policy": policy, "logs": logs, "model": d / "model",
            "so": compile_policy(d / "model", d / "policy.so"), "dir": d}


def test_eviction_policy_decides_alike_in_numpy_tflite_and_so(eviction_policy):
    policy = eviction_policy["policy"]
    for log in eviction_policy["logs"]:
        mine = policy.decide(log)
        mask = log["mask"].reshape(len(log), regalloc.CANDIDATES)
        assert mask[np.arange(len(log)), mine].all()  # only columns LLVM allows
        assert len(np.unique(mine)) > 3  # it does choose between candidates
        for path in (eviction_policy["model"], eviction_policy["so"]):
            out = LoadedPolicy(path, regalloc.PROBLEM).evaluate(log)
            assert np.array_equal(out[regalloc.DECISION], mine), path
            assert np.allclose(out[regalloc.PROBLEM.logits_name], policy.logits(log), rtol=1e-5, atol=1e-4)
    policy.save(eviction_policy["dir"] / "p.npz")
    back = load_weights(eviction_policy["dir"] / "p.npz")
    assert isinstance(back, regalloc.EvictionPolicy)
    assert np.array_equal(back.decide(eviction_policy["logs"][0]), policy.decide(eviction_policy["logs"][0]))


def test_the_compiled_policy_drives_stock_llc(llvm_tools, optimized, eviction_policy, tmp_path):
    """The .so answers stock llc's eviction requests: llc completes, every
    answer is the numpy policy's on the features llc sent, and the same
    policy gives the same object twice."""
    loaded = LoadedPolicy(eviction_policy["so"], regalloc.PROBLEM)
    objects = []
    for run in range(2):
        r = stock_session(llvm_tools, optimized[0], lambda obs: int(loaded.decide(obs)[0]), tmp_path / f"{run}.o")
        log = mlopt.read_log(r.streams[0])
        assert np.array_equal(np.array(r.decisions), eviction_policy["policy"].decide(log))
        objects.append((tmp_path / f"{run}.o").read_bytes())
    assert objects[0] == objects[1]
    baseline = stock_session(llvm_tools, optimized[0], first_allowed, tmp_path / "b.o")
    assert baseline.decisions != r.decisions  # the policy changed what was evicted


def test_the_regalloc_problem_is_registered():
    p = get_problem("regalloc")
    assert p.num_actions == 33 and p.feature_names[-1] == "progress" and len(p.features) == 21
    assert p.decode_decisions(np.array([0, 32, 33, -1])).tolist() == [0, 32, -1, -1]
    with pytest.raises(TypeError, match="cannot prefer a fixed column"):
        regalloc.EvictionPolicy.constant(32)

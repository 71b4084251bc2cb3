"""The policy core is problem-neutral: a problem with a [33]-shaped int64
feature and a float feature, answered with an index in [0, 33), runs through
LoadedPolicy (LiteRT and the compiled .so) and the MLP exactly as numpy says."""

from __future__ import annotations

import numpy as np
import pytest

import mlopt
from mlopt.policy import LoadedPolicy, MLPPolicy, Vocab, compile_policy
from mlopt.problems import Problem
from mlopt.tflite import GraphBuilder

TOY = Problem(
    name="toy_eviction",
    features=(mlopt.TensorSpec("mask", "int64_t", [33]), mlopt.TensorSpec("progress", "float", [1])),
    decision=mlopt.TensorSpec("index_to_evict", "int64_t", [1]),
    num_actions=33,
)


def scoring_model(w: np.ndarray, v: np.ndarray) -> bytes:
    """index = argmax(float(mask) * w + progress * v), w and v float32 [33]."""
    g = GraphBuilder(signature_key="action")
    mask = g.input("mask", "action_mask:0", np.int64, [33])
    progress = g.input("progress", "action_progress:0", np.float32, [1])
    mask_f = g.op("CAST", [mask], np.float32, [33], g.options("CastOptions", inDataType=4, outDataType=0))
    a = g.op("MUL", [mask_f, g.const("w", w)], np.float32, [33], g.options("MulOptions"))
    b = g.op("MUL", [progress, g.const("v", v)], np.float32, [33], g.options("MulOptions"))
    score = g.op("ADD", [a, b], np.float32, [33], g.options("AddOptions"))
    row = g.op("RESHAPE", [score, g.const("row", np.array([1, 33], np.int32))], np.float32, [1, 33],
               g.options("ReshapeOptions", newShape=[1, 33]))
    index = g.op("ARG_MAX", [row, g.const("axis", np.array([1], np.int32))], np.int64, [1],
                 g.options("ArgMaxOptions", outputType=4), name="index_to_evict:0")
    g.output("index_to_evict", index)
    return g.finish()


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(7)
    n = 500
    return {"mask": rng.integers(0, 2, (n, 33)).astype(np.int64),
            "progress": rng.random((n, 1), dtype=np.float32)}


def test_index_policy_in_batch_equals_numpy_through_litert_and_compiled_so(batch, tmp_path):
    rng = np.random.default_rng(3)
    w = rng.normal(size=33).astype(np.float32)
    v = rng.normal(size=33).astype(np.float32)
    model = tmp_path / "toy.tflite"
    model.write_bytes(scoring_model(w, v))
    expected = np.argmax(batch["mask"].astype(np.float32) * w + batch["progress"] * v, axis=1)
    assert len(set(expected.tolist())) > 5  # the answer really depends on the inputs

    tflite = LoadedPolicy(model, TOY)
    assert tflite.kind == "tflite"
    assert np.array_equal(tflite.evaluate(batch)["index_to_evict"], expected)

    so = LoadedPolicy(compile_policy(model, tmp_path / "toy.so"), TOY)
    assert so.kind == "compiled"
    assert np.array_equal(so.decide(batch), expected)
    # the [n, 34] matrix form (33 mask elements, then progress) gives the same
    matrix = np.concatenate([batch["mask"], batch["progress"]], axis=1)
    assert np.array_equal(so.decide(matrix.astype(np.float64)), expected)


def test_generic_mlp_exports_vector_features(batch, tmp_path):
    """MLPPolicy over the toy problem: its exported .tflite and compiled .so
    decide every row as its numpy forward pass."""
    vocab = Vocab.from_logs([_as_log(batch, tmp_path)], num_buckets=50)
    policy = MLPPolicy.random(vocab, hidden=(16,), seed=1, problem=TOY)
    expected = policy.decide(batch)
    assert expected.min() >= 0 and expected.max() < 33 and len(set(expected.tolist())) > 3
    directory = policy.export(tmp_path / "mlp", logits_output=True)
    loaded = LoadedPolicy(directory, TOY)
    out = loaded.evaluate(batch)
    assert np.array_equal(out["index_to_evict"], expected)
    assert out["toy_eviction_logits"].shape == (len(expected), 33)
    assert np.allclose(out["toy_eviction_logits"], policy.logits(batch), atol=1e-5)
    assert np.array_equal(LoadedPolicy(compile_policy(directory, tmp_path / "mlp.so"), TOY).decide(batch), expected)


def _as_log(batch, tmp_path):
    path = tmp_path / "toy.log"
    with mlopt.LogWriter(path, list(TOY.features)) as w:
        w.switch_context("f")
        w.log_observations(batch)
    return mlopt.read_log(path)


def test_decision_decoding_is_the_problem_s_rule():
    assert TOY.decode_decisions(np.array([0, 32, 33, -1])).tolist() == [0, 32, -1, -1]
    assert TOY.decode_decisions(np.array([1.0, 0.5, np.nan, 32.0], np.float32)).tolist() == [1, -1, -1, 32]
    inlining = mlopt.problems.get("inlining")
    assert inlining.decode_decisions(np.array([0, 1, 2, 7])).tolist() == [0, 1, -1, -1]


def test_policy_for_another_problem_is_refused_where_it_does_not_fit(batch, tmp_path):
    model = tmp_path / "toy.tflite"
    model.write_bytes(scoring_model(np.ones(33, np.float32), np.ones(33, np.float32)))
    with pytest.raises(mlopt.PolicyError, match="model has no input for feature 'sroa_savings'"):
        mlopt.load_policy(model)  # the inlining problem's 38 features
    with pytest.raises(mlopt.FeatureError, match="batch has no feature 'progress'"):
        LoadedPolicy(model, TOY).evaluate({"mask": batch["mask"]})
    with pytest.raises(mlopt.ProblemError, match="no optimization problem 'regalloc-priority'"):
        mlopt.problems.get("regalloc-priority")


def test_weights_files_of_one_vocab_share_it_and_a_changed_vocab_is_refused(tmp_path):
    """MLPPolicy.save stores its vocab's fingerprint: loading many weights files of one vocab with
    known_vocabs (a rollout worker loading ES's candidates) reads and checks the vocab once and hands
    every policy the same Vocab; a file whose vocab was changed after it was written is a PolicyError
    naming it; a file without a fingerprint (written before) loads as before."""
    from mlopt.errors import PolicyError
    from mlopt.problems import get

    problem = get("inlining")
    rng = np.random.default_rng(3)
    vocab = Vocab({f: np.sort(rng.random(50)) for f in problem.feature_names}, problem.feature_names)
    a = MLPPolicy.random(vocab, hidden=(8,), seed=0, problem=problem)
    b = MLPPolicy.random(vocab, hidden=(8,), seed=1, problem=problem)
    a.save(tmp_path / "a.npz")
    b.save(tmp_path / "b.npz")
    known: dict = {}
    la = MLPPolicy.load(tmp_path / "a.npz", problem=problem, known_vocabs=known)
    lb = MLPPolicy.load(tmp_path / "b.npz", problem=problem, known_vocabs=known)
    assert la.vocab is lb.vocab and la.vocab.fingerprint() == vocab.fingerprint() and len(known) == 1
    assert MLPPolicy.load(tmp_path / "b.npz", problem=problem).vocab is not la.vocab  # without: read anew
    batch = {f: rng.random(20) for f in problem.feature_names}
    assert np.array_equal(lb.logits(batch), b.logits(batch))
    with np.load(tmp_path / "b.npz") as z:
        arrays = {k: z[k] for k in z.files}
    f0 = problem.feature_names[0]
    arrays[f"vocab/{f0}"] = arrays[f"vocab/{f0}"] + 1.0  # same shape and order, other boundaries
    np.savez(tmp_path / "changed.npz", **arrays)
    with pytest.raises(PolicyError, match=r"changed\.npz.*vocab does not match"):
        MLPPolicy.load(tmp_path / "changed.npz", problem=problem)
    del arrays["vocab_fingerprint"]
    np.savez(tmp_path / "old.npz", **arrays)  # as written before fingerprints: loaded and checked as then
    old = MLPPolicy.load(tmp_path / "old.npz", problem=problem)
    assert np.array_equal(old.vocab.boundaries[f0], vocab.boundaries[f0] + 1.0)


def test_vocab_copies_what_it_is_given_and_keeps_its_subset_and_digest():
    """A Vocab made from arrays equals one made from lists and does not change when the caller's array
    does; subset() of its own features is itself; fingerprint() is the digest, made once."""
    rng = np.random.default_rng(4)
    arrays = {"x": np.sort(rng.random(30)), "y": np.sort(rng.random(7)).astype(np.float32)}
    v = Vocab(arrays)
    w = Vocab({k: list(a) for k, a in arrays.items()})
    assert v.fingerprint() == w.fingerprint() == v._digest()
    arrays["x"][0] = -5.0
    assert v.boundaries["x"][0] != -5.0 and v.fingerprint() == w.fingerprint()
    assert v.subset(["x", "y"]) is v and v.subset(["y"]).features == ("y",)
    x = np.array([[0.5, 0.5], [2.0, -1.0]])
    assert np.array_equal(v.normalize(x), w.normalize(x))
    with pytest.raises(mlopt.errors.VocabError, match="not sorted"):
        Vocab({"x": np.array([2.0, 1.0])})

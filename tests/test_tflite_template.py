"""A policy's .tflite from a cached graph with its weights patched in is,
byte for byte, the graph built afresh (mlopt.tflite.template), for every
problem form and weight value; a different vocab or shape is another graph."""

from __future__ import annotations

import numpy as np
import pytest

import mlopt
from mlopt.policy import LoadedPolicy, MLPPolicy, Vocab
from mlopt.policy.mlp import _build_tflite
from mlopt.problems import Problem, get
from mlopt.tflite import template
from mlopt.tflite.template import ConstantTemplate, cached_build

TOY = Problem(
    name="toy_template",
    features=(mlopt.TensorSpec("mask", "int64_t", [5]), mlopt.TensorSpec("progress", "float", [1])),
    decision=mlopt.TensorSpec("index", "int64_t", [1]),
    num_actions=5,
)


def _vocab(problem, seed: int, zscore: bool = False) -> Vocab:
    rng = np.random.default_rng(seed)
    names = problem.feature_names
    boundaries = {f: np.sort(rng.integers(0, 50, 20)).astype(np.float64) for f in names}
    z = {names[-1]: (rng.normal(size=1), rng.random(1) + 0.5)} if zscore else None
    return Vocab(boundaries, names, z)


def _with_weights(policy: MLPPolicy, rng) -> MLPPolicy:
    layers = [(rng.normal(size=w.shape).astype(np.float32), rng.normal(size=b.shape).astype(np.float32))
              for w, b in policy.layers]
    return type(policy)(policy.vocab, layers, problem=policy.problem)


@pytest.mark.parametrize("problem,zscore,hidden,logits", [
    ("inlining", False, (16, 8), False), ("inlining", False, (16,), True), ("inlining", False, (), False),
    ("inlining-default", False, (12, 12), False), (TOY, True, (7,), True)])
def test_patched_graph_is_the_fresh_build(problem, zscore, hidden, logits):
    problem = get(problem) if isinstance(problem, str) else problem
    template._TEMPLATES.clear()
    rng = np.random.default_rng(1)
    first = MLPPolicy.random(_vocab(problem, 0, zscore), hidden=hidden, seed=0, problem=problem)
    assert first.to_tflite(logits) == _build_tflite(first, logits)  # builds the template
    assert len(template._TEMPLATES) == 1
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38]
    for k in range(4):
        other = _with_weights(first, rng)
        if k == 3:  # values a flatbuffer might treat specially: zeros, signed zero, inf, NaN, denormals
            w, b = other.layers[0]
            w.reshape(-1)[: len(specials)] = specials
            b[:] = 0.0
        patched = other.to_tflite(logits)
        assert patched == _build_tflite(other, logits)
        assert patched != first.to_tflite(logits)
    assert len(template._TEMPLATES) == 1  # one graph served them all


def test_patched_graph_decides_as_its_weights(tmp_path):
    """Not only equal bytes: LiteRT runs the patched model as the numpy forward pass."""
    rng = np.random.default_rng(5)
    template._TEMPLATES.clear()
    first = MLPPolicy.random(_vocab(TOY, 3), hidden=(9,), seed=2, problem=TOY)
    first.to_tflite()
    other = _with_weights(first, rng)
    path = tmp_path / "p.tflite"
    path.write_bytes(other.to_tflite())
    batch = {"mask": rng.integers(0, 50, (300, 5)).astype(np.int64),
             "progress": rng.integers(0, 50, (300, 1)).astype(np.float32)}
    expected = other.decide(batch)
    assert len(set(expected.tolist())) > 2 and not np.array_equal(expected, first.decide(batch))
    assert np.array_equal(LoadedPolicy(path, TOY).decide(batch), expected)


def test_another_vocab_or_shape_is_another_graph():
    template._TEMPLATES.clear()
    problem = get("inlining")
    a = MLPPolicy.random(_vocab(problem, 0), hidden=(8,), seed=0, problem=problem)
    b = MLPPolicy(_vocab(problem, 1), a.layers, problem=problem)  # same weights, other boundaries
    c = MLPPolicy.random(_vocab(problem, 0), hidden=(9,), seed=0, problem=problem)
    for p in (a, b, c):
        assert p.to_tflite() == _build_tflite(p, False)
    assert len(template._TEMPLATES) == 3
    assert len({p.vocab.fingerprint() for p in (a, b, c)}) == 2


def test_template_refuses_what_it_cannot_patch():
    problem = get("inlining")
    p = MLPPolicy.random(_vocab(problem, 0), hidden=(4,), seed=0, problem=problem)
    data = _build_tflite(p, False)
    with pytest.raises(ValueError, match="no_such"):
        ConstantTemplate(data, ["dense_0/kernel", "no_such"])
    t = ConstantTemplate(data, ["dense_0/kernel"])
    with pytest.raises(ValueError, match="bytes"):
        t.with_constants([np.zeros(3, np.float32)])
    with pytest.raises(ValueError, match="do.*not hold"):  # names that do not locate the given arrays
        cached_build(("wrong",), lambda: data, ["dense_0/bias"], [np.ones(4, np.float32)])

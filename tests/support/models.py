"""Small hand-built .tflite models for tests of model loading and binding."""

from __future__ import annotations

import numpy as np

from mlopt.problems import inlining
from mlopt.tflite import GraphBuilder


def tiny_model(inputs, value=0):
    """A valid .tflite whose inputs are `inputs` [(tensor name, dtype, shape)];
    the output inlining_decision is `value` (int64 [1]), computed from the first
    input (LiteRT cannot bind an output folded to a constant)."""
    g = GraphBuilder(signature_key="action")
    first = None
    for name, dtype, shape in inputs:
        t = g.input(name.split(":")[0].removeprefix("action_"), name, dtype, shape)
        first = t if first is None else first
    zeroed = g.op("MUL", [first, g.const("zero", np.zeros([1], np.int64))], np.int64, [1],
                  g.options("MulOptions"), name="zeroed")
    g.output("inlining_decision", g.op("ADD", [zeroed, g.const("value", np.full([1], value, np.int64))],
                                       np.int64, [1], g.options("AddOptions"), name="inlining_decision:0"))
    return g.finish()


def good_inputs():
    return [(f"action_{f}:0", np.int64, [1]) for f in inlining.FEATURES]

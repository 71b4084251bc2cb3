"""The inlining policy: MLGO's MLP bound to the inlining problem.

    vocab = mlopt.Vocab.from_logs(["heuristic.log"])
    policy = mlopt.InlinePolicy.random(vocab, hidden=(64, 64), seed=0)
    policy.decide(mlopt.read_log("heuristic.log"))      # ndarray of 0/1
    policy.export("model_dir")                          # model.tflite + output_spec.json
"""

from __future__ import annotations

from ...policy.mlp import MLPPolicy
from .spec import PROBLEM


class InlinePolicy(MLPPolicy):
    """A quantile-normalized MLP over the 38 inliner features; logits of
    no/yes, decision = argmax. The exported graph has inputs
    ``action_<feature>:0`` (int64 [1]) and output ``inlining_decision:0``."""

    problem = PROBLEM

"""The eviction policy: a shared per-candidate encoder with a masked argmax,
as ml-compiler-opt's regalloc network is built.

    vocab = mlopt.Vocab.from_logs(["evict.log"], features=regalloc.FEATURES)
    policy = EvictionPolicy.random(vocab, hidden=(32, 32), seed=0)
    policy.decide(mlopt.read_log("evict.log"))     # int64 columns in [0, 33)
    policy.export("model_dir")                     # model.tflite + output_spec.json

Forward pass (numpy here, the same float32 graph in the exported .tflite):
every column feature but ``mask`` is bucketized with its quantile
boundaries (pooled over the 33 columns) to a position p in [0, 1];
``progress`` likewise, the same for every column. Each of the 33 columns
is then the vector (p_1..p_F, p_1^2..p_F^2), F = 20, and one MLP (the same
weights for every column) maps it to a score. Columns whose mask is 0 get
``score - 1e9``; the decision is the first maximum: a column LLVM allows,
whenever it allows one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...policy.batching import feature_columns
from ...policy.dense import dense
from ...policy.mlp import MLPPolicy
from .spec import CANDIDATES, MASK, PROBLEM, PROGRESS

MASK_PENALTY = np.float32(1e9)


class EvictionPolicy(MLPPolicy):
    """Layers map one column's 2F normalized values to its score (the last
    layer has one output); ES and saving treat it as any MLPPolicy."""

    problem = PROBLEM

    @classmethod
    def layer_widths(cls, problem) -> tuple[int, int]:
        return 2 * len(_encoded(problem)), 1

    def output_meaning(self) -> str:
        return "one score per candidate column"

    @classmethod
    def constant(cls, decision: int, vocab=None, *, problem=None):
        raise TypeError("a shared per-candidate encoder cannot prefer a fixed column; train or randomize one")

    # -- evaluation ----------------------------------------------------------------
    def column_inputs(self, batch) -> tuple[np.ndarray, np.ndarray]:
        """(normalized columns [n, 33, 2F] float32, mask [n, 33] int64)."""
        specs = self.problem.features
        cols = dict(zip((s.name for s in specs), feature_columns(batch, specs)))
        n = len(cols[MASK])
        parts = []
        for name in _encoded(self.problem):
            x = cols[name].reshape(n, -1).astype(np.float32)
            b = self.vocab.boundaries[name].astype(np.float32)
            inv = np.float32(1.0) / np.float32(len(b)) if len(b) else np.float32(0.0)
            p = np.searchsorted(b, x, side="right").astype(np.float32) * inv
            parts.append(np.broadcast_to(p, (n, CANDIDATES)) if name == PROGRESS else p)
        pos = np.stack(parts, axis=2)
        return np.concatenate([pos, pos * pos], axis=2), cols[MASK].reshape(n, CANDIDATES).astype(np.int64)

    def training_inputs(self, batch) -> tuple[np.ndarray, np.ndarray]:
        """(columns [n, 33, 2F], mask penalty [n, 33]) for gradient training."""
        h, mask = self.column_inputs(batch)
        return h, ((mask.astype(np.float32) - np.float32(1.0)) * MASK_PENALTY).astype(np.float32)

    def logits(self, batch) -> np.ndarray:
        """Masked scores [n, 33] (float32): score - 1e9 where mask is 0."""
        h, mask = self.column_inputs(batch)
        for i, (w, b) in enumerate(self.layers):
            h = dense(h, w, b)
            if i + 1 < len(self.layers):
                np.maximum(h, 0, out=h)
        scores = h[:, :, 0].astype(np.float32)
        penalty = (mask.astype(np.float32) - np.float32(1.0)) * MASK_PENALTY
        return (scores + penalty).astype(np.float32)

    # -- export ------------------------------------------------------------------------
    def to_tflite(self, logits_output: bool = False) -> bytes:
        return _build_tflite(self, logits_output)


def _encoded(problem) -> Sequence[str]:
    """The features each column is encoded from: all but the mask."""
    return [s.name for s in problem.features if s.name != MASK]


def _build_tflite(policy: EvictionPolicy, logits_output: bool) -> bytes:
    from ...tflite.builder import GraphBuilder

    problem = policy.problem
    g = GraphBuilder(signature_key="action", description=f"mlopt {problem.name} policy")
    inputs = {s.name: g.input(s.name, f"{problem.feed_prefix}{s.name}:0", s.dtype, list(s.shape))
              for s in problem.features}
    names = [n for n in _encoded(problem) if n != PROGRESS]
    buckets = []
    for name in names:
        b = policy.vocab.boundaries[name].astype(np.float32)
        bucket = g.op("BUCKETIZE", [inputs[name]], np.int32, [1, CANDIDATES],
                      g.options("BucketizeOptions", boundaries=b.tolist()), name=f"bucket_{name}")
        buckets.append(g.op("RESHAPE", [bucket, g.const(f"bucket_{name}/shape", np.array([CANDIDATES, 1], np.int32))],
                            np.int32, [CANDIDATES, 1], g.options("ReshapeOptions", newShape=[CANDIDATES, 1]),
                            name=f"bucket_{name}/column"))
    f = len(names)
    index = g.op("CONCATENATION", buckets, np.int32, [CANDIDATES, f], g.options("ConcatenationOptions", axis=1),
                 name="bucket_index")
    index_f = g.op("CAST", [index], np.float32, [CANDIDATES, f],
                   g.options("CastOptions", inDataType=2, outDataType=0), name="bucket_index_f")
    inv = np.array([np.float32(1.0) / np.float32(len(policy.vocab.boundaries[n])) if len(policy.vocab.boundaries[n])
                    else np.float32(0.0) for n in names], np.float32)
    pos = g.op("MUL", [index_f, g.const("inverse_bucket_count", inv)], np.float32, [CANDIDATES, f],
               g.options("MulOptions"), name="bucket_position")
    parts = [pos]
    if PROGRESS in _encoded(problem):
        b = policy.vocab.boundaries[PROGRESS].astype(np.float32)
        pb = g.op("BUCKETIZE", [inputs[PROGRESS]], np.int32, [1], g.options("BucketizeOptions", boundaries=b.tolist()),
                  name="bucket_progress")
        pf = g.op("CAST", [pb], np.float32, [1], g.options("CastOptions", inDataType=2, outDataType=0),
                  name="bucket_progress_f")
        pinv = np.array([np.float32(1.0) / np.float32(len(b)) if len(b) else 0.0], np.float32)
        pp = g.op("MUL", [pf, g.const("inverse_bucket_count_progress", pinv)], np.float32, [1],
                  g.options("MulOptions"), name="progress_position")
        parts.append(g.op("ADD", [g.const("column_zeros", np.zeros((CANDIDATES, 1), np.float32)), pp], np.float32,
                          [CANDIDATES, 1], g.options("AddOptions"), name="progress_per_column"))
    width = f + len(parts) - 1
    both_pos = parts[0] if len(parts) == 1 else g.op(
        "CONCATENATION", parts, np.float32, [CANDIDATES, width], g.options("ConcatenationOptions", axis=1),
        name="positions")
    sq = g.op("MUL", [both_pos, both_pos], np.float32, [CANDIDATES, width], g.options("MulOptions"),
              name="positions_sq")
    h = g.op("CONCATENATION", [both_pos, sq], np.float32, [CANDIDATES, 2 * width],
             g.options("ConcatenationOptions", axis=1), name="normalized")
    for i, (w, b) in enumerate(policy.layers):
        last = i + 1 == len(policy.layers)
        h = g.op("FULLY_CONNECTED", [h, g.const(f"dense_{i}/kernel", w), g.const(f"dense_{i}/bias", b)],
                 np.float32, [CANDIDATES, w.shape[0]],
                 g.options("FullyConnectedOptions", fusedActivationFunction=0 if last else 1), name=f"dense_{i}")
    scores = g.op("RESHAPE", [h, g.const("scores_shape", np.array([1, CANDIDATES], np.int32))], np.float32,
                  [1, CANDIDATES], g.options("ReshapeOptions", newShape=[1, CANDIDATES]), name="scores")
    mask_f = g.op("CAST", [inputs[MASK]], np.float32, [1, CANDIDATES],
                  g.options("CastOptions", inDataType=4, outDataType=0), name="mask_f")
    off = g.op("SUB", [mask_f, g.const("one", np.array([1.0], np.float32))], np.float32, [1, CANDIDATES],
               g.options("SubOptions"), name="mask_off")
    penalty = g.op("MUL", [off, g.const("mask_penalty", np.array([MASK_PENALTY], np.float32))], np.float32,
                   [1, CANDIDATES], g.options("MulOptions"), name="mask_penalty_applied")
    masked = g.op("ADD", [scores, penalty], np.float32, [1, CANDIDATES], g.options("AddOptions"),
                  name="masked_scores")
    decision_name = problem.decision.name
    decision = g.op("ARG_MAX", [masked, g.const("column_axis", np.array([1], np.int32))], np.int64, [1],
                    g.options("ArgMaxOptions", outputType=4), name=f"{decision_name}:0")
    g.output(decision_name, decision)
    if logits_output:
        logits = g.op("RESHAPE", [masked, g.const("logits_shape", np.array([CANDIDATES], np.int32))], np.float32,
                      [CANDIDATES], g.options("ReshapeOptions", newShape=[CANDIDATES]), name=f"{problem.logits_name}:0")
        g.output(problem.logits_name, logits)
    return g.finish()

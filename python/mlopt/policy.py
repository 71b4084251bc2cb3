"""The MLGO inlining policy: quantile normalization, a ReLU MLP, a decision.

    vocab = mlopt.Vocab.from_logs(["heuristic.log"])
    policy = mlopt.InlinePolicy.random(vocab, hidden=(64, 64), seed=0)
    policy.decide(mlopt.read_log("heuristic.log"))      # ndarray of 0/1
    policy.export("model_dir")                          # model.tflite + output_spec.json

Forward pass (numpy here, the same graph in the exported .tflite):
  x [n, 38] int64 -> float32 -> (positions p, p*p) [n, 76] -> Dense+ReLU ... ->
  Dense -> logits [n, 2] -> decision = argmax (first maximum: ties choose 0).
Weights are float32 numpy arrays, ``W`` as [out, in] (TFLite's FULLY_CONNECTED layout).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from . import inliner
from .vocab import Vocab

FEED_PREFIX = "action_"  # LLVM's -ml-inliner-trained-model-feed-prefix default
LOGITS = "inlining_logits"


class InlinePolicy:
    """A quantile-normalized MLP over the 38 inliner features."""

    def __init__(self, vocab: Vocab, layers: Sequence[tuple[np.ndarray, np.ndarray]]):
        if not layers:
            raise ValueError("a policy needs at least one layer")
        self.vocab = vocab
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []
        width = 2 * len(inliner.FEATURES)
        for i, (w, b) in enumerate(layers):
            w = np.ascontiguousarray(w, dtype=np.float32)
            b = np.ascontiguousarray(b, dtype=np.float32)
            if w.ndim != 2 or w.shape[1] != width or b.shape != (w.shape[0],):
                raise ValueError(f"layer {i}: expected W [out, {width}] and b [out], got {w.shape} and {b.shape}")
            self.layers.append((w, b))
            width = w.shape[0]
        if width != 2:
            raise ValueError(f"the last layer must have 2 outputs (logits of no/yes), has {width}")

    # -- construction ------------------------------------------------------------
    @classmethod
    def random(cls, vocab: Vocab, hidden: Sequence[int] = (64, 64), seed: int = 0) -> "InlinePolicy":
        rng = np.random.default_rng(seed)
        sizes = [2 * len(inliner.FEATURES), *hidden, 2]
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            scale = np.sqrt(2.0 / n_in)
            layers.append((rng.normal(0.0, scale, (n_out, n_in)), rng.normal(0.0, 0.1, n_out)))
        return cls(vocab, layers)

    @classmethod
    def constant(cls, decision: int, vocab: Vocab | None = None) -> "InlinePolicy":
        """A policy that always answers `decision` (0 or 1), whatever the features."""
        if decision not in (0, 1):
            raise ValueError("decision must be 0 or 1")
        vocab = vocab or Vocab({f: [] for f in inliner.FEATURES})
        w = np.zeros((2, 2 * len(inliner.FEATURES)))
        b = np.array([1.0, 0.0]) if decision == 0 else np.array([0.0, 1.0])
        return cls(vocab, [(w, b)])

    @classmethod
    def load(cls, path: str | os.PathLike) -> "InlinePolicy":
        """Weights and vocab saved by :meth:`save` (.npz)."""
        with np.load(path) as z:
            n = int(z["n_layers"])
            layers = [(z[f"w{i}"], z[f"b{i}"]) for i in range(n)]
            vocab = Vocab({f: z[f"vocab/{f}"] for f in inliner.FEATURES})
        return cls(vocab, layers)

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> None:
        path = Path(path)
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists (use overwrite=True)")
        arrays = {"n_layers": np.array(len(self.layers))}
        for i, (w, b) in enumerate(self.layers):
            arrays[f"w{i}"], arrays[f"b{i}"] = w, b
        for f in inliner.FEATURES:
            arrays[f"vocab/{f}"] = self.vocab.boundaries[f]
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    # -- evaluation ----------------------------------------------------------------
    def logits(self, batch) -> np.ndarray:
        h = self.vocab.normalize(feature_matrix(batch))
        for i, (w, b) in enumerate(self.layers):
            h = h @ w.T + b
            if i + 1 < len(self.layers):
                np.maximum(h, 0, out=h)
        return h.astype(np.float32, copy=False)

    def decide(self, batch) -> np.ndarray:
        """Decisions (int64, 0 or 1) for a batch of feature rows."""
        return np.argmax(self.logits(batch), axis=1).astype(np.int64)

    __call__ = decide

    # -- export ------------------------------------------------------------------------
    def to_tflite(self, logits_output: bool = False) -> bytes:
        """The policy as a .tflite flatbuffer (inputs ``action_<feature>:0`` int64 [1])."""
        return _build_tflite(self, logits_output)

    def export(self, directory: str | os.PathLike, *, logits_output: bool = False,
               overwrite: bool = False) -> Path:
        """Write a ModelUnderTraining directory: ``model.tflite`` + ``output_spec.json``.

        Loadable by mlopt's plugin (``-mlopt-inline-model=DIR``) and by an LLVM built
        with TFLite (``-ml-inliner-model-under-training=DIR``). With `logits_output`
        the logits are a second output, logged as an extra column ``inlining_logits``.
        """
        directory = Path(directory)
        model, spec = directory / "model.tflite", directory / "output_spec.json"
        for p in (model, spec):
            if p.exists() and not overwrite:
                raise FileExistsError(f"{p} exists (use overwrite=True / --force)")
        directory.mkdir(parents=True, exist_ok=True)
        model.write_bytes(self.to_tflite(logits_output))
        spec.write_text(json.dumps(output_spec(logits_output), indent=2) + "\n")
        return directory


def output_spec(logits_output: bool = False) -> list[dict]:
    """output_spec.json content: the decision first, then logged extra outputs."""
    spec = [{"logging_name": inliner.DECISION,
             "tensor_spec": {"name": inliner.DECISION, "port": 0, "type": "int64_t", "shape": [1]}}]
    if logits_output:
        spec.append({"logging_name": LOGITS,
                     "tensor_spec": {"name": LOGITS, "port": 0, "type": "float", "shape": [2]}})
    return spec


def feature_matrix(batch) -> np.ndarray:
    """[n, 38] int64 from a Log/LogView, a dict of columns, or an [n, 38] array."""
    if isinstance(batch, np.ndarray):
        x = batch
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != len(inliner.FEATURES):
            raise ValueError(f"feature array must be [n, {len(inliner.FEATURES)}], got {x.shape}")
        return x
    if isinstance(batch, Mapping) or hasattr(batch, "__getitem__"):
        cols = []
        for f in inliner.FEATURES:
            try:
                col = np.asarray(batch[f])
            except KeyError:
                raise KeyError(f"batch has no feature {f!r}") from None
            if col.ndim == 0:
                col = col.reshape(1)
            cols.append(col.reshape(len(col), -1)[:, 0] if len(col) else col.reshape(0))
        n = {len(c) for c in cols}
        if len(n) != 1:
            raise ValueError("feature columns have different lengths")
        return np.stack(cols, axis=1)
    raise TypeError(f"cannot read features from {type(batch).__name__}")


def _build_tflite(policy: InlinePolicy, logits_output: bool) -> bytes:
    from .tflite_writer import GraphBuilder

    g = GraphBuilder(signature_key="action", description="mlopt inlining policy")
    n = len(inliner.FEATURES)
    buckets = []
    for f in inliner.FEATURES:
        x = g.input(f, f"{FEED_PREFIX}{f}:0", np.int64, [1])
        b = policy.vocab.boundaries[f].astype(np.float32)
        buckets.append(g.op("BUCKETIZE", [x], np.int32, [1],
                            g.options("BucketizeOptions", boundaries=b.tolist()), name=f"bucket_{f}"))
    inv = policy.vocab.inverse_counts()
    index = g.op("CONCATENATION", buckets, np.int32, [n], g.options("ConcatenationOptions", axis=0),
                 name="bucket_index")
    index_f = g.op("CAST", [index], np.float32, [n], g.options("CastOptions", inDataType=2, outDataType=0),
                   name="bucket_index_f")
    pos = g.op("MUL", [index_f, g.const("inverse_bucket_count", inv)], np.float32, [n],
               g.options("MulOptions"), name="bucket_position")
    sq = g.op("MUL", [pos, pos], np.float32, [n], g.options("MulOptions"), name="bucket_position_sq")
    both = g.op("CONCATENATION", [pos, sq], np.float32, [2 * n], g.options("ConcatenationOptions", axis=0),
                name="normalized")
    h = g.op("RESHAPE", [both, g.const("row_shape", np.array([1, 2 * n], np.int32))], np.float32, [1, 2 * n],
             g.options("ReshapeOptions", newShape=[1, 2 * n]), name="normalized_row")
    for i, (w, b) in enumerate(policy.layers):
        last = i + 1 == len(policy.layers)
        h = g.op("FULLY_CONNECTED", [h, g.const(f"dense_{i}/kernel", w), g.const(f"dense_{i}/bias", b)],
                 np.float32, [1, w.shape[0]],
                 g.options("FullyConnectedOptions", fusedActivationFunction=0 if last else 1),
                 name=f"dense_{i}")
    decision = g.op("ARG_MAX", [h, g.const("class_axis", np.array([1], np.int32))], np.int64, [1],
                    g.options("ArgMaxOptions", outputType=4), name=f"{inliner.DECISION}:0")
    g.output(inliner.DECISION, decision)
    if logits_output:
        logits = g.op("RESHAPE", [h, g.const("logits_shape", np.array([2], np.int32))], np.float32, [2],
                      g.options("ReshapeOptions", newShape=[2]), name=f"{LOGITS}:0")
        g.output(LOGITS, logits)
    return g.finish()


class LoadedPolicy:
    """A policy as the compiler runs it: a .tflite file, a model directory or a
    compiled .so, bound to the 38 inliner features by the same C++ code the
    plugin uses (so the same load errors, the same decisions).

        policy = mlopt.load_policy("model_dir")
        policy.decide(mlopt.read_log("run.log"))    # int64 [n]
    """

    def __init__(self, path: str | os.PathLike, *, feed_prefix: str = FEED_PREFIX,
                 litert_library: str | os.PathLike | None = None):
        from . import _core

        self.path = str(path)
        self._feed_prefix = feed_prefix
        self._litert_library = str(litert_library) if litert_library else _litert_library()
        self._model = _core.PolicyModel.load(
            self.path, inliner.feature_specs(), feed_prefix, inliner.DECISION,
            self._litert_library)
        self._pool = None
        self.kind: str = self._model.kind
        self.extra_outputs = list(self._model.extra_outputs)

    def evaluate(self, batch) -> dict[str, np.ndarray]:
        """``{"inlining_decision": int64 [n], <extra output>: [n, *shape], ...}``.

        A decision the model gave outside {0, 1} is reported as -1.
        """
        x = np.ascontiguousarray(feature_matrix(batch), dtype=np.int64)
        decisions, extra = self._model.evaluate_batch(x)
        out = {inliner.DECISION: decisions}
        at = 0
        for spec in self.extra_outputs:
            raw = np.ascontiguousarray(extra[:, at : at + spec.byte_size])
            out[spec.name] = raw.view(spec.dtype).reshape((len(x), *spec.shape))
            at += spec.byte_size
        return out

    def decide(self, batch) -> np.ndarray:
        return self.evaluate(batch)[inliner.DECISION]

    __call__ = decide

    def _engine_pool(self):
        """The in-process compiler's instances of this policy (one per
        concurrent compile), loaded from the same path with the same options."""
        if self._pool is None:
            from .engine import _engine

            self._pool = _engine().Policy.load(self.path, self._feed_prefix, inliner.DECISION,
                                               self._litert_library)
        return self._pool

    def __repr__(self) -> str:
        return f"LoadedPolicy({self.path!r}, kind={self.kind!r})"


def load_policy(path: str | os.PathLike, **kwargs) -> LoadedPolicy:
    """Load a policy (.tflite, model directory or compiled .so); see :class:`LoadedPolicy`."""
    return LoadedPolicy(path, **kwargs)


def _litert_library() -> str:
    env = os.environ.get("MLOPT_LITERT_LIBRARY")
    if env:
        return env
    try:
        import ai_edge_litert
    except ImportError:
        return ""
    candidate = Path(ai_edge_litert.__file__).parent / "libLiteRt.so"
    return str(candidate) if candidate.exists() else ""

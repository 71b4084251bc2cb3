"""MLGO's policy network, for any problem: quantile normalization, a ReLU
MLP, a decision index.

    policy = MLPPolicy.random(vocab, hidden=(64, 64), seed=0, problem=problem)
    policy.decide(log)                  # int64 decisions [n]
    policy.export("model_dir")          # model.tflite + output_spec.json

Forward pass (numpy here, the same graph in the exported .tflite):
  features [n, W] (every feature's elements, spec order) -> float32 ->
  (bucket positions p, p*p) [n, 2W] -> Dense+ReLU ... -> Dense ->
  logits [n, num_actions] -> decision = argmax (first maximum wins ties).
Each Dense sums in the compiled policy's order (:func:`.dense.dense`), so
the numpy, ``.so`` and ``.tflite`` forms decide alike on every machine.
Weights are float32 numpy arrays, ``W`` as [out, in] (TFLite's
FULLY_CONNECTED layout). Problem-neutral: the problem (its features, its
decision, its number of actions) is an argument or a subclass attribute.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import OutputExistsError, PolicyError
from ..log import TensorSpec
from .batching import feature_matrix
from .dense import dense
from .vocab import Vocab

# A float32 dot product of K terms summed in any order is within K * 2**-24 of the exact sum, relative to
# the sum of the terms' magnitudes; through a few layers of <= a few hundred inputs that is < 1e-4 of the
# magnitude bound. 1e-3 leaves a tenfold margin (logits_with_slack).
SLACK = 1e-3


def sure_decisions(logits: np.ndarray, slack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of :meth:`MLPPolicy.logits_with_slack`'s (logits, slack): the
    leading action (int64; the first of equal logits) and whether the row is
    unsure, True where the top logit does not lead the second by more than both
    slacks (ties and NaN included), so an evaluation in another order might pick
    another action; False where every order picks the leading action."""
    n, actions = logits.shape
    order = np.argsort(-logits, axis=1, kind="stable")
    lead = order[:, 0].astype(np.int64)
    if actions < 2:
        return lead, np.zeros(n, bool)
    rows, top, second = np.arange(n), order[:, 0], order[:, 1]
    return lead, ~(logits[rows, top] - logits[rows, second] > slack[rows, top] + slack[rows, second])


# The saved vocab's Vocab.fingerprint() (uint8 [16]) in a weights file: checked when the file is loaded, and
# what lets a process that loads many weights files of one vocab, which it wrote itself (a rollout worker
# loading ES's candidates), read the vocab once (MLPPolicy.load's ``known_vocabs``).
VOCAB_FINGERPRINT = "vocab_fingerprint"


def _saved_vocab(path, z, problem, known: dict | None) -> Vocab:
    """The vocab of the weights file ``z`` (an open .npz at ``path``) for ``problem``'s features: from
    ``known`` (fingerprint and features -> Vocab) when it holds the fingerprint the file names, else read
    from the file, checked against that fingerprint and added to ``known``."""
    names = tuple(problem.feature_names)
    saved = bytes(z[VOCAB_FINGERPRINT]) if VOCAB_FINGERPRINT in z else None
    if known is not None and saved is not None and (saved, names) in known:
        return known[saved, names]
    zscore = {f: (z[f"zscore/{f}/mean"], z[f"zscore/{f}/std"]) for f in names if f"zscore/{f}/mean" in z}
    vocab = Vocab({f: z[f"vocab/{f}"] for f in names if f not in zscore}, names, zscore)
    if saved is not None:
        if vocab.fingerprint() != saved:
            raise PolicyError(f"{path}: its vocab does not match the fingerprint saved with it "
                              f"({VOCAB_FINGERPRINT}): the file was changed after it was written")
        if known is not None:
            if len(known) >= 16:
                known.clear()
            known[saved, names] = vocab
    return vocab


def _blas_dense(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.float32) @ np.asarray(w, np.float32).T + np.asarray(b, np.float32)).astype(np.float32)


class MLPPolicy:
    """A quantile-normalized MLP over a problem's features.

    Subclasses bound to one problem set the class attribute ``problem``
    (``mlopt.InlinePolicy`` does); otherwise pass ``problem=``.
    """

    problem = None  # a mlopt.problems.Problem

    def __init__(self, vocab: Vocab, layers: Sequence[tuple[np.ndarray, np.ndarray]], problem=None):
        self.problem = problem or type(self).problem
        if self.problem is None:
            raise TypeError("MLPPolicy needs a problem (problem=...)")
        if not layers:
            raise ValueError("a policy needs at least one layer")
        self.vocab = vocab.subset(self.problem.feature_names)
        self.widths = self.problem.feature_widths
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []
        width, outputs = self.layer_widths(self.problem)
        for i, (w, b) in enumerate(layers):
            w = np.ascontiguousarray(w, dtype=np.float32)
            b = np.ascontiguousarray(b, dtype=np.float32)
            if w.ndim != 2 or w.shape[1] != width or b.shape != (w.shape[0],):
                raise ValueError(f"layer {i}: expected W [out, {width}] and b [out], got {w.shape} and {b.shape}")
            self.layers.append((w, b))
            width = w.shape[0]
        if width != outputs:
            raise ValueError(f"the last layer must have {outputs} outputs ({self.output_meaning()} of "
                             f"{self.problem.name}), has {width}")

    @classmethod
    def layer_widths(cls, problem) -> tuple[int, int]:
        """(inputs of the first layer, outputs of the last): every feature
        element normalized twice (p, p*p); one logit per action."""
        return 2 * sum(problem.feature_widths), problem.num_actions

    def output_meaning(self) -> str:
        return "one logit per action"

    # -- construction ------------------------------------------------------------
    @classmethod
    def random(cls, vocab: Vocab, hidden: Sequence[int] = (64, 64), seed: int = 0, *, problem=None):
        """He-initialized weights from ``numpy.random.default_rng(seed)``."""
        problem = problem or cls.problem
        rng = np.random.default_rng(seed)
        n_in, n_out = cls.layer_widths(problem)
        sizes = [n_in, *hidden, n_out]
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            scale = np.sqrt(2.0 / n_in)
            layers.append((rng.normal(0.0, scale, (n_out, n_in)), rng.normal(0.0, 0.1, n_out)))
        return cls(vocab, layers, problem=problem)

    @classmethod
    def constant(cls, decision: int, vocab: Vocab | None = None, *, problem=None):
        """A policy that always answers `decision`, whatever the features."""
        problem = problem or cls.problem
        if not 0 <= decision < problem.num_actions:
            choices = "0 or 1" if problem.num_actions == 2 else f"in [0, {problem.num_actions})"
            raise ValueError(f"decision must be {choices}")
        vocab = vocab or Vocab({f: [] for f in problem.feature_names})
        n_in, n_out = cls.layer_widths(problem)
        w = np.zeros((n_out, n_in))
        b = np.zeros(n_out)
        b[decision] = 1.0
        return cls(vocab, [(w, b)], problem=problem)

    @classmethod
    def load(cls, path: str | os.PathLike, *, problem=None, known_vocabs: dict | None = None):
        """Weights and vocab saved by :meth:`save` (.npz); ``problem`` must
        be the one they were saved for (see :func:`saved_problem`;
        :func:`mlopt.problems.load_weights` finds it by name). The vocab is
        checked against the fingerprint saved with it. ``known_vocabs``: a
        dict the caller keeps across loads of files it wrote itself: a
        vocab read once is taken from it for every later file that names its
        fingerprint, without reading the file's copy."""
        problem = problem or cls.problem
        if problem is None:
            raise TypeError("MLPPolicy.load needs a problem (problem=...)")
        with np.load(path) as z:
            saved = str(z["problem"]) if "problem" in z else problem.name
            if saved != problem.name and saved not in getattr(problem, "starts_from", ()):
                raise PolicyError(f"{path}: weights of a {saved!r} policy, not {problem.name!r}")
            n = int(z["n_layers"])
            layers = [(z[f"w{i}"], z[f"b{i}"]) for i in range(n)]
            vocab = _saved_vocab(path, z, problem, known_vocabs)
        return cls(vocab, layers, problem=problem)

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> None:
        path = Path(path)
        if path.exists() and not overwrite:
            raise OutputExistsError(path)
        arrays = {"n_layers": np.array(len(self.layers)), "problem": np.array(self.problem.name)}
        for i, (w, b) in enumerate(self.layers):
            arrays[f"w{i}"], arrays[f"b{i}"] = w, b
        for f in self.problem.feature_names:
            if f in self.vocab.zscore:
                arrays[f"zscore/{f}/mean"], arrays[f"zscore/{f}/std"] = self.vocab.zscore[f]
            else:
                arrays[f"vocab/{f}"] = self.vocab.boundaries[f]
        arrays[VOCAB_FINGERPRINT] = np.frombuffer(self.vocab.fingerprint(), np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    # -- evaluation ----------------------------------------------------------------
    def training_inputs(self, batch) -> tuple[np.ndarray, np.ndarray | None]:
        """What gradient training feeds the layers: the normalized features
        [n, inputs] and no logit penalty (a per-candidate network returns
        [n, C, inputs] and its [n, C] penalty)."""
        return self.normalized(batch), None

    def logits(self, batch) -> np.ndarray:
        return self.logits_of_inputs(self.normalized(batch))

    def logits_of_inputs(self, x: np.ndarray) -> np.ndarray:
        """The decision pass (:func:`dense`'s order, the compiled policy's
        bits) over already normalized inputs [n, inputs]."""
        return self._forward(x, self.layers, dense)

    def logits_with_slack(self, batch) -> tuple[np.ndarray, np.ndarray]:
        """Fast logits (BLAS: any order of additions, so not bit-exact) and,
        per row and logit, a bound on how far ANY float32 evaluation of the
        same graph (this class's exact order, the ``.so``'s, LiteRT's) can be
        from them: ``SLACK`` times the forward pass of |inputs| through |W|
        and |b|, a bound on every partial sum. Where the top logit leads by
        more than both slacks, every evaluation order picks the same action
        (what :meth:`LoadedPolicy.decide` uses to skip LiteRT)."""
        return self._logits_with_slack_of_inputs(self.normalized(batch))

    def _logits_with_slack_of_inputs(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._forward(x, self.layers, _blas_dense), SLACK * self._magnitudes(x)

    def _magnitudes(self, x: np.ndarray) -> np.ndarray:
        """The forward pass of |x| through |W| and |b|: a bound on every partial sum, per row and logit."""
        return self._forward(np.abs(x), [(np.abs(w), np.abs(b)) for w, b in self.layers], _blas_dense)

    def normalization_key(self) -> tuple:
        """What :meth:`normalized` depends on: the vocab's fingerprint, the widths and the features."""
        return (self.vocab.fingerprint(), tuple(self.widths), tuple(s.name for s in self.problem.features))

    def sure_of_inputs(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:func:`sure_decisions` of :meth:`logits_with_slack` over already normalized inputs [n, inputs],
        with the same answer and less work: the rows settled by a looser bound (per row, one number that
        bounds every |partial sum|: ``s' = max_i sum_j |W_ij| * s + max |b|`` from ``s = max |x|``) skip the
        magnitude pass, which runs on the other rows only. Every row sure under the looser bound is sure
        under the exact one (it is no smaller), and the leading action is BLAS's either way."""
        fast = self._forward(x, self.layers, _blas_dense)
        n, actions = fast.shape
        if actions < 2:
            return sure_decisions(fast, np.zeros_like(fast))
        bound = np.abs(x).max(axis=1).astype(np.float64) if x.shape[1] else np.zeros(n)
        for w, b in self.layers:
            bound = float(np.abs(w).sum(axis=1).max(initial=0.0)) * bound + float(np.abs(b).max(initial=0.0))
        top2 = -np.partition(-fast, 1, axis=1)[:, :2].astype(np.float64)
        loose = ~(top2[:, 0] - top2[:, 1] > 2.0 * SLACK * bound * (1.0 + 1e-6))  # NaN: not settled here
        lead = np.argmax(fast, axis=1).astype(np.int64)
        unsure = np.zeros(n, bool)
        rows = np.flatnonzero(loose)
        if len(rows):
            lead[rows], unsure[rows] = sure_decisions(fast[rows], SLACK * self._magnitudes(x[rows]))
        return lead, unsure

    def decide_inputs(self, x: np.ndarray) -> np.ndarray:
        """``argmax(logits_of_inputs(x))`` exactly, several times faster: rows whose top logit leads by
        more than :meth:`logits_with_slack`'s bound are decided from BLAS's logits, the others by the
        decision pass."""
        decided, unsure = self.sure_of_inputs(x)
        unsure = np.flatnonzero(unsure)
        if len(unsure):
            decided[unsure] = np.argmax(self.logits_of_inputs(x[unsure]), axis=1)
        return decided

    def normalized(self, batch) -> np.ndarray:
        """The first layer's inputs [n, inputs] for a batch: every feature normalized by the vocab."""
        return self.vocab.normalize(feature_matrix(batch, self.problem.features), self.widths)

    @staticmethod
    def _forward(h: np.ndarray, layers, layer) -> np.ndarray:
        """The network: ``layer`` (a dense function) then ReLU, the last layer without."""
        for i, (w, b) in enumerate(layers):
            h = layer(h, w, b)
            if i + 1 < len(layers):
                np.maximum(h, 0, out=h)
        return h.astype(np.float32, copy=False)

    def decide(self, batch) -> np.ndarray:
        """Decisions (int64 indices in [0, num_actions)) for a batch."""
        return np.argmax(self.logits(batch), axis=1).astype(np.int64)

    __call__ = decide

    # -- export ------------------------------------------------------------------------
    def logits_spec(self) -> TensorSpec:
        return TensorSpec(self.problem.logits_name, "float", [self.problem.num_actions])

    def output_spec(self, logits_output: bool = False) -> list[dict]:
        """output_spec.json content: the decision first, then logged extra outputs."""
        return self.problem.output_spec([self.logits_spec()] if logits_output else [])

    def to_tflite(self, logits_output: bool = False) -> bytes:
        """The policy as a .tflite flatbuffer (inputs ``<feed_prefix><feature>:0``).
        Policies that differ only in their weights (ES's candidates) share one
        built graph whose weight bytes are replaced (:mod:`mlopt.tflite.template`):
        the bytes are exactly a fresh build's."""
        from ..tflite.template import cached_build

        key = (type(self).__qualname__, self.problem, logits_output, self.vocab.fingerprint(),
               tuple(w.shape for w, _ in self.layers))
        names = [f"dense_{i}/{part}" for i in range(len(self.layers)) for part in ("kernel", "bias")]
        return cached_build(key, lambda: _build_tflite(self, logits_output), names,
                            [a for wb in self.layers for a in wb])

    def export(self, directory: str | os.PathLike, *, logits_output: bool = False,
               overwrite: bool = False) -> Path:
        """Write a ModelUnderTraining directory: ``model.tflite`` + ``output_spec.json``.

        Loadable by mlopt's plugin (``-mlopt-inline-model=DIR``) and by an LLVM built
        with TFLite (``-ml-inliner-model-under-training=DIR``). With `logits_output`
        the logits are a second output, logged as an extra column (``<problem>_logits``).
        """
        directory = Path(directory)
        model, spec = directory / "model.tflite", directory / "output_spec.json"
        for p in (model, spec):
            if p.exists() and not overwrite:
                raise OutputExistsError(p)
        directory.mkdir(parents=True, exist_ok=True)
        model.write_bytes(self.to_tflite(logits_output))
        spec.write_text(json.dumps(self.output_spec(logits_output), indent=2) + "\n")
        return directory

    def __repr__(self) -> str:
        sizes = [self.layers[0][0].shape[1]] + [w.shape[0] for w, _ in self.layers]
        return f"<{type(self).__name__} {self.problem.name} {'x'.join(map(str, sizes))}>"


def saved_problem(path: str | os.PathLike) -> str | None:
    """The registered name of the problem weights saved by :meth:`MLPPolicy.save` are for."""
    with np.load(path) as z:
        return str(z["problem"]) if "problem" in z else None


def _build_tflite(policy: MLPPolicy, logits_output: bool) -> bytes:
    from ..tflite.builder import GraphBuilder

    problem = policy.problem
    g = GraphBuilder(signature_key="action", description=f"mlopt {problem.name} policy")
    total = sum(policy.widths)
    # Normalized elements u [total], in feature order: a run of bucketed
    # features is bucketized, concatenated, cast and scaled by 1/K at once;
    # a z-scored feature is (x - mean) * (1/std).
    segments, run, run_inv = [], [], []

    def close_run():
        if not run:
            return
        width = sum(k for _, k in run)
        tag = f"{len(segments)}" if segments or len(run) < len(problem.features) else ""
        suffix = f"_{tag}" if tag else ""
        index = g.op(
            "CONCATENATION", [b for b, _ in run], np.int32, [width], g.options("ConcatenationOptions", axis=0),
            name=f"bucket_index{suffix}")
        index_f = g.op("CAST", [index], np.float32, [width], g.options("CastOptions", inDataType=2, outDataType=0),
                       name=f"bucket_index_f{suffix}")
        inv = np.concatenate(run_inv).astype(np.float32)
        segments.append(g.op("MUL", [index_f, g.const(f"inverse_bucket_count{suffix}", inv)], np.float32, [width],
                             g.options("MulOptions"), name=f"bucket_position{suffix}"))
        run.clear()
        run_inv.clear()

    inverse = policy.vocab.inverse_counts()
    for i, (spec, k) in enumerate(zip(problem.features, policy.widths)):
        f = spec.name
        x = g.input(f, f"{problem.feed_prefix}{f}:0", spec.dtype, list(spec.shape))
        if f in policy.vocab.zscore:
            close_run()
            mean, inv_std = policy.vocab.zscore_constants(f)
            if list(spec.shape) != [k]:
                x = g.op("RESHAPE", [x, g.const(f"{f}/shape", np.array([k], np.int32))], np.float32, [k],
                         g.options("ReshapeOptions", newShape=[k]), name=f"{f}/flat")
            centered = g.op("SUB", [x, g.const(f"{f}/mean", mean)], np.float32, [k], g.options("SubOptions"),
                            name=f"{f}/centered")
            segments.append(g.op("MUL", [centered, g.const(f"{f}/inverse_std", inv_std)], np.float32, [k],
                                 g.options("MulOptions"), name=f"{f}/zscore"))
            continue
        b = policy.vocab.boundaries[f].astype(np.float32)
        bucket = g.op("BUCKETIZE", [x], np.int32, list(spec.shape),
                      g.options("BucketizeOptions", boundaries=b.tolist()), name=f"bucket_{f}")
        if list(spec.shape) != [k]:
            bucket = g.op("RESHAPE", [bucket, g.const(f"bucket_{f}/shape", np.array([k], np.int32))], np.int32,
                          [k], g.options("ReshapeOptions", newShape=[k]), name=f"bucket_{f}/flat")
        run.append((bucket, k))
        run_inv.append(np.repeat(inverse[i], k))
    close_run()
    pos = segments[0] if len(segments) == 1 else g.op(
        "CONCATENATION", segments, np.float32, [total], g.options("ConcatenationOptions", axis=0),
        name="normalized_elements")
    sq = g.op("MUL", [pos, pos], np.float32, [total], g.options("MulOptions"), name="bucket_position_sq")
    both = g.op("CONCATENATION", [pos, sq], np.float32, [2 * total], g.options("ConcatenationOptions", axis=0),
                name="normalized")
    h = g.op("RESHAPE", [both, g.const("row_shape", np.array([1, 2 * total], np.int32))], np.float32,
             [1, 2 * total], g.options("ReshapeOptions", newShape=[1, 2 * total]), name="normalized_row")
    for i, (w, b) in enumerate(policy.layers):
        last = i + 1 == len(policy.layers)
        h = g.op("FULLY_CONNECTED", [h, g.const(f"dense_{i}/kernel", w), g.const(f"dense_{i}/bias", b)],
                 np.float32, [1, w.shape[0]],
                 g.options("FullyConnectedOptions", fusedActivationFunction=0 if last else 1),
                 name=f"dense_{i}")
    decision_name = problem.decision.name
    decision = g.op("ARG_MAX", [h, g.const("class_axis", np.array([1], np.int32))], np.int64, [1],
                    g.options("ArgMaxOptions", outputType=4), name=f"{decision_name}:0")
    g.output(decision_name, decision)
    if logits_output:
        n = problem.num_actions
        logits = g.op("RESHAPE", [h, g.const("logits_shape", np.array([n], np.int32))], np.float32, [n],
                      g.options("ReshapeOptions", newShape=[n]), name=f"{problem.logits_name}:0")
        g.output(problem.logits_name, logits)
    return g.finish()

"""Behavioral cloning: an MLP policy that imitates the compiler's heuristic
from a trace (the MLGO paper's warm start), in numpy. Generic over the
problem: the features are the problem's, the label its default decision.

The reported agreement is measured on whole packages the policy never saw
(:func:`heldout_modules`: packages in the order of a salted SHA-256 of
their names -- BC's own salt, not ``corpus split``'s, which already sent
its held-out packages elsewhere -- until they hold the asked share of the
rows; modules without a ``PKG/`` prefix are their own unit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..corpus.split import package_of, split_value
from ..errors import MloptError
from ..policy import MLPPolicy, Vocab
from ..policy.batching import feature_matrix
from ..rollouts import TraceDataset
from .mlp_train import fit, forward


@dataclass
class BCResult:
    policy: MLPPolicy
    train_agreement: float
    heldout_agreement: float | None  # None without held-out rows
    train_rows: int
    heldout_rows: int
    losses: list[float] = field(default_factory=list)
    heldout_modules: list[str] = field(default_factory=list)  # names of the held-out modules
    heldout_units: list[str] = field(default_factory=list)  # what was held out whole: packages (or modules)

    def report(self) -> dict:
        return {"train_agreement": self.train_agreement, "heldout_agreement": self.heldout_agreement,
                "train_rows": self.train_rows, "heldout_rows": self.heldout_rows,
                "heldout_module_count": len(self.heldout_modules), "heldout_units": self.heldout_units,
                "final_loss": self.losses[-1], "epochs": len(self.losses)}


HELDOUT_SALT = 0xBC  # BC's hash salt: corpus split uses seed 0 (and other seeds) for its sides


def holdout_unit(module: str) -> str:
    """What BC holds out whole: a module's package (``PKG/...``), or the
    module itself when its name has no package prefix."""
    return package_of(module) if "/" in module else module


def holdout_unit_of(modules: Sequence[str], rows: Sequence[int]) -> Callable[[str], str]:
    """:func:`holdout_unit`, or the module itself when fewer than two
    packages have rows (a single package's modules are then the units)."""
    if len({holdout_unit(m) for m, r in zip(modules, rows) if r > 0}) < 2:
        return str
    return holdout_unit


def heldout_modules(modules: Sequence[str], fraction: float, rows: Sequence[int] | None = None) -> list[int]:
    """Indices of the modules held out to measure agreement: whole units
    (:func:`holdout_unit`: packages; modules when a single package has
    rows) in the order of their salted hash, taken until they hold
    ``fraction`` of the rows (``rows``: rows per module; default one each),
    skipping a unit that would take more than 1.5 times that share; when
    every unit alone is that large, the unit closest to the share. At
    least one unit with rows when ``fraction > 0``, never every unit."""
    rows = [1] * len(modules) if rows is None else [int(r) for r in rows]
    if fraction <= 0:
        return []
    unit_of = holdout_unit_of(modules, rows)
    per_unit: dict[str, int] = {}
    for m, r in zip(modules, rows):
        per_unit[unit_of(m)] = per_unit.get(unit_of(m), 0) + r
    with_rows = [u for u, r in per_unit.items() if r > 0]
    target = fraction * sum(rows)
    order = sorted(with_rows, key=lambda u: (split_value(u, HELDOUT_SALT), u))
    held: list[str] = []
    taken = 0
    for unit in order:  # in hash order, skipping units that would overshoot the share by half
        if taken >= target or len(held) + 1 >= len(with_rows):
            break
        if taken + per_unit[unit] <= 1.5 * target:
            held.append(unit)
            taken += per_unit[unit]
    if not held and len(with_rows) > 1:  # every unit alone is too large: the one closest to the share
        held.append(min(order, key=lambda u: abs(per_unit[u] - target)))
    return [i for i, m in enumerate(modules) if unit_of(m) in held]


def vocab_from_rows(columns: dict[str, np.ndarray], rows: np.ndarray, features: Sequence[str],
                    num_buckets: int, zscore: Sequence[str] = ()) -> Vocab:
    """Quantiles of each feature over the given rows (``num_buckets`` points);
    per-element mean and std for the features in ``zscore``."""
    return Vocab.from_columns({f: [columns[f][rows]] for f in features}, num_buckets, zscore)


def train_bc(ds: TraceDataset, problem, *, hidden: Sequence[int] = (64, 64), epochs: int = 20,
             batch_size: int = 512, lr: float = 3e-3, num_buckets: int = 1000, heldout_fraction: float = 0.2,
             seed: int = 0, on_epoch: Callable[[int, float], None] | None = None, label: str | None = None,
             init: MLPPolicy | None = None, weights: np.ndarray | None = None) -> BCResult:
    """Fits an MLP to ``label`` (default: the problem's default decision, the
    heuristic) from the trace's features. ``init``: start from this policy
    (its vocab and weights) instead of a fresh one. ``weights``: per row."""
    if label is None:
        if problem.default_decision is None:
            raise MloptError(f"problem {problem.name!r} logs no default decision to imitate")
        label = problem.default_decision.name
    if label not in ds.columns:
        raise MloptError(f"the trace has no {label!r} column")
    heldout_rows = np.zeros(len(ds), bool)
    per_module = np.diff(ds.module_rows)
    held = heldout_modules(ds.modules, heldout_fraction, per_module)
    for i in held:
        heldout_rows[ds.rows_of(i)] = True
    train_idx, test_idx = np.flatnonzero(~heldout_rows), np.flatnonzero(heldout_rows)
    if len(train_idx) == 0:
        raise MloptError("no training rows (the trace is empty or every module is held out)")
    if init is None:
        vocab = vocab_from_rows(ds.columns, train_idx, problem.feature_names, num_buckets,
                                problem.zscore_features)
        policy = MLPPolicy.random(vocab, hidden=hidden, seed=seed, problem=problem)
    else:
        vocab, policy = init.vocab, init
    x_all = policy.vocab.normalize(feature_matrix(ds.columns, problem.features), policy.widths)
    labels = ds.columns[label].reshape(-1).astype(np.int64)
    layers = [(w.copy(), b.copy()) for w, b in policy.layers]
    losses = fit(layers, x_all[train_idx], labels[train_idx], epochs=epochs, batch_size=batch_size, lr=lr,
                 seed=seed, on_epoch=on_epoch, weights=None if weights is None else weights[train_idx])
    policy = MLPPolicy(vocab, layers, problem=problem)

    def agreement(idx: np.ndarray) -> float | None:
        if len(idx) == 0:
            return None
        logits = policy.logits_of_inputs(x_all[idx])
        return float((np.argmax(logits, axis=1) == labels[idx]).mean())

    held_names = [ds.modules[i] for i in held]
    unit_of = holdout_unit_of(ds.modules, per_module)
    return BCResult(policy, agreement(train_idx), agreement(test_idx), len(train_idx), len(test_idx), losses,
                    held_names, sorted({unit_of(m) for m in held_names}))


def clone_logs(policy: MLPPolicy, logs: Sequence, *, label: str | None = None, epochs: int = 10,
               batch_size: int = 256, lr: float = 3e-3, heldout_fraction: float = 0.2, seed: int = 0,
               on_epoch: Callable[[int, float], None] | None = None) -> BCResult:
    """Behavioral cloning from training logs (one per module, e.g. regalloc
    eviction logs written with the default advisor deciding): fits
    ``policy``'s layers (a copy) to each row's ``label`` (default: the
    problem's decision column, what was done). Whole logs are held out."""
    from ..log import read_log

    problem = policy.problem
    label = label or problem.decision.name
    logs = [read_log(log) if not hasattr(log, "features") else log for log in logs]
    logs = [log for log in logs if len(log)]
    if not logs:
        raise MloptError("no rows to clone: every log is empty")
    held = set(heldout_modules([str(i) for i in range(len(logs))], heldout_fraction,
                               [len(log) for log in logs]))
    parts = [policy.training_inputs(log) + (np.asarray(log[label]).reshape(-1).astype(np.int64),) for log in logs]
    rows = np.concatenate([np.full(len(log), i in held) for i, log in enumerate(logs)]) if logs else np.zeros(0, bool)
    x = np.concatenate([p[0] for p in parts])
    penalty = None if parts[0][1] is None else np.concatenate([p[1] for p in parts])
    labels = np.concatenate([p[2] for p in parts])
    train_idx, test_idx = np.flatnonzero(~rows), np.flatnonzero(rows)
    if len(train_idx) == 0:
        raise MloptError("no training rows (the logs are empty or every log is held out)")
    layers = [(w.copy(), b.copy()) for w, b in policy.layers]
    losses = fit(layers, x[train_idx], labels[train_idx], epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                 on_epoch=on_epoch, penalty=None if penalty is None else penalty[train_idx])
    trained = type(policy)(policy.vocab, layers, problem=problem)

    def agreement(idx: np.ndarray) -> float | None:
        if len(idx) == 0:
            return None
        h = x[idx]
        logits, _ = forward(trained.layers, h.reshape(-1, h.shape[-1]) if h.ndim == 3 else h)
        logits = logits.reshape(len(idx), -1) + (0 if penalty is None else penalty[idx])
        return float((np.argmax(logits, axis=1) == labels[idx]).mean())

    return BCResult(trained, agreement(train_idx), agreement(test_idx), len(train_idx), len(test_idx), losses)

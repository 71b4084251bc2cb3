"""An inlining policy with the heuristic as a prior: ``with_default_prior``
turns an ``inlining`` MLP (e.g. behavioral cloning of the heuristic) into an
``inlining-default`` MLP whose logits are exactly the original's plus a
fixed vote for the heuristic's decision:

    logit_yes - logit_no = original(x) + margin * (inlining_default - 1/2)

so where the original's own margin is below ``margin / 2`` the new policy
decides as the heuristic does, and elsewhere as the original. One extra
hidden unit per layer carries the heuristic's decision through the ReLUs
(it is 0 when the heuristic says no and a positive constant when it says
yes); a linear policy gets the vote as the new input's weight. Why: a
network trained to imitate the decision it sees as an input saturates
(its margins grow without bound), and perturbation-based training (ES) or
sampling (PPO) then never changes a decision; this prior starts from the
heuristic's decisions with the original network's margins everywhere
else, so a perturbation flips the call sites where the original's
evidence against the heuristic is close to ``margin / 2``."""

from __future__ import annotations

import numpy as np

from ...policy.mlp import MLPPolicy
from ...policy.vocab import Vocab
from ..inlining.spec import DEFAULT_DECISION
from . import PROBLEM, DefaultInformedPolicy


def default_vocab(vocab: Vocab) -> Vocab:
    """``vocab`` plus boundaries [0, 1] for ``inlining_default`` (0 and 1
    normalize to different values)."""
    boundaries = {f: vocab.boundaries[f] for f in vocab.features}
    boundaries[DEFAULT_DECISION] = np.array([0.0, 1.0])
    return Vocab(boundaries)


def with_default_prior(policy: MLPPolicy, margin: float) -> DefaultInformedPolicy:
    """The ``inlining-default`` policy described in the module docstring;
    ``policy`` must be an ``inlining`` MLP (38 features). Without a hidden
    layer (a linear policy) the vote is a weight on the new input itself."""
    if policy.problem.name != "inlining":
        raise ValueError(f"with_default_prior needs an 'inlining' policy, not {policy.problem.name!r}")
    if not margin > 0:
        raise ValueError("margin must be > 0")
    vocab = default_vocab(policy.vocab)
    names = PROBLEM.feature_names
    col, n = names.index(DEFAULT_DECISION), len(names)
    rows = np.zeros((2, n), np.int64)
    rows[1, col] = 1
    p0, p1 = (float(v) for v in vocab.subset(names).normalize(rows)[:, col])
    mid = (p0 + p1) / 2  # the carried unit: relu(p - mid) = 0 for "no", p1 - mid for "yes"
    old = [i for i in range(n) if i != col]  # the 38 features' positions among the 39
    (w, b), *rest = policy.layers
    if not rest:  # linear: the vote is margin * ((p - p0) / (p1 - p0) - 1/2) on the "yes" logit
        first = np.zeros((w.shape[0], 2 * n), np.float32)
        first[:, old] = w[:, : n - 1]
        first[:, [n + i for i in old]] = w[:, n - 1:]
        first[1, col] = margin / (p1 - p0)
        bias = b.astype(np.float64)
        bias[1] -= margin * p0 / (p1 - p0) + margin / 2
        return DefaultInformedPolicy(vocab, [(first, bias.astype(np.float32))])
    first = np.zeros((w.shape[0] + 1, 2 * n), np.float32)
    first[:-1, old] = w[:, : n - 1]
    first[:-1, [n + i for i in old]] = w[:, n - 1:]  # the squared block
    first[-1, col] = 1.0
    layers = [(first, np.append(b, -mid).astype(np.float32))]
    for k, (w, b) in enumerate(rest):
        grown = np.zeros((w.shape[0] + (k + 1 < len(rest)), w.shape[1] + 1), np.float32)
        grown[: w.shape[0], :-1] = w
        bias = np.append(b, 0.0) if k + 1 < len(rest) else b.copy()
        if k + 1 < len(rest):
            grown[-1, -1] = 1.0  # carry the unit to the next layer
        else:
            grown[1, -1] = margin / (p1 - mid)  # the vote for "yes" when the heuristic says yes
            bias[1] -= margin / 2
        layers.append((grown, bias.astype(np.float32)))
    return DefaultInformedPolicy(vocab, layers)


def with_added_vote(policy: DefaultInformedPolicy, delta: float) -> DefaultInformedPolicy:
    """``policy`` (an ``inlining-default`` MLP with a hidden layer, e.g. one
    ES trained from a prior) with ``delta`` more vote for the heuristic:

        logit_yes - logit_no = policy(x) + delta * (inlining_default - 1/2)

    up to float rounding, through one more carried unit per hidden layer (as
    :func:`with_default_prior` adds its vote). A positive delta keeps only
    the call sites where the policy disagrees with the heuristic by more
    than ``delta / 2``; a negative one lets more disagree."""
    if policy.problem.name != PROBLEM.name:
        raise ValueError(f"with_added_vote needs an {PROBLEM.name!r} policy, not {policy.problem.name!r}")
    if len(policy.layers) < 2:
        raise ValueError("with_added_vote needs a hidden layer; this policy is linear")
    names = PROBLEM.feature_names
    col = names.index(DEFAULT_DECISION)
    rows = np.zeros((2, len(names)), np.int64)
    rows[1, col] = 1
    p0, p1 = (float(v) for v in policy.vocab.subset(names).normalize(rows)[:, col])
    if not p1 > p0:
        raise ValueError(f"the policy's vocab does not tell {DEFAULT_DECISION} 0 and 1 apart")
    mid = (p0 + p1) / 2
    layers = []
    for k, (w, b) in enumerate(policy.layers):
        first, last = k == 0, k == len(policy.layers) - 1
        grown = np.zeros((w.shape[0] + (not last), w.shape[1] + (not first)), np.float32)
        grown[: w.shape[0], : w.shape[1]] = w
        bias = np.append(b, -mid if first else 0.0) if not last else np.array(b, np.float64)
        if first:
            grown[-1, col] = 1.0
        elif not last:
            grown[-1, -1] = 1.0  # carry the unit to the next layer
        else:
            grown[1, -1] = delta / (p1 - mid)
            bias[1] -= delta / 2
        layers.append((grown, np.asarray(bias, np.float32)))
    return DefaultInformedPolicy(policy.vocab, layers)

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


def decision_positions(vocab: Vocab) -> tuple[float, float]:
    """The bucket positions (p0, p1) of inlining_default = 0 and 1 under ``vocab``."""
    names = PROBLEM.feature_names
    col = names.index(DEFAULT_DECISION)
    rows = np.zeros((2, len(names)), np.int64)
    rows[1, col] = 1
    p0, p1 = (float(v) for v in vocab.subset(names).normalize(rows)[:, col])
    return p0, p1


def _with_carried_vote(vocab: Vocab, layers, margin: float) -> DefaultInformedPolicy:
    """``layers`` (inlining-default inputs, a hidden layer at least) plus one
    unit per hidden layer that carries relu(p - mid) of the heuristic's
    decision (0 for "no", p1 - mid for "yes") to a vote of
    margin * (inlining_default - 1/2) on the "yes" logit."""
    p0, p1 = decision_positions(vocab)
    if not p1 > p0:
        raise ValueError(f"the vocab does not tell {DEFAULT_DECISION} 0 and 1 apart")
    mid = (p0 + p1) / 2
    col = PROBLEM.feature_names.index(DEFAULT_DECISION)
    (w, b), *rest = layers
    first = np.zeros((w.shape[0] + 1, w.shape[1]), np.float32)
    first[:-1] = w
    first[-1, col] = 1.0
    grown_layers = [(first, np.append(b, -mid).astype(np.float32))]
    for k, (w, b) in enumerate(rest):
        grown = np.zeros((w.shape[0] + (k + 1 < len(rest)), w.shape[1] + 1), np.float32)
        grown[: w.shape[0], :-1] = w
        bias = np.append(b, 0.0) if k + 1 < len(rest) else np.array(b, np.float32)
        if k + 1 < len(rest):
            grown[-1, -1] = 1.0  # carry the unit to the next layer
        else:
            grown[1, -1] = margin / (p1 - mid)  # the vote for "yes" when the heuristic says yes
            bias[1] -= margin / 2
        grown_layers.append((grown, bias.astype(np.float32)))
    return DefaultInformedPolicy(vocab, grown_layers)


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
    old = [i for i in range(n) if i != col]  # the 38 features' positions among the 39
    (w, b), *rest = policy.layers
    first = np.zeros((w.shape[0], 2 * n), np.float32)
    first[:, old] = w[:, : n - 1]
    first[:, [n + i for i in old]] = w[:, n - 1:]  # the squared block
    if rest:
        return _with_carried_vote(vocab, [(first, b), *rest], margin)
    p0, p1 = decision_positions(vocab)  # linear: the vote is margin * ((p - p0) / (p1 - p0) - 1/2) on "yes"
    first[1, col] = margin / (p1 - p0)
    bias = b.astype(np.float64)
    bias[1] -= margin * p0 / (p1 - p0) + margin / 2
    return DefaultInformedPolicy(vocab, [(first, bias.astype(np.float32))])

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
    return _with_carried_vote(policy.vocab, policy.layers, delta)


def carried_vote_mask(policy: MLPPolicy, units: int = 1) -> np.ndarray:
    """Per parameter of the flat vector (each layer's W row-major, then its b, as ES flattens): True for
    the parameters of the heuristic's vote carried by :func:`with_default_prior` (``units`` = 1) or by it
    and ``units - 1`` calls of :func:`with_added_vote`: the last ``units`` units of each hidden layer (their
    incoming weights and biases) and the weights they feed in the next layer. A trainer that keeps them
    fixed keeps the vote's strength, so a call site changes its decision only through the network's own
    features. The vote's path has a gain of ``margin / (p1 - mid)`` on the margin (80 at margin 20), so a
    gradient step in the normalized space is otherwise mostly a change of the vote's strength for every
    call site at once."""
    if len(policy.layers) < 2:
        raise ValueError("the carried vote needs a hidden layer; this policy is linear")
    parts = []
    for k, (w, b) in enumerate(policy.layers):
        mw, mb = np.zeros(w.shape, bool), np.zeros(b.shape, bool)
        if k + 1 < len(policy.layers):  # a hidden layer: its last units are the carried votes
            mw[-units:, :] = True
            mb[-units:] = True
        if k:  # the weights fed by the previous layer's carried units
            mw[:, -units:] = True
        parts += [mw.reshape(-1), mb]
    return np.concatenate(parts)

"""An ``inlining-default`` policy as an ``inlining-linkage`` one: the same
network with the callee's linkage as a 40th input, unused
(:func:`with_linkage_input`: ES can start there; ``mlopt policy
default-prior --with-linkage``), or used by one fixed rule
(:func:`with_linkage_rule`, an exact policy that decides by the linkage: the
tests' proof that the plugin and the engine feed it):

    logit_yes - logit_no = policy(x) - vote * [callee_linkage == k and inlining_default == 0]

so the sites of callees of linkage class ``k`` that the heuristic declines
stay declined unless the policy's own margin for them exceeds ``vote``
(``everywhere``: every site of such a callee, the last factor dropped).
The rule is exact on the bucket positions the vocabulary gives the two
inputs (they take a few discrete values): three units of the first hidden
layer make a triangle around class ``k``'s position, one more is 1 where
the heuristic says no, and one unit of the second hidden layer is their
AND (a ReLU of their sum less one)."""

from __future__ import annotations

import numpy as np

from ...policy.vocab import Vocab
from ..inlining.spec import DEFAULT_DECISION
from ..inlining_default import PROBLEM as DEFAULT_INFORMED
from ..inlining_default.prior import decision_positions
from . import LINKAGE, LINKAGE_CLASSES, PROBLEM, LinkageInformedPolicy

# The linkage classes' boundaries: class c normalizes to (c + 1) / 5.
BOUNDARIES = np.arange(len(LINKAGE_CLASSES), dtype=np.float64)


def linkage_vocab(vocab: Vocab) -> Vocab:
    """``vocab`` (an ``inlining-default`` policy's) plus the linkage's boundaries."""
    boundaries = {f: vocab.boundaries[f] for f in DEFAULT_INFORMED.feature_names}
    boundaries[LINKAGE] = BOUNDARIES
    return Vocab(boundaries, features=PROBLEM.feature_names)


def with_linkage_input(policy) -> LinkageInformedPolicy:
    """``policy`` (``inlining-default``) taking the linkage as a 40th input with zero weights: it decides
    as ``policy`` everywhere."""
    if policy.problem.name != DEFAULT_INFORMED.name:
        raise ValueError(f"with_linkage_input needs an {DEFAULT_INFORMED.name!r} policy, not {policy.problem.name!r}")
    n = len(DEFAULT_INFORMED.feature_names)
    (w, b), *rest = policy.layers
    first = np.zeros((w.shape[0], 2 * (n + 1)), np.float32)
    first[:, :n] = w[:, :n]  # positions
    first[:, n + 1: 2 * n + 1] = w[:, n:]  # squares
    return LinkageInformedPolicy(linkage_vocab(policy.vocab), [(first, b), *rest])


def with_linkage_rule(policy, linkage: int | str, vote: float, everywhere: bool = False) -> LinkageInformedPolicy:
    """``policy`` (``inlining-default``, two hidden layers) with the rule of the module docstring;
    ``everywhere``: at every site of a class-``k`` callee, whatever the heuristic says (the second layer's
    unit is the triangle alone)."""
    k = LINKAGE_CLASSES.index(linkage) if linkage in LINKAGE_CLASSES else linkage
    if isinstance(k, str) or not 0 <= int(k) < len(LINKAGE_CLASSES):
        raise ValueError(f"linkage class {linkage!r} is not one of {', '.join(LINKAGE_CLASSES)}")
    if len(policy.layers) != 3:
        raise ValueError(f"with_linkage_rule needs a network with two hidden layers, this one has "
                         f"{len(policy.layers) - 1}")
    base = with_linkage_input(policy)
    (w1, b1), (w2, b2), (w3, b3) = base.layers
    n = len(PROBLEM.feature_names)
    col_link, col_default = PROBLEM.feature_names.index(LINKAGE), PROBLEM.feature_names.index(DEFAULT_DECISION)
    scale = float(len(BOUNDARIES))  # 1 / the distance between two classes' positions
    k = int(k)
    at = (k + 1) / scale
    new1 = np.zeros((4, 2 * n), np.float32)
    bias1 = np.zeros(4, np.float32)
    for row, shift in enumerate((1.0, 0.0, -1.0)):  # relu(s + 1) - 2 relu(s) + relu(s - 1), s = scale (p - at)
        new1[row, col_link] = scale
        bias1[row] = shift - scale * at
    # the heuristic's "no": 1 at inlining_default's position for 0, 0 at its position for 1
    p0, p1 = decision_positions(base.vocab)
    new1[3, col_default] = -1.0 / (p1 - p0)
    bias1[3] = p1 / (p1 - p0)
    w1 = np.concatenate([w1, new1])
    b1 = np.concatenate([b1, bias1])
    h1, h2 = w2.shape[1], w2.shape[0]
    grown2 = np.zeros((h2 + 1, h1 + 4), np.float32)
    grown2[:h2, :h1] = w2
    grown2[h2, h1:] = (1.0, -2.0, 1.0, 0.0 if everywhere else 1.0)
    b2 = np.append(b2, 0.0 if everywhere else -1.0).astype(np.float32)
    grown3 = np.zeros((w3.shape[0], h2 + 1), np.float32)
    grown3[:, :h2] = w3
    grown3[1, h2] = -vote  # less "yes"
    return LinkageInformedPolicy(base.vocab, [(w1, b1), (grown2, b2), (grown3, b3)])

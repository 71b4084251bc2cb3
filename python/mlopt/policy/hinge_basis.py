"""A hinge basis on a policy's last hidden layer: piecewise-linear terms of
each feature that the output layer can weigh, starting at weight 0.

    grown = with_hinge_basis(prior, knots=5)   # decides as prior (wherever prior is sure)
    # ES on the output layer only (train_layers=1) now also moves
    # sum_j sum_k a_jk * relu(p_j - k/knots) on every logit

For every quantile-normalized feature element j (bucket position p_j in
[0, 1]), the first hidden layer gains a unit relu(p_j) = p_j, each further
hidden layer but the last carries it on (identity weights), and the last
hidden layer turns it into ``knots`` hinges relu(p_j - k / knots),
k = 0 .. knots - 1 (k = 0 is p_j itself). With a single hidden layer the
hinges come straight from the input. The output layer's weights on the new
units are 0, so the grown policy's logits are the original's up to float
rounding (the wider layers' sums group differently) and it decides alike
wherever the original's decision is sure (``sure_decisions``); a trainer that
perturbs the output layer then searches the original's output weights and
an additive, piecewise-linear function of each feature (a generalized
additive model on top of the network) in a few hundred dimensions.

Z-score-normalized elements (IR2Vec embeddings) get no hinges: their
values are not bucket positions. A policy without a hidden layer raises
ValueError (a hinge needs a layer to live in)."""

from __future__ import annotations

import numpy as np

from .mlp import MLPPolicy


def hinge_columns(policy: MLPPolicy) -> list[int]:
    """The input columns (of the p block) that get hinges: every element
    of every quantile-normalized feature, in input order."""
    cols, at = [], 0
    for name, width in zip(policy.vocab.features, policy.widths):
        if name not in policy.vocab.zscore:
            cols.extend(range(at, at + width))
        at += width
    return cols


def with_hinge_basis(policy: MLPPolicy, knots: int) -> MLPPolicy:
    """``policy`` grown by ``knots`` hinges per quantile feature element in
    its last hidden layer (module docstring); the same class and vocab."""
    if not isinstance(knots, int) or knots < 1:
        raise ValueError(f"knots must be an integer >= 1, got {knots!r}")
    if len(policy.layers) < 2:
        raise ValueError("a hinge basis needs a hidden layer; this policy is linear")
    cols = hinge_columns(policy)
    if not cols:
        raise ValueError("the policy has no quantile-normalized feature to put hinges on")
    m, h = len(cols), len(cols) * knots
    offsets = np.tile(np.arange(knots, dtype=np.float32) / np.float32(knots), m)  # unit u: knot u % knots
    layers = [(np.array(w, np.float32), np.array(b, np.float32)) for w, b in policy.layers]
    hidden = len(layers) - 1
    grown = []
    for i, (w, b) in enumerate(layers):
        out, inp = w.shape
        last_hidden, output = i == hidden - 1, i == hidden
        if output:
            add_out, add_in = 0, h
        elif last_hidden:
            add_out, add_in = h, (0 if i == 0 else m)
        else:
            add_out, add_in = m, (0 if i == 0 else m)
        nw = np.zeros((out + add_out, inp + add_in), np.float32)
        nw[:out, :inp] = w
        nb = np.concatenate([b, np.zeros(add_out, np.float32)])
        if not output:
            src = np.repeat(np.arange(m), knots) if last_hidden else np.arange(m)
            if i == 0:  # from the input's p block
                nw[out + np.arange(add_out), np.asarray(cols)[src]] = 1.0
            else:  # from the units the previous layer carried
                nw[out + np.arange(add_out), inp + src] = 1.0
            if last_hidden:
                nb[out:] = -offsets
        grown.append((nw, nb))
    return type(policy)(policy.vocab, grown, problem=policy.problem)

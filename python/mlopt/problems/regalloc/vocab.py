"""A regalloc vocabulary that needs no training data: the same fixed
boundaries for every feature, fine in [0, 1] (LLVM divides the float
features by their maximum over the columns) and doubling above 1 (counts,
stages, sizes). For random eviction policies (studies of how allocation
changes speed), not for training: a trained policy's vocab comes from logs
(``Vocab.from_logs``)."""

from __future__ import annotations

import numpy as np

from ...policy.vocab import Vocab
from .spec import FEATURES

GENERIC_BOUNDARIES = np.concatenate([np.linspace(0.0, 1.0, 21), 2.0 ** np.arange(1, 17)])


def generic_vocab() -> Vocab:
    return Vocab(dict.fromkeys(FEATURES, GENERIC_BOUNDARIES), features=FEATURES)

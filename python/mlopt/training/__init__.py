"""Training policies, generic over the problem: behavioral cloning of the
compiler's heuristic from a trace (numpy)."""

from .bc import BCResult, heldout_modules, train_bc, vocab_from_rows

__all__ = ["BCResult", "heldout_modules", "train_bc", "vocab_from_rows"]

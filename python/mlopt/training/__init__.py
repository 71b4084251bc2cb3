"""Training policies, generic over the problem: behavioral cloning of the
compiler's heuristic from a trace (numpy), evolution strategies and PPO over
rollouts on a pool. Names load when asked for (the command line builds its
parser from :mod:`.es_recipe` without numpy)."""

import importlib

_WHERE = {"BCResult": ".bc", "heldout_modules": ".bc", "train_bc": ".bc", "vocab_from_rows": ".bc",
          "ESConfig": ".es", "ESTrainer": ".es", "PPOConfig": ".ppo", "PPOTrainer": ".ppo"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module 'mlopt.training' has no attribute {name!r}")

"""Training policies, generic over the problem: behavioral cloning of the
compiler's heuristic from a trace (numpy), evolution strategies and PPO over
rollouts on a pool."""

from .bc import BCResult, heldout_modules, train_bc, vocab_from_rows
from .es import ESConfig, ESTrainer
from .ppo import PPOConfig, PPOTrainer

__all__ = ["BCResult", "ESConfig", "ESTrainer", "PPOConfig", "PPOTrainer", "heldout_modules", "train_bc",
           "vocab_from_rows"]

"""Rollouts: compiling a corpus' modules on a pool of workers with the
heuristic or a policy -- traces (the heuristic's logs and sizes as one
dataset) and the per-module results evaluation and training build on."""

from .dataset import TraceDataset
from .heuristic_answers import HeuristicAnswers
from .linked_shares import build_linked_shares
from .package_call_sites import build_package_call_sites
from .runner import failures_of, run_rollouts
from .tasks import Rollout, RolloutTask, run_rollout
from .trace import trace_corpus
from .trace_cache import module_key

__all__ = ["HeuristicAnswers", "Rollout", "RolloutTask", "TraceDataset", "build_linked_shares",
           "build_package_call_sites", "failures_of", "module_key", "run_rollout", "run_rollouts", "trace_corpus"]

"""Proximal policy optimization as the MLGO paper and ml-compiler-opt run
it for the inliner, generic over the problem, in numpy:

- warm start: the starting policy is a BC run's (its vocab and weights);
- rollouts: every iteration compiles ``modules`` training modules drawn by
  the size-stratified sampler (:mod:`mlopt.rollouts.sampler`) with the
  policy *sampling* its decisions (:mod:`mlopt.policy.sampled`; one seed per
  (seed, iteration, module), so the same on 1 or N workers); the trajectory
  is the training log the compiler writes anyway (features and the decisions
  taken), and log-probabilities are recomputed from it with the one numpy
  forward pass (:func:`mlopt.training.mlp_train.forward`);
- reward per module ``1 - (cost + delta) / (average + delta)`` against a
  moving average of the policy's own cost on that module (decay 0.8; it
  starts at the heuristic's cost), given to every step of the module's
  trajectory (no discounting: the module's size is known only at the end);
- or, with ``samples`` > 1, each drawn module rolled out that many times
  (one seed per sample) and each rollout's reward taken against the mean
  cost of the module's other rollouts of the iteration (a leave-one-out,
  group-relative baseline): zero in expectation whatever the start, where
  the moving average starts at the heuristic's cost and a module is drawn
  again only every few hundred iterations on a large corpus, so sampled
  rollouts, larger than the heuristic's, all score below it (benchmarks/
  README.md, "PPO with a group baseline": every taken action is pushed down, most of them
  "decline", and the argmax policy drifts off its start);
- value-free: the baseline above is the one a value head would learn, and a
  head over one call site's features cannot predict a module's total size;
  advantages are the rewards scaled by their standard deviation over the
  iteration's rollouts (not re-centered: the baseline centers them);
- clipped surrogate objective, entropy bonus, Adam over minibatches for a
  few epochs per iteration, stopped early once the policy has moved more
  than ``1.5 * target_kl`` (mean KL from the sampling policy) when set;
- the best policy (argmax decisions, as it ships) is chosen by the total
  objective delta on the validation modules, the quantity every trainer
  reports (:func:`mlopt.training.environment.total_delta_percent`).

Deterministic for a seed: a run resumed from its checkpoint equals an
uninterrupted one."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import MloptError
from ..policy import MLPPolicy, portable_math
from ..rollouts.sampler import SizeStratifiedSampler
from .checkpoint import decoded_json, encoded_json, load_checkpoint, save_checkpoint
from .environment import CompilerEnvironment, first_failure, rollout_seed, total_delta_percent
from .es import flatten, unflatten
from .mlp_train import Adam, backward, forward
from .validated_run import ValidatedRun


@dataclass
class PPOConfig:
    iterations: int = 10
    modules: int = 32  # modules rolled out per iteration
    clip: float = 0.2
    entropy: float = 0.01
    lr: float = 3e-4
    epochs: int = 4
    batch_size: int = 1024
    decay: float = 0.8  # of the per-module moving-average baseline (samples == 1)
    samples: int = 1  # rollouts per drawn module; > 1: the leave-one-out group baseline instead
    delta: float = 16.0  # added to both costs in the reward
    temperature: float = 1.0
    # Stop the iteration's epochs once the policy's mean KL divergence from the sampling policy, over all
    # of the iteration's rows, exceeds 1.5 * target_kl (None: always run every epoch).
    target_kl: float | None = None
    buckets: int = 4
    seed: int = 0
    validate_every: int = 1  # validate (and maybe keep as best) every k-th iteration
    keep_validated: bool = False  # also save every validated policy as validated/<iteration>.npz (curves)


@dataclass
class Batch:
    """Rows of the iteration's trajectories."""
    x: np.ndarray  # [n, inputs] or [n, C, inputs]
    penalty: np.ndarray | None
    actions: np.ndarray  # int64 [n]
    advantages: np.ndarray  # float32 [n]
    old_logp: np.ndarray  # float64 [n]


def _logits(layers, x: np.ndarray, penalty: np.ndarray | None):
    grouped = x.ndim == 3
    logits, inputs = forward(layers, x.reshape(-1, x.shape[-1]) if grouped else x)
    logits = logits.reshape(len(x), -1) if grouped else logits
    if penalty is not None:
        logits = logits + penalty
    return logits.astype(np.float64), inputs, grouped


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        return z - portable_math.log(portable_math.exp(z).sum(axis=1, keepdims=True))


def surrogate_and_grads(layers, batch: Batch, rows: np.ndarray, clip: float, entropy: float,
                        temperature: float = 1.0):
    """The PPO loss (negated clipped surrogate minus the entropy bonus,
    averaged over ``rows``), its gradients per layer and diagnostics."""
    x = batch.x[rows]
    pen = None if batch.penalty is None else batch.penalty[rows]
    logits, inputs, grouped = _logits(layers, x, pen)
    n = len(rows)
    logp_all = log_softmax(logits / temperature)
    p = portable_math.exp(logp_all)
    a = batch.actions[rows]
    logp = logp_all[np.arange(n), a]
    ratio = portable_math.exp(logp - batch.old_logp[rows])
    adv = batch.advantages[rows].astype(np.float64)
    clipped = np.clip(ratio, 1 - clip, 1 + clip)
    surrogate = np.minimum(ratio * adv, clipped * adv)
    plogp = np.where(p > 0, p * np.where(p > 0, logp_all, 0.0), 0.0)
    ent = -plogp.sum(axis=1)
    loss = float(-(surrogate.mean() + entropy * ent.mean()))
    active = ((adv >= 0) & (ratio <= 1 + clip)) | ((adv < 0) & (ratio >= 1 - clip))
    c = ratio * adv * active
    onehot = np.zeros_like(p)
    onehot[np.arange(n), a] = 1.0
    # d(-surrogate)/dz = -c (onehot - p); d(-entropy * H)/dz_j = entropy * p_j (log p_j + H)
    d = -c[:, None] * (onehot - p) + entropy * (plogp + p * ent[:, None])
    d = (d / (n * temperature)).astype(np.float32)
    grads = backward(layers, inputs, d.reshape(-1, 1) if grouped else d)
    stats = {"clip_fraction": float((np.abs(ratio - 1) > clip).mean()),
             "approx_kl": float((batch.old_logp[rows] - logp).mean()), "entropy": float(ent.mean())}
    return loss, grads, stats


def kl_from_sampling(layers, batch: Batch, temperature: float = 1.0) -> float:
    """Mean KL(sampling policy || current policy) over the batch's rows,
    estimated from the taken actions' log-ratios as ``(r - 1) - log r``
    (unbiased, never negative)."""
    logits, _, _ = _logits(layers, batch.x, batch.penalty)
    logp = log_softmax(logits / temperature)[np.arange(len(batch.actions)), batch.actions]
    log_ratio = logp - batch.old_logp
    return float(np.mean((portable_math.exp(log_ratio) - 1.0) - log_ratio))


class PPOTrainer(ValidatedRun):
    """Runs PPO into a run directory (``checkpoint.npz`` after every
    iteration, ``metrics.jsonl``, ``best/`` by validation delta).
    ``baseline``: the heuristic's objective per module name; ``env``: an
    :class:`~mlopt.training.environment.Environment` (default: the compiler
    on ``pool``)."""

    def __init__(self, policy: MLPPolicy, train: list, baseline: dict[str, float], run_dir: Path,
                 config: PPOConfig, *, validation: list | None = None, pool=None, env=None):
        if not train:
            raise MloptError("PPO needs training modules")
        missing = [e.name for e in train + (validation or []) if e.name not in baseline]
        if missing:
            raise MloptError(f"no heuristic size for module {missing[0]!r} (trace the corpus first)")
        self.template = policy
        self.train = train
        self.validation = validation or []
        self.baseline = baseline
        self.run_dir = Path(run_dir)
        self.config = config
        self.env = env or CompilerEnvironment(policy.problem, pool, heuristic_costs=baseline)
        self.sampler = SizeStratifiedSampler([baseline[e.name] for e in train], config.buckets, config.seed)
        self.theta = flatten(policy)
        self.adam = Adam([self.theta], lr=config.lr)
        self.average: dict[str, float] = {}  # moving average of the policy's own cost per module
        self.iteration = 0
        self.best: float | None = None
        self.start_validation: float | None = None

    def current_policy(self) -> MLPPolicy:
        return unflatten(self.template, self.theta.copy())

    # -- checkpoints ----------------------------------------------------------------
    def save_checkpoint(self) -> None:
        save_checkpoint(self.run_dir, self.config, theta=self.theta, m=self.adam.m[0], v=self.adam.v[0],
                        t=np.int64(self.adam.t), iteration=np.int64(self.iteration),
                        best=np.float64(np.nan if self.best is None else self.best),
                        average=encoded_json(self.average))

    def resume(self) -> bool:
        z = load_checkpoint(self.run_dir, self.config)
        if z is None:
            return False
        self.theta = z["theta"]
        self.adam = Adam([self.theta], lr=self.config.lr)
        self.adam.m[0][...] = z["m"]
        self.adam.v[0][...] = z["v"]
        self.adam.t = int(z["t"])
        self.iteration = int(z["iteration"])
        self.average = decoded_json(z["average"])
        best = float(z["best"])
        self.best = None if np.isnan(best) else best
        return True

    # -- one iteration ----------------------------------------------------------------
    def _batch(self, trajectories, rewards: dict[int, float]) -> Batch | None:
        policy = self.current_policy()
        problem = policy.problem
        xs, pens, acts, advs = [], [], [], []
        for j, r in rewards.items():
            log = trajectories[j].log
            if log is None:
                continue
            x, pen = policy.training_inputs(log)
            if not len(x):
                continue
            xs.append(x)
            pens.append(pen)
            acts.append(np.asarray(log[problem.decision.name]).reshape(-1).astype(np.int64))
            advs.append(np.full(len(x), r, np.float32))
        if not xs:
            return None
        x = np.concatenate(xs)
        pen = None if pens[0] is None else np.concatenate(pens)
        actions = np.concatenate(acts)
        logits, _, _ = _logits(policy.layers, x, pen)
        old = log_softmax(logits / self.config.temperature)[np.arange(len(x)), actions]
        return Batch(x, pen, actions, np.concatenate(advs), old)

    def _average_rewards(self, entries, trajectories) -> dict[int, float]:
        """Each rollout against the moving average of the policy's own cost
        on its module (which it then updates)."""
        cfg = self.config
        rewards: dict[int, float] = {}
        for k, (e, t) in enumerate(zip(entries, trajectories)):
            if t is None:
                continue
            avg = self.average.get(e.name, float(self.baseline[e.name]))
            rewards[k] = 1.0 - (t.cost + cfg.delta) / (avg + cfg.delta)
            self.average[e.name] = cfg.decay * avg + (1 - cfg.decay) * float(t.cost)
        return rewards

    def _group_rewards(self, trajectories, k_samples: int) -> dict[int, float]:
        """Each rollout against the mean cost of its module's other compiled
        rollouts of the iteration; a module with fewer than 2 gives none."""
        delta = self.config.delta
        rewards: dict[int, float] = {}
        for g in range(0, len(trajectories), k_samples):
            members = [(k, float(t.cost)) for k, t in enumerate(trajectories[g:g + k_samples], g) if t is not None]
            if len(members) < 2:
                continue
            total = sum(c for _, c in members)
            for k, c in members:
                others = (total - c) / (len(members) - 1)
                rewards[k] = 1.0 - (c + delta) / (others + delta)
        return rewards

    def step(self) -> dict:
        cfg = self.config
        i = self.iteration
        chosen = self.sampler.sample(i, cfg.modules)
        work = self.run_dir / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        start = time.perf_counter()
        k_samples = max(1, cfg.samples)
        drawn = [self.train[j] for j in chosen]
        entries = [e for e in drawn for _ in range(k_samples)]
        seeds = [rollout_seed(cfg.seed, i, j, s) for j in chosen for s in range(k_samples)]
        trajectories = self.env.trajectories(self.current_policy(), list(zip(entries, seeds)), work)
        rewards = (self._group_rewards(trajectories, k_samples) if k_samples > 1
                   else self._average_rewards(entries, trajectories))
        if not rewards:
            raise MloptError(f"iteration {i}: no module compiled" + first_failure(self.env)
                             + (" (group baseline: a module needs 2 compiled samples)" if k_samples > 1 else ""))
        train_delta = total_delta_percent([None if t is None else t.cost for t in trajectories],
                                          [self.baseline[e.name] for e in entries])
        r = np.array(list(rewards.values()))
        spread = float(r.std())
        scaled = {k: v / spread if spread > 0 else 0.0 for k, v in rewards.items()}
        rollout_s = time.perf_counter() - start
        batch = self._batch(trajectories, scaled)
        before = self.theta.copy()
        losses, stats = [], []
        epochs_run, kl = 0, None
        if batch is not None:
            rng = np.random.default_rng([cfg.seed, i, 0x9907])
            n = len(batch.actions)
            for _ in range(cfg.epochs):
                order = rng.permutation(n)
                for s in range(0, n, cfg.batch_size):
                    rows = order[s:s + cfg.batch_size]
                    layers = unflatten(self.template, self.theta).layers
                    loss, grads, st = surrogate_and_grads(layers, batch, rows, cfg.clip, cfg.entropy,
                                                          cfg.temperature)
                    g = np.concatenate([a.reshape(-1) for wb in grads for a in wb]).astype(np.float32)
                    self.adam.step([self.theta], [g])
                    losses.append(loss)
                    stats.append(st)
                epochs_run += 1
                if cfg.target_kl is not None:
                    kl = kl_from_sampling(unflatten(self.template, self.theta).layers, batch, cfg.temperature)
                    if kl > 1.5 * cfg.target_kl:
                        break
        self.iteration += 1
        val = self.validate_current(work) if self.iteration % cfg.validate_every == 0 else None
        metrics = {"iteration": self.iteration, "train_delta_percent": train_delta,
                   "reward_mean": float(r.mean()), "reward_std": spread, "modules": len(rewards),
                   "failed_modules": len(entries) - len(rewards), "rows": 0 if batch is None else len(batch.actions),
                   "loss": float(np.mean(losses)) if losses else None,
                   "update_norm": float(np.linalg.norm(self.theta - before)),
                   "rollouts_per_s": len(entries) / rollout_s, "validation_delta_percent": val,
                   "epochs_run": epochs_run, "kl_after": kl}
        for key in ("clip_fraction", "approx_kl", "entropy"):
            metrics[key] = float(np.mean([s[key] for s in stats])) if stats else None
        self._validated(val)
        self.save_checkpoint()
        shutil.rmtree(work, ignore_errors=True)
        return metrics

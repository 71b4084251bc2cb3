"""Evolution strategies as MLGO / ml-compiler-opt run them, generic over the
problem, with what their setup leaves to chance made explicit:

- antithetic Gaussian perturbations of the flat parameter vector, sigma
  *relative to each layer's weight scale* (mean |W| of the starting policy,
  used for the layer's weights and biases);
- ``pairs`` per iteration; by default it grows with the parameter count
  (CMA-ES's population rule ``4 + 3 ln n``, halved into pairs, at least 8),
  overridable;
- every candidate of an iteration compiles the *same* modules, drawn by the
  size-stratified sampler (:mod:`mlopt.rollouts.sampler`), so the 2P
  candidates are ranked on the same code;
- ONE objective: a candidate's value is the total objective of the sampled
  modules against the heuristic's total on them (``total_delta_percent``,
  negative = smaller), the quantity validation selects the best policy by
  and every report prints; a tiny module that doubles weighs its bytes, no
  more; optionally (``objective="module-rank"``) the gradient ascends each
  candidate's mean rank over the draw's modules instead, so that one large
  module where the heuristic leaves much does not rank every candidate by
  itself (selection and reports stay on total bytes);
- rank shaping (centered ranks, ties averaged) of the 2P values before the
  gradient estimate (``shaping="zscore"``: ml-compiler-opt's f-value
  normalization);
- plain gradient ascent by default (``optimizer="sgd"``, optional momentum):
  Adam's bias-corrected first step is ``lr * sign(g)`` on every coordinate,
  an update of norm ``lr * sqrt(n)`` whatever the estimate's signal, and its
  per-coordinate scaling amplifies the noise of coordinates ES barely
  measured; ``"adam"`` stays available;
- measured step-size control: the update norm in the normalized space is
  logged against the perturbation radius ``sigma * sqrt(n)`` (``step_ratio``)
  and capped at ``max_step`` of it, since the finite-difference estimate
  says nothing beyond the radius it sampled;
- a module that fails for any candidate is dropped for all candidates of
  the iteration (counted in the metrics);
- optionally (``modules_per_pair=k``) ml-compiler-opt's sampling: each
  antithetic pair draws its own k modules, compiled by its two candidates
  only, and only the difference within a pair is shaped.

Every iteration draws its randomness from ``(seed, iteration)`` and reduces
results in a fixed order, so the same seed gives the same policy bytes on
the local pool or Ray, with any number of workers, and a run resumed from
its last checkpoint equals an uninterrupted one."""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import MloptError
from ..policy import MLPPolicy
from ..rollouts.sampler import SizeStratifiedSampler
from .checkpoint import load_checkpoint, save_checkpoint
from .environment import CompilerEnvironment, first_failure
from .mlp_train import Adam
from .validated_run import ValidatedRun

OBJECTIVES = ("total", "module-rank")  # what the gradient ascends (ESConfig.objective)


@dataclass
class ESConfig:
    iterations: int = 10
    perturbations: int | None = None  # antithetic pairs per iteration (None: default_pairs(parameters))
    sigma: float = 0.05  # relative to each layer's weight scale
    lr: float = 0.05  # step in the normalized space (times the layer scale in weights)
    modules_per_perturbation: int = 16  # modules per iteration, compiled by every candidate
    # ml-compiler-opt's sampling: each antithetic pair gets its own draw of this many modules, compiled by
    # both of its candidates only (0: one draw of modules_per_perturbation for every candidate).
    modules_per_pair: int = 0
    seed: int = 0
    optimizer: str = "sgd"  # "sgd" or "adam"
    momentum: float = 0.0  # sgd only
    max_step: float = 1.0  # cap on the update norm, in perturbation radii (sigma * sqrt(n))
    shaping: str = "rank"  # "rank" or "zscore"
    # the candidates' value the gradient ascends: "total" (their bytes over the draw, the objective
    # validation selects by) or "module-rank" (each module ranks the candidates by their bytes on it and
    # a candidate's value is its mean rank, so no single module of the draw decides the ranking); one
    # shared draw only
    objective: str = "total"
    buckets: int = 4  # size strata of the module sampler
    validate_every: int = 1  # validate (and maybe keep as best) every k-th iteration
    keep_validated: bool = False  # also save every validated policy as validated/<iteration>.npz (curves)


def default_pairs(parameters: int) -> int:
    """Antithetic pairs for a network of ``parameters`` weights: half of
    CMA-ES's population ``4 + floor(3 ln n)``, at least 8 (13 pairs for a
    1,500-weight network, 16 for 9,200, 19 for 100,000)."""
    return max(8, math.ceil((4 + math.floor(3 * math.log(max(parameters, 1)))) / 2))


def flatten(policy: MLPPolicy) -> np.ndarray:
    return np.concatenate([a.reshape(-1) for wb in policy.layers for a in wb]).astype(np.float32)


def unflatten(policy: MLPPolicy, theta: np.ndarray) -> MLPPolicy:
    layers, at = [], 0
    for w, b in policy.layers:
        nw, nb = w.size, b.size
        layers.append((theta[at:at + nw].reshape(w.shape), theta[at + nw:at + nw + nb].reshape(b.shape)))
        at += nw + nb
    return type(policy)(policy.vocab, layers, problem=policy.problem)


def layer_scale(policy: MLPPolicy, floor: float = 1e-3) -> np.ndarray:
    """Per parameter: mean |W| of its layer (weights and biases alike)."""
    parts = []
    for w, b in policy.layers:
        s = max(float(np.abs(w).mean()), floor)
        parts.append(np.full(w.size + b.size, s, np.float32))
    return np.concatenate(parts)


def shape_values(values: np.ndarray, shaping: str) -> np.ndarray:
    """Centered ranks in [-0.5, 0.5] (ties share their average rank), or z-scores."""
    v = np.asarray(values, np.float64)
    if shaping == "zscore":
        std = v.std()
        return (v - v.mean()) / std if std > 0 else np.zeros_like(v)
    if shaping != "rank":
        raise MloptError(f"unknown shaping {shaping!r} (rank or zscore)")
    if len(v) < 2:
        return np.zeros_like(v)
    uniq, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ranks = (start + (counts - 1) / 2.0)[inverse]
    return ranks / (len(v) - 1) - 0.5


def module_ranks(costs: np.ndarray) -> np.ndarray:
    """Per candidate (row), its mean over modules (columns) of the centered rank of its cost on the
    module among all candidates' (smaller cost = higher rank, ties averaged): every module has the same
    say, however many bytes it has. A module on which every candidate costs the same gives 0."""
    c = np.asarray(costs, np.float64)
    if c.ndim != 2 or c.shape[1] == 0:
        raise MloptError(f"module_ranks needs a candidates x modules matrix, got shape {c.shape}")
    return np.mean(per_module_ranks(c), axis=0)


def per_module_ranks(costs: np.ndarray) -> np.ndarray:
    """Modules x candidates: each candidate's centered rank of its cost on the module (smaller cost =
    higher rank, ties averaged); :func:`module_ranks` is their mean."""
    c = np.asarray(costs, np.float64)
    return np.array([shape_values(-c[:, j], "rank") for j in range(c.shape[1])]).reshape(c.shape[1], len(c))


class ESTrainer(ValidatedRun):
    """Runs ES into a run directory (``checkpoint.npz`` after every
    iteration, ``metrics.jsonl``, ``best/`` by validation delta).
    ``baseline``: the heuristic's objective per module name. ``env``: an
    :class:`~mlopt.training.environment.Environment` (default: the compiler
    on ``pool``)."""

    def __init__(self, policy: MLPPolicy, train: list, baseline: dict[str, float], run_dir: Path,
                 config: ESConfig, *, validation: list | None = None, pool=None, env=None):
        if not train:
            raise MloptError("ES needs training modules")
        missing = [e.name for e in train + (validation or []) if e.name not in baseline]
        if missing:
            raise MloptError(f"no heuristic size for module {missing[0]!r} (trace the corpus first)")
        if config.optimizer not in ("sgd", "adam"):
            raise MloptError(f"unknown optimizer {config.optimizer!r} (sgd or adam)")
        if config.objective not in OBJECTIVES:
            raise MloptError(f"unknown objective {config.objective!r} ({' or '.join(OBJECTIVES)})")
        if config.objective == "module-rank" and config.modules_per_pair:
            raise MloptError("objective module-rank needs one draw for every candidate (not modules_per_pair)")
        self.template = policy
        self.train = train
        self.validation = validation or []
        self.baseline = baseline
        self.run_dir = Path(run_dir)
        self.config = config
        self.env = env or CompilerEnvironment(policy.problem, pool, heuristic_costs=baseline)
        self.theta = flatten(policy)
        self.scale = layer_scale(policy)
        self.pairs = config.perturbations or default_pairs(self.theta.size)
        self.sigma = float(config.sigma)
        try:
            self.sampler = SizeStratifiedSampler([baseline[e.name] for e in train], config.buckets, config.seed)
        except ValueError as e:
            raise MloptError(f"ES module sampler: {e}") from None
        self.adam = Adam([self.theta], lr=config.lr)
        self.velocity = np.zeros_like(self.theta)
        self.iteration = 0  # iterations completed
        self.best: float | None = None  # validation delta (%) of best/policy.npz
        self.start_validation: float | None = None  # of the starting policy (a fresh run)

    # -- checkpoints ----------------------------------------------------------------
    def save_checkpoint(self) -> None:
        save_checkpoint(self.run_dir, self.config, theta=self.theta, scale=self.scale,
                        m=self.adam.m[0], v=self.adam.v[0], t=np.int64(self.adam.t), velocity=self.velocity,
                        iteration=np.int64(self.iteration),
                        best=np.float64(np.nan if self.best is None else self.best))

    def resume(self) -> bool:
        z = load_checkpoint(self.run_dir, self.config)
        if z is None:
            return False
        self.theta = z["theta"]
        self.scale = z["scale"]
        self.adam = Adam([self.theta], lr=self.config.lr)
        self.adam.m[0][...] = z["m"]
        self.adam.v[0][...] = z["v"]
        self.adam.t = int(z["t"])
        self.velocity = z["velocity"]
        self.iteration = int(z["iteration"])
        best = float(z["best"])
        self.best = None if np.isnan(best) else best
        return True

    # -- evaluation -----------------------------------------------------------------
    def step(self) -> dict:
        """One iteration; returns its metrics."""
        cfg = self.config
        i = self.iteration
        n = self.theta.size
        rng = np.random.default_rng([cfg.seed, i])
        eps = rng.standard_normal((self.pairs, n)).astype(np.float32)
        work = self.run_dir / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        start = time.perf_counter()
        step = self.sigma * self.scale
        candidates = [unflatten(self.template, self.theta + sign * step * eps[p])
                      for p in range(self.pairs) for sign in (1, -1)]  # 2p: +, 2p+1: -
        if cfg.modules_per_pair:
            draws = [[self.train[j] for j in self.sampler.sample(i, cfg.modules_per_pair, stream=p + 1)]
                     for p in range(self.pairs)]
        else:
            draws = [[self.train[j] for j in self.sampler.sample(i, cfg.modules_per_perturbation)]] * self.pairs
        items = [(2 * p + sign, e) for p, chosen in enumerate(draws) for sign in (0, 1) for e in chosen]
        flat = np.array([np.nan if c is None else c for c in self.env.costs(candidates, items, work)], np.float64)
        hits = getattr(self.env, "cache_hits", 0)  # of these compiles (validation's come next)
        deltas, compiled = self._deltas(draws, flat)
        kept = ~np.isnan(deltas[0::2])  # pairs with a value (per-pair draws: a pair none of whose modules compiled)
        if not kept.any():
            raise MloptError(f"iteration {i}: no module compiled for every candidate" + first_failure(self.env))
        k = int(kept.sum())
        values = deltas.reshape(self.pairs, 2)[kept]  # the candidates that have a value
        signal = -values
        if cfg.objective == "module-rank":  # one shared draw: every candidate has a value or none has
            costs = flat.reshape(2 * self.pairs, -1)
            signal = module_ranks(costs[:, ~np.isnan(costs).any(axis=0)]).reshape(self.pairs, 2)
        if cfg.modules_per_pair:  # pairs drew different modules: shape the within-pair differences only
            signal = signal - signal.mean(axis=1, keepdims=True)
        shaped = shape_values(signal.reshape(-1), cfg.shaping).reshape(k, 2)
        grad = ((shaped[:, 0] - shaped[:, 1])[:, None] * eps[kept]).sum(axis=0) / (2 * k * self.sigma)
        update = self._update(grad.astype(np.float32), cfg.lr)  # in the normalized space
        norm = float(np.linalg.norm(update))
        radius = cfg.sigma * math.sqrt(n)
        ratio = norm / radius
        if ratio > cfg.max_step:
            update *= cfg.max_step / ratio
        self.theta = (self.theta + self.scale * update).astype(np.float32)
        elapsed = time.perf_counter() - start
        self.iteration += 1
        val = self.validate_current(work) if self.iteration % cfg.validate_every == 0 else None
        drawn = sum(map(len, draws)) if cfg.modules_per_pair else len(draws[0])
        metrics = {"iteration": self.iteration, "train_delta_percent": float(values.mean()),
                   "reward": float(-values.mean() / 100.0),
                   "candidate_delta_min": float(values.min()), "candidate_delta_max": float(values.max()),
                   "candidate_delta_std": float(values.std()),
                   "pair_difference_mean_abs": float(np.abs(values[:, 0] - values[:, 1]).mean()),
                   "lr": cfg.lr, "update_norm": norm, "step_ratio": ratio, "step_capped": ratio > cfg.max_step,
                   "pairs": self.pairs, "pairs_dropped": self.pairs - k,
                   "modules": compiled,
                   "failed_modules": drawn - compiled,
                   "evaluations": len(items), "evaluations_per_s": len(items) / elapsed,
                   "cache_hit_share": hits / len(items),
                   "validation_delta_percent": val, "sigma": self.sigma}
        self._validated(val)
        self.save_checkpoint()
        shutil.rmtree(work, ignore_errors=True)
        return metrics

    def _deltas(self, draws: list[list], flat: np.ndarray) -> tuple[np.ndarray, int]:
        """Per candidate (2p: +, 2p+1: -), the total objective delta in % of its draw's heuristic baseline
        (- = smaller; NaN: no value), and the number of modules counted. Over one shared draw, only the
        modules every candidate compiled count; over per-pair draws, those both of the pair's did."""
        if not self.config.modules_per_pair:
            return self._draw_deltas(draws[0], flat.reshape(2 * self.pairs, -1))
        deltas, counted, at = np.full(2 * self.pairs, np.nan), 0, 0
        for p, chosen in enumerate(draws):
            deltas[2 * p:2 * p + 2], n = self._draw_deltas(chosen, flat[at:at + 2 * len(chosen)].reshape(2, -1))
            at += 2 * len(chosen)
            counted += n
        return deltas, counted

    def _draw_deltas(self, chosen: list, costs: np.ndarray) -> tuple[np.ndarray, int]:
        """Each row's (candidate's) delta in % over the modules of ``chosen`` that every row compiled."""
        ok = ~np.isnan(costs).any(axis=0)
        if not ok.any():
            return np.full(len(costs), np.nan), 0
        base = np.array([self.baseline[e.name] for e in chosen], np.float64)[ok]
        return 100.0 * (costs[:, ok].sum(axis=1) - base.sum()) / base.sum(), int(ok.sum())

    def _update(self, grad: np.ndarray, lr: float) -> np.ndarray:
        """The ascent step of size ``lr`` for gradient estimate ``grad`` (normalized space)."""
        cfg = self.config
        if cfg.optimizer == "adam":
            self.adam.lr = lr
            u = np.zeros_like(grad)
            self.adam.step([u], [-grad])
            return u
        self.velocity = (cfg.momentum * self.velocity + grad).astype(np.float32)
        return lr * self.velocity

    def current_policy(self) -> MLPPolicy:
        """The policy the run produces now (the current iterate; what validation measures)."""
        return unflatten(self.template, self.theta)

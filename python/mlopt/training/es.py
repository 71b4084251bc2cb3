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
- optionally (``skip_largest=q``) the largest share q of the training
  modules is never drawn: their compiles are most of an iteration's time;
- optionally (``package_power=a`` below 1) the draw is weighed by package:
  a package's share of the drawn modules grows as its module count to the
  power a instead of linearly, so the few packages of hundreds of modules
  do not make most of every draw (validation and test judge package by
  package);
- optionally (``train_layers=k``) only the last k layers are perturbed and
  stepped, the others keep the starting policy's weights: the gradient is
  estimated in the output layer's ~130 dimensions instead of the whole
  network's ~9,500, and the pair count follows the trained dimensions;
- optionally (``average=d``) the policy a run produces is the exponential
  moving average of its iterates (Polyak averaging, decay ``d`` per
  iteration), the one validated, kept as best and returned: ES's steps are
  mostly noise (an estimate from 2P candidates in thousands of
  dimensions), which the training state carries from one iteration to the
  next and the average leaves out. Training itself is unchanged: the same
  seed makes the same steps with or without it;
- optionally (``guide=k``) guided perturbations (Maheswaranathan et al.,
  "Guided evolutionary strategies", 2019, with ES's own past estimates as
  the guide, as self-guided ES does): a share ``1 - guide_alpha`` (half by
  default) of each perturbation's variance lies in the subspace spanned by
  the last k gradient estimates, the rest is isotropic; the radius
  ``sigma * sqrt(n)`` stays.
  A direction the estimates keep pointing along is then measured by every
  pair instead of by chance, and the estimate (covariance times the
  gradient) leans the step along it;
- optionally (``project``, with the module-rank objective) a projected
  estimate: a module's cost depends on the parameters only through its
  decisions, so each drawn module's term of the estimate keeps only its
  component in the span of the decision-margin gradients at the call sites
  some candidate flipped there (on the module's recorded features, the
  training trace; :mod:`mlopt.training.es_projection`). The rest of a
  perturbation is independent of that module's cost: its term there is
  noise with zero mean, which the plain estimate steps along in thousands
  of dimensions and the projected one leaves out;
- optionally (``line_search``) the step's length is chosen by what it
  does: the current iterate moved by each listed multiple of the update
  (0 included, the step can be refused) compiles a fresh draw of modules,
  one the estimate never saw, and the multiple with the best value there
  (the objective's: mean module rank, or total) is taken. ES's estimate
  is first order within the perturbations' radius, and a step flips
  decisions across the whole training split that its draw never
  measured; this measures the step itself on unbiased modules;
- optionally (``hold_flip_share``) sigma held at a share of changed modules
  for the whole run (:mod:`mlopt.training.flip_hold`): before each
  iteration, perturbations of the current sigma around the current iterate
  are measured on a probe of the training modules' recorded call sites,
  and sigma moves toward the share the run started from. Call sites gather
  at the decision boundary as a run moves, so a fixed sigma changes more
  and more modules, each a compile; the rank-shaped estimate scales as
  1 / sigma, so lr follows sigma and the step keeps its length;
- optionally (``lr_end``, ``lr_horizon``) a step size that goes
  geometrically from ``lr`` to ``lr_end`` over the first ``lr_horizon``
  iterations and stays there: long steps while the warm start's margins
  keep most decisions fixed, short ones once the iterate has moved and a
  step changes many. The schedule counts iterations, not seconds, so a
  run's bytes never depend on the machine's speed;
- optionally (``top_pairs=b``) ARS's top directions: only the b pairs
  whose better candidate ranks highest enter the estimate (Mania et al.,
  2018), in case the pairs that rank low add more noise than signal. On
  the Debian corpus they do carry signal: top 8 of 16 at plain ES's step
  length trails plain ES at every iteration (benchmarks/README.md, stop
  67). Off by default.

Every iteration draws its randomness from ``(seed, iteration)`` and reduces
results in a fixed order, so the same seed gives the same policy bytes on
the local pool or Ray, with any number of workers, and a run resumed from
its last checkpoint equals an uninterrupted one."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..corpus.split import package_of
from ..errors import MloptError
from ..policy import MLPPolicy
from ..rollouts.sampler import SizeStratifiedSampler
from .checkpoint import load_checkpoint, save_checkpoint
from .environment import CompilerEnvironment, first_failure
from .es_projection import orthonormal_rows, projected_sum
from .flip_hold import changed_share, held_sigma, measuring_perturbations, site_probe
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
    # the policy the run produces (validated, kept as best, returned): 0 the current iterate, d in (0, 1) the
    # exponential moving average of the iterates with decay d per iteration (training steps are unchanged)
    average: float = 0.0
    # leave this share of the training modules, the largest by the heuristic's objective, out of every draw
    # (rollouts/sampler.py: they cost most of an iteration's compiles); validation sees every module
    skip_largest: float = 0.0
    # weigh the draw by package (rollouts/sampler.py): a package's share of the draws grows as its module count
    # to this power (1: modules drawn alike, 0.5: as the square root, 0: every package alike); a module's
    # package is its name's first component (corpus/split.py's package_of)
    package_power: float = 1.0
    # perturb and step only the last k layers (0: all): an estimate from 2P candidates in the output layer's
    # few dimensions instead of the whole network's thousands; the earlier layers keep the starting policy's
    # weights (its learned features)
    train_layers: int = 0
    # step-size schedule: lr at iteration 0, geometrically to lr_end at iteration lr_horizon, then lr_end
    # (lr_end 0: the constant lr)
    lr_end: float = 0.0
    lr_horizon: int = 0
    # guided perturbations: the last `guide` gradient estimates span a subspace that holds 1 - guide_alpha of
    # each perturbation's variance (0: isotropic perturbations, as before)
    guide: int = 0
    guide_alpha: float = 0.5
    # projected estimate (module-rank only): each drawn module's term of the estimate is projected onto the
    # span of the decision-margin gradients at its call sites that some candidate decides differently from
    # the center (es_projection.py), on the module's recorded features (ESTrainer's ``sites``)
    project: bool = False
    # line search: the step multiples (>= 0; 0 refuses the step) compiled on a fresh draw of
    # line_search_modules modules (0: modules_per_perturbation) after each estimate; the best by the
    # objective is taken (ties: the multiple nearest 1, then the smaller). Empty: the step as estimated.
    line_search: tuple[float, ...] = ()
    line_search_modules: int = 0
    # hold the flip share (flip_hold.py): before each iteration, sigma moves toward the value whose
    # perturbations change this share of a probe of training modules (hold_rows decisions of their recorded
    # call sites, hold_samples perturbations); the step keeps its length (lr follows sigma / the starting
    # sigma) and max_step stays in radii of the starting sigma. 0: sigma stays as given.
    hold_flip_share: float = 0.0
    hold_rows: int = 65536
    hold_samples: int = 8
    # ARS's top directions (Mania et al., "Simple random search provides a competitive approach to
    # reinforcement learning", 2018): the estimate from the top_pairs pairs whose better candidate has the
    # highest shaped value, max(s+, s-) (ties: the lower pair index), averaged over them (0: every pair)
    top_pairs: int = 0
    # fewer compiles of the large modules (module-rank only): a drawn module among the largest share large_share
    # of the training modules (by the heuristic's objective) is compiled by large_pairs of the pairs only,
    # chosen afresh per module and iteration, and ranked among their candidates; large_extra more large
    # modules join every draw. 0: every pair compiles every drawn module (large_share and large_extra unused).
    large_pairs: int = 0
    large_share: float = 0.05
    large_extra: int = 0


LINE_SEARCH_STREAM = 1 << 20  # the sampler stream of line-search draws (per-pair draws use 1..pairs)


def line_search_choice(costs: np.ndarray, multiples, objective: str) -> int:
    """The index of the chosen multiple from ``costs`` (multiples x modules, every entry a value): the
    highest mean module rank (``module-rank``) or the smallest total (``total``); ties go to the multiple
    nearest 1, then to the smaller."""
    c = np.asarray(costs, np.float64)
    value = module_ranks(c) if objective == "module-rank" else -c.sum(axis=1)
    best = value.max()
    tied = [j for j in range(len(multiples)) if value[j] == best]
    return min(tied, key=lambda j: (abs(float(multiples[j]) - 1.0), float(multiples[j])))


def step_size(config: ESConfig, iteration: int) -> float:
    """The step size of iteration ``iteration`` (0-based) under ``config``'s schedule."""
    if not config.lr_end:
        return config.lr
    return float(config.lr * (config.lr_end / config.lr) ** min(iteration / config.lr_horizon, 1.0))


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


def trained_mask(policy: MLPPolicy, last_layers: int = 0) -> np.ndarray:
    """Per parameter of ``flatten(policy)``: True if it is in the last ``last_layers`` layers
    (0: every layer)."""
    if last_layers < 0 or last_layers > len(policy.layers):
        raise MloptError(f"train_layers must be 0 (all) to {len(policy.layers)} (the policy's layers), "
                         f"got {last_layers!r}")
    first = len(policy.layers) - last_layers if last_layers else 0
    return np.concatenate([np.full(w.size + b.size, k >= first) for k, (w, b) in enumerate(policy.layers)])


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


def guided_perturbations(z: np.ndarray, w: np.ndarray, basis: np.ndarray, alpha: float) -> np.ndarray:
    """Perturbations with covariance ``alpha I + (1 - alpha) (n / k) U U^T`` (``U``: the k orthonormal rows
    of ``basis``, ``n``: the dimension) from standard normal ``z`` (pairs x n) and ``w`` (pairs x k): the
    expected squared norm stays n, a share 1 - alpha of it in the subspace. Without a basis: ``z``."""
    k = len(basis)
    if k == 0:
        return z
    n = z.shape[1]
    inside = (w[:, :, None] * basis[None, :, :]).sum(axis=1)
    return (math.sqrt(alpha) * z + math.sqrt((1.0 - alpha) * n / k) * inside).astype(np.float32)


def top_directions(shaped: np.ndarray, top: int) -> np.ndarray:
    """Indices (ascending) of the ``top`` rows of ``shaped`` (pairs x 2: the + and - candidates' shaped
    values) with the highest ``max(s+, s-)``, ties to the lower index; ``top`` 0 or at least the rows: all."""
    k = len(shaped)
    if not top or top >= k:
        return np.arange(k)
    best = np.asarray(shaped, np.float64).max(axis=1)
    return np.sort(np.argsort(-best, kind="stable")[:top])


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


def partial_module_ranks(costs: np.ndarray, evaluated: np.ndarray) -> np.ndarray:
    """:func:`module_ranks` when each module is compiled by only some candidates (``evaluated``, the
    candidates x modules mask): on each module the candidates that compiled it are ranked among themselves
    (centered ranks, ties averaged) and the others count 0; a candidate's value is the mean over the modules
    that every candidate which compiled them did (a failure leaves its module out)."""
    c = np.asarray(costs, np.float64)
    m = np.asarray(evaluated, bool)
    if c.ndim != 2 or c.shape != m.shape or c.shape[1] == 0:
        raise MloptError(f"partial_module_ranks needs matching candidates x modules matrices, got {c.shape} and "
                         f"{m.shape}")
    ranks = []  # modules x candidates, as per_module_ranks (so that every module compiled by all is its mean)
    for j in range(c.shape[1]):
        rows = np.flatnonzero(m[:, j])
        if len(rows) and not np.isnan(c[rows, j]).any():
            r = np.zeros(len(c))
            r[rows] = shape_values(-c[rows, j], "rank")
            ranks.append(r)
    return np.mean(np.array(ranks), axis=0) if ranks else np.zeros(len(c))


class ESTrainer(ValidatedRun):
    """Runs ES into a run directory (``checkpoint.npz`` after every
    iteration, ``metrics.jsonl``, ``best/`` by validation delta).
    ``baseline``: the heuristic's objective per module name. ``env``: an
    :class:`~mlopt.training.environment.Environment` (default: the compiler
    on ``pool``)."""

    def __init__(self, policy: MLPPolicy, train: list, baseline: dict[str, float], run_dir: Path,
                 config: ESConfig, *, validation: list | None = None, pool=None, env=None,
                 sites: Mapping[str, Mapping[str, np.ndarray]] | None = None):
        if not train:
            raise MloptError("ES needs training modules")
        missing = [e.name for e in train + (validation or []) if e.name not in baseline]
        if missing:
            raise MloptError(f"no heuristic size for module {missing[0]!r} (trace the corpus first)")
        if config.optimizer not in ("sgd", "adam"):
            raise MloptError(f"unknown optimizer {config.optimizer!r} (sgd or adam)")
        if config.objective not in OBJECTIVES:
            raise MloptError(f"unknown objective {config.objective!r} ({' or '.join(OBJECTIVES)})")
        if not 0.0 <= config.average < 1.0:
            raise MloptError(f"average must be in [0, 1) (the decay per iteration), got {config.average!r}")
        if config.objective == "module-rank" and config.modules_per_pair:
            raise MloptError("objective module-rank needs one draw for every candidate (not modules_per_pair)")
        if config.guide < 0 or not 0.0 < config.guide_alpha <= 1.0:
            raise MloptError(f"guide must be >= 0 estimates and guide_alpha in (0, 1] (got guide {config.guide!r}, "
                             f"guide_alpha {config.guide_alpha!r})")
        if config.project and (config.objective != "module-rank" or config.guide or config.modules_per_pair):
            raise MloptError("the projected estimate (project) needs objective module-rank, one shared draw "
                             "(no modules_per_pair) and isotropic perturbations (no guide)")
        if config.project and policy.problem.num_actions != 2:
            raise MloptError(f"the projected estimate (project) needs a two-action problem, not "
                             f"{policy.problem.name!r} ({policy.problem.num_actions} actions)")
        if config.project and sites is None:
            raise MloptError("the projected estimate (project) needs the training modules' call-site features "
                             "(a trace of the training split: ESTrainer(sites=...))")
        if config.line_search and (len(set(config.line_search)) < 2 or min(config.line_search) < 0
                                   or config.line_search_modules < 0):
            raise MloptError("a line search needs at least two distinct step multiples, none negative, and "
                             f"line_search_modules >= 0 (got {config.line_search!r}, "
                             f"{config.line_search_modules!r})")
        if config.hold_flip_share and not (0.0 < config.hold_flip_share < 1.0 and config.hold_rows >= 1
                                           and config.hold_samples >= 1):
            raise MloptError("holding the flip share needs a share in (0, 1), hold_rows >= 1 and hold_samples >= 1 "
                             f"(got {config.hold_flip_share!r}, {config.hold_rows!r}, {config.hold_samples!r})")
        if config.hold_flip_share and sites is None:
            raise MloptError("holding the flip share needs the training modules' call-site features "
                             "(a trace of the training split: ESTrainer(sites=...))")
        if config.top_pairs < 0 or (config.top_pairs and config.project):
            raise MloptError(f"top_pairs must be >= 0 (0: every pair) and is not for the projected estimate "
                             f"(got {config.top_pairs!r}, project {config.project!r})")
        if config.large_pairs < 0 or config.large_extra < 0 or not 0.0 < config.large_share < 1.0:
            raise MloptError(f"large_pairs and large_extra must be >= 0 and large_share in (0, 1) (got "
                             f"{config.large_pairs!r}, {config.large_extra!r}, {config.large_share!r})")
        if config.large_pairs and (config.objective != "module-rank" or config.project or config.modules_per_pair):
            raise MloptError("fewer pairs on the large modules (large_pairs) needs objective module-rank, one shared "
                             "draw (no modules_per_pair) and no projected estimate (project)")
        if (config.lr_end or config.lr_horizon) and not (config.lr_end > 0 and config.lr_horizon >= 1):
            raise MloptError("a step-size schedule needs both lr_end > 0 and lr_horizon >= 1 iterations "
                             f"(got lr_end {config.lr_end!r}, lr_horizon {config.lr_horizon!r})")
        self.template = policy
        self.train = train
        self.sites = sites or {}
        self.validation = validation or []
        self.baseline = baseline
        self.run_dir = Path(run_dir)
        self.config = config
        self.env = env or CompilerEnvironment(policy.problem, pool, heuristic_costs=baseline)
        self.theta = flatten(policy)
        self.trained = trained_mask(policy, config.train_layers)  # the coordinates ES perturbs and steps
        self.averaged = self.theta.astype(np.float64)  # the iterates' moving average (config.average > 0)
        self.scale = layer_scale(policy)
        self.pairs = config.perturbations or default_pairs(int(self.trained.sum()))
        self.sigma = float(config.sigma)  # this iteration's (config.hold_flip_share moves it)
        self.hold_probe = (site_probe(policy, self.sites, [e.name for e in train], config.hold_rows, config.seed)
                           if config.hold_flip_share else None)
        try:
            self.sampler = SizeStratifiedSampler([baseline[e.name] for e in train], config.buckets, config.seed,
                                                 skip_largest=config.skip_largest,
                                                 groups=[package_of(e.name) for e in train],
                                                 group_power=config.package_power)
        except ValueError as e:
            raise MloptError(f"ES module sampler: {e}") from None
        # the training modules (indices) that large_pairs applies to: the largest large_share that can be drawn
        drawable = sorted(set(range(len(train))) - set(self.sampler.skipped),
                          key=lambda j: (baseline[train[j].name], j))
        self.large = (drawable[len(drawable) - max(1, int(config.large_share * len(drawable))):]
                      if config.large_pairs else [])
        self.adam = Adam([self.theta], lr=config.lr)
        self.velocity = np.zeros_like(self.theta)
        # the last config.guide gradient estimates (trained coordinates, oldest first): guided perturbations
        self.guide_history = np.zeros((0, int(self.trained.sum())), np.float64)
        self.iteration = 0  # iterations completed
        self.best: float | None = None  # validation delta (%) of best/policy.npz
        self.start_validation: float | None = None  # of the starting policy (a fresh run)

    # -- checkpoints ----------------------------------------------------------------
    def save_checkpoint(self) -> None:
        save_checkpoint(self.run_dir, self.config, theta=self.theta, averaged=self.averaged, scale=self.scale,
                        m=self.adam.m[0], v=self.adam.v[0], t=np.int64(self.adam.t), velocity=self.velocity,
                        guide_history=self.guide_history, iteration=np.int64(self.iteration),
                        sigma=np.float64(self.sigma),
                        best=np.float64(np.nan if self.best is None else self.best))

    def resume(self) -> bool:
        z = load_checkpoint(self.run_dir, self.config)
        if z is None:
            return False
        self.theta = z["theta"]
        self.averaged = z["averaged"] if "averaged" in z else self.theta.astype(np.float64)
        self.scale = z["scale"]
        self.adam = Adam([self.theta], lr=self.config.lr)
        self.adam.m[0][...] = z["m"]
        self.adam.v[0][...] = z["v"]
        self.adam.t = int(z["t"])
        self.velocity = z["velocity"]
        if "guide_history" in z:
            self.guide_history = z["guide_history"]
        self.sigma = float(z["sigma"]) if "sigma" in z else float(self.config.sigma)
        self.iteration = int(z["iteration"])
        best = float(z["best"])
        self.best = None if np.isnan(best) else best
        return True

    # -- evaluation -----------------------------------------------------------------
    def step(self) -> dict:
        """One iteration; returns its metrics."""
        cfg = self.config
        i = self.iteration
        n = int(self.trained.sum())
        rng = np.random.default_rng([cfg.seed, i])
        eps = np.zeros((self.pairs, self.theta.size), np.float32)
        z = rng.standard_normal((self.pairs, n)).astype(np.float32)
        basis = orthonormal_rows(self.guide_history) if cfg.guide else np.zeros((0, n))
        if len(basis):  # drawn after z: the isotropic part is the unguided run's
            z = guided_perturbations(z, rng.standard_normal((self.pairs, len(basis))), basis, cfg.guide_alpha)
        eps[:, self.trained] = z
        work = self.run_dir / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        start = time.perf_counter()
        hold_metrics = self._hold_sigma(i) if cfg.hold_flip_share else {}
        step = self.sigma * self.scale
        candidates = [unflatten(self.template, self.theta + sign * step * eps[p])
                      for p in range(self.pairs) for sign in (1, -1)]  # 2p: +, 2p+1: -
        if cfg.modules_per_pair:
            draws = [[self.train[j] for j in self.sampler.sample(i, cfg.modules_per_pair, stream=p + 1)]
                     for p in range(self.pairs)]
        else:
            shared = self._shared_draw(i)
            draws = [[self.train[j] for j in shared]] * self.pairs
        # which candidates compile which drawn module (rows: candidates, columns: draws[0]; None: every one)
        evaluated = self._evaluated(i, shared) if cfg.large_pairs else None
        if evaluated is None:
            items = [(2 * p + sign, e) for p, chosen in enumerate(draws) for sign in (0, 1) for e in chosen]
        else:
            items = [(c, draws[0][j]) for c, j in zip(*np.nonzero(evaluated))]
        flat = np.array([np.nan if c is None else c for c in self.env.costs(candidates, items, work)], np.float64)
        hits = getattr(self.env, "cache_hits", 0)  # of these compiles (validation's come next)
        if evaluated is not None:  # candidates x modules, NaN where a candidate does not compile the module
            full = np.full(evaluated.shape, np.nan)
            full[evaluated] = flat
            flat = full.reshape(-1)
        deltas, compiled = self._deltas(draws, flat, evaluated)
        kept = ~np.isnan(deltas[0::2])  # pairs with a value (per-pair draws: a pair none of whose modules compiled)
        if not kept.any():
            raise MloptError(f"iteration {i}: no module compiled for every candidate" + first_failure(self.env))
        k = int(kept.sum())
        values = deltas.reshape(self.pairs, 2)[kept]  # the candidates that have a value
        signal = -values
        if cfg.objective == "module-rank" and evaluated is not None:
            costs = flat.reshape(2 * self.pairs, -1)
            signal = partial_module_ranks(costs, evaluated).reshape(self.pairs, 2)
        elif cfg.objective == "module-rank":  # one shared draw: every candidate has a value or none has
            costs = flat.reshape(2 * self.pairs, -1)
            signal = module_ranks(costs[:, ~np.isnan(costs).any(axis=0)]).reshape(self.pairs, 2)
        if cfg.modules_per_pair:  # pairs drew different modules: shape the within-pair differences only
            signal = signal - signal.mean(axis=1, keepdims=True)
        shaped = shape_values(signal.reshape(-1), cfg.shaping).reshape(k, 2)
        projection_metrics = {}
        top = top_directions(shaped, cfg.top_pairs)  # every pair unless config.top_pairs
        if cfg.project:
            grad, projection_metrics = self._projected(candidates, draws[0], flat.reshape(2 * self.pairs, -1),
                                                       shaped[:, 0] - shaped[:, 1], eps)
        else:
            grad = (((shaped[:, 0] - shaped[:, 1])[top])[:, None] * eps[kept][top]).sum(axis=0) / (
                2 * len(top) * self.sigma)
        guide_metrics = {}
        if cfg.guide:
            g = grad[self.trained].astype(np.float64)
            if len(self.guide_history):
                last = self.guide_history[-1]
                denom = math.sqrt(float((g * g).sum()) * float((last * last).sum()))
                guide_metrics["gradient_cosine_previous"] = float((g * last).sum()) / denom if denom else 0.0
            guide_metrics["guide_dimensions"] = len(basis)
            self.guide_history = np.concatenate([self.guide_history, g[None]])[-cfg.guide:]
        lr = step_size(cfg, i)
        if cfg.hold_flip_share:  # the estimate scales as 1 / sigma: the step keeps its length
            lr = lr * self.sigma / cfg.sigma
        update = self._update(grad.astype(np.float32), lr)  # in the normalized space
        norm = float(np.linalg.norm(update))
        radius = cfg.sigma * math.sqrt(n)
        ratio = norm / radius
        if ratio > cfg.max_step:
            update *= cfg.max_step / ratio
        line_metrics = {}
        if cfg.line_search:
            multiple, line_metrics = self._line_search(update, work, i)
            update = (np.float32(multiple) * update).astype(np.float32)
        self.theta = (self.theta + self.scale * update).astype(np.float32)
        if cfg.average:
            self.averaged = cfg.average * self.averaged + (1.0 - cfg.average) * self.theta.astype(np.float64)
        elapsed = time.perf_counter() - start
        self.iteration += 1
        val = self.validate_current(work) if self.iteration % cfg.validate_every == 0 else None
        drawn = sum(map(len, draws)) if cfg.modules_per_pair else len(draws[0])
        metrics = {"iteration": self.iteration, "train_delta_percent": float(values.mean()),
                   "reward": float(-values.mean() / 100.0),
                   "candidate_delta_min": float(values.min()), "candidate_delta_max": float(values.max()),
                   "candidate_delta_std": float(values.std()),
                   "pair_difference_mean_abs": float(np.abs(values[:, 0] - values[:, 1]).mean()),
                   "lr": lr, "update_norm": norm, "step_ratio": ratio, "step_capped": ratio > cfg.max_step,
                   "pairs": self.pairs, "pairs_dropped": self.pairs - k, "pairs_estimated": len(top),
                   "modules": compiled,
                   "failed_modules": drawn - compiled,
                   "evaluations": len(items), "evaluations_per_s": len(items) / elapsed,
                   **({"large_modules": int((~evaluated.all(axis=0)).sum())} if evaluated is not None else {}),
                   "cache_hit_share": hits / len(items),
                   "validation_delta_percent": val, "sigma": self.sigma, **hold_metrics, **guide_metrics,
                   **projection_metrics, **line_metrics}
        self._validated(val)
        self.save_checkpoint()
        shutil.rmtree(work, ignore_errors=True)
        return metrics

    def _projected(self, candidates: list, chosen: list, costs: np.ndarray, shaped_differences: np.ndarray,
                   eps: np.ndarray) -> tuple[np.ndarray, dict]:
        """The projected estimate (ESConfig.project): module j's term ``sum_p delta_pj eps_p`` (delta_pj: the
        pair's difference of centered ranks on module j) projected onto the span of the margin gradients at
        its flipped sites, averaged over the modules, and scaled by kappa = rms(shaped pair differences) /
        rms(mean over modules of delta_pj), so that with no projection it is the plain estimate up to the
        final rank shaping of the candidates' mean ranks. Modules without recorded features or without a
        flipped site there add nothing (counted)."""
        ok = np.flatnonzero(~np.isnan(costs).any(axis=0))
        ranks = per_module_ranks(costs[:, ok]).T  # candidates x modules
        delta = ranks[0::2] - ranks[1::2]  # pairs x modules
        mean = delta.mean(axis=1)
        rms_mean = math.sqrt(float((mean * mean).mean()))
        kappa = math.sqrt(float((shaped_differences ** 2).mean())) / rms_mean if rms_mean else 0.0
        names = [chosen[j].name for j in ok]
        total, metrics = projected_sum(unflatten(self.template, self.theta), candidates, names, delta, eps,
                                       self.sites, self.trained, self.scale)
        grad = np.zeros(self.theta.size, np.float32)
        grad[self.trained] = kappa * total / (len(ok) * 2 * self.pairs * self.sigma)
        return grad, {**metrics, "projection_kappa": kappa}

    def _hold_sigma(self, i: int) -> dict:
        """Moves ``self.sigma`` toward ``config.hold_flip_share`` (flip_hold.py) from the share that
        perturbations of the current sigma change around the current iterate; returns the metrics."""
        cfg = self.config
        start = time.perf_counter()
        eps = measuring_perturbations(cfg.seed, i, cfg.hold_samples, self.trained)
        center = unflatten(self.template, self.theta)
        candidates = [unflatten(self.template, (self.theta + self.sigma * self.scale * e).astype(np.float32))
                      for e in eps]
        share = changed_share(self.hold_probe, center, candidates)
        measured = self.sigma
        self.sigma = held_sigma(self.sigma, share, cfg.hold_flip_share)
        return {"hold_share_measured": share, "hold_sigma_measured": measured,
                "hold_seconds": time.perf_counter() - start}

    def _line_search(self, update: np.ndarray, work: Path, i: int) -> tuple[float, dict]:
        """The chosen multiple of ``update`` (normalized space) and its metrics: every multiple of
        ``config.line_search`` compiles the same fresh draw (sampler stream LINE_SEARCH_STREAM); modules
        some multiple failed on are left out; with none left the step is taken as estimated (1.0)."""
        cfg = self.config
        multiples = [float(t) for t in cfg.line_search]
        chosen = [self.train[j] for j in self.sampler.sample(i, cfg.line_search_modules or cfg.modules_per_perturbation,
                                                             stream=LINE_SEARCH_STREAM)]
        candidates = [unflatten(self.template, (self.theta + self.scale * (np.float32(t) * update)).astype(np.float32))
                      for t in multiples]
        items = [(c, e) for c in range(len(multiples)) for e in chosen]
        start = time.perf_counter()
        costs = np.array([np.nan if c is None else c for c in self.env.costs(candidates, items, work)],
                         np.float64).reshape(len(multiples), len(chosen))
        ok = ~np.isnan(costs).any(axis=0)
        metrics = {"line_search_modules": int(ok.sum()), "line_search_seconds": time.perf_counter() - start,
                   "line_search_cache_hit_share": getattr(self.env, "cache_hits", 0) / max(len(items), 1)}
        if not ok.any():
            return 1.0, {**metrics, "line_search_multiple": 1.0}
        base = np.array([self.baseline[e.name] for e in chosen], np.float64)[ok]
        deltas = 100.0 * (costs[:, ok].sum(axis=1) - base.sum()) / base.sum()
        multiple = multiples[line_search_choice(costs[:, ok], multiples, cfg.objective)]
        return multiple, {**metrics, "line_search_multiple": multiple,
                          "line_search_delta_percent": [float(d) for d in deltas]}

    def _shared_draw(self, i: int) -> list[int]:
        """Iteration i's shared draw (training module indices): the sampler's, then large_extra more large
        modules (with large_pairs) drawn alike from the large ones the sampler did not take."""
        cfg = self.config
        chosen = self.sampler.sample(i, cfg.modules_per_perturbation)
        if cfg.large_pairs and cfg.large_extra:
            rest = [j for j in self.large if j not in set(chosen)]
            rng = np.random.default_rng([cfg.seed, i, 0x4C58])
            chosen = sorted(chosen + [int(j) for j in rng.choice(rest, min(cfg.large_extra, len(rest)),
                                                                   replace=False)])
        return chosen

    def _evaluated(self, i: int, chosen: list[int]) -> np.ndarray:
        """Candidates x modules of ``chosen``: True where the candidate compiles the module. A large module
        is compiled by both candidates of large_pairs pairs, drawn per module and iteration; the rest by all."""
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, i, 0x4C50])
        large = set(self.large)
        mask = np.ones((2 * self.pairs, len(chosen)), bool)
        for col, j in enumerate(chosen):
            if j in large and cfg.large_pairs < self.pairs:
                pairs = np.zeros(self.pairs, bool)
                pairs[rng.choice(self.pairs, cfg.large_pairs, replace=False)] = True
                mask[:, col] = np.repeat(pairs, 2)
        return mask

    def _deltas(self, draws: list[list], flat: np.ndarray,
                evaluated: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """Per candidate (2p: +, 2p+1: -), the total objective delta in % of its draw's heuristic baseline
        (- = smaller; NaN: no value), and the number of modules counted. Over one shared draw, only the
        modules every candidate compiled count (with ``evaluated``: those every candidate compiles, so the
        large modules of large_pairs do not); over per-pair draws, those both of the pair's did."""
        if evaluated is not None:
            everyone = evaluated.all(axis=0)
            return self._draw_deltas([e for e, k in zip(draws[0], everyone) if k],
                                     flat.reshape(2 * self.pairs, -1)[:, everyone])
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

    def produced(self) -> np.ndarray:
        """The parameters of the policy the run produces now: the current iterate, or with
        ``config.average`` the iterates' moving average."""
        return self.averaged.astype(np.float32) if self.config.average else self.theta

    def current_policy(self) -> MLPPolicy:
        """The policy the run produces now (what validation measures; ``produced``)."""
        return unflatten(self.template, self.produced())

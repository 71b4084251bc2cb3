"""Flip gradient: a policy step from measured single-flip counterfactuals,
generic over a two-action problem.

ES learns which way to move a call site's decision from random
perturbations that change many sites of many modules at once, and ranks
each candidate by its whole module's size; most of each estimate is noise
in thousands of dimensions, and the sites whose flips help some modules and
hurt others crowd at the decision boundary (benchmarks/README.md, stop 58).
Here each iteration *measures* what deciding the other way does, site by
site, and steps the network along the measurements:

1. draw ``modules`` training modules (the size-stratified sampler) and
   compile each with the current policy itself (its decisions and logged
   features: :meth:`Environment.own_compiles`);
2. take the ``flips`` call sites of the draw nearest the policy's decision
   boundary (smallest |margin|, margin = logit of action 1 minus logit of
   action 0 on the logged features; at most ``per_module`` per module);
   with ``balanced``, half of them among the sites the policy takes action
   1 at and half among action 0's (from the heuristic's prior nearly all
   the nearest sites are inlined ones, and the flips never ask whether to
   inline more);
3. compile each flip: the module's decisions before the site forced as the
   policy took them, the site's own flipped, and the policy deciding every
   later site (:meth:`Environment.forced_costs`; ml-compiler-opt's BC-Max
   move). ``delta_s`` = cost with action 1 at the site minus cost with
   action 0, the flip's exact effect on its module, the later sites'
   reactions included;
4. the descent direction is ``-sum_s tanh(delta_s / credit) J_s`` with
   ``J_s`` the gradient of site s's margin in the space normalized by each
   layer's weight scale (as ES perturbs): a site where action 1 costs
   bytes has its margin pushed down, one where it saves pushed up, and a
   flip that changes nothing adds nothing. ``credit`` saturates the
   magnitude (a flip that saves a thousand bytes weighs like one that
   saves a hundred), the per-site counterpart of ES's module ranks.
   With ``hinge`` h > 0 only sites decided the worse way, or the better way
   by less than h logits, push (a hinge loss): a flip that hurts at a site
   already far on the right side says to stay, not to grow every margin;
   without it (h = 0) the many such sites push the network toward more
   confidence everywhere (benchmarks/README.md, stop 62);
5. the step's length is set in logits: the step along the direction that
   moves the flipped sites' margins by ``margin_step`` (root mean square,
   to first order: ``t = margin_step / rms_s(J_s . direction)``), at most
   ``max_step`` in the normalized space. A flip measures what one decision
   does near the current policy, so each step moves the measured sites a
   bounded distance, and a site far on the wrong side crosses after several
   iterations agree. (A trust region by the share of probe modules a step
   changes, tried first, stalls: once some call sites sit within a hair of
   the boundary any step changes them; the share is logged, ``step_share``.)
6. with ``rollback`` P > 0, a step that left the next draw more than P%
   larger than the heuristic (the draw's own compiles, the train delta
   the iteration logs) is undone: that iteration restores the iterate
   before it and takes no step (``rolled_back``), and the next draw steps
   from there. At most one step is undone in a row, so a restored iterate
   is stepped from whatever its next draw says. (On 149 training packages
   two of 255 steps made the next draw +20% and +28%, where the draws
   otherwise range from -12% to +2%; the runs recovered, but spent about a
   third of their iterations doing so: benchmarks/README.md, stop 64. Measured
   in stop 65: the steps are undone, but the restored iterate steps into
   the next blow-up, and the run ends worse; off by default);
7. validation every ``validate_every`` iterations; ``best/`` keeps the best
   (the starting policy included), by the total objective every trainer
   reports. With ``average`` d > 0 the policy the run produces (validated,
   kept, returned) is the exponential moving average of its iterates, decay
   d per iteration, as ES's ``average``: a step changes a fifth of the
   probe's modules, and validation swings between neighbouring iterates
   (benchmarks/README.md, stop 62; measured in stop 63: validation
   smooths, test stays); the steps themselves are unchanged.

Every choice is made from exact decision-pass values (ties by position), the
draws come from ``(seed, iteration)``, and results are reduced in a fixed
order, so a seed gives the same policy bytes on 1 or N workers, and a
resumed run equals an uninterrupted one."""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import MloptError
from ..policy import MLPPolicy
from ..rollouts.sampler import SizeStratifiedSampler
from .checkpoint import load_checkpoint, save_checkpoint
from .environment import CompilerEnvironment, first_failure, total_delta_percent
from .es import flatten, layer_scale, unflatten
from .es_projection import margin_gradients
from .flip_hold import changed_share, site_probe
from .validated_run import ValidatedRun


@dataclass
class FlipGradientConfig:
    iterations: int = 10
    modules: int = 48  # modules drawn per iteration
    flips: int = 96  # call sites flipped (compiled) per iteration, the draw's nearest the boundary
    per_module: int = 8  # at most this many of them in one module
    # half the flips at the nearest sites the policy takes action 1 at, half at those it takes action 0 at
    # (False: the nearest whatever their action; from the heuristic's prior nearly all are action 1)
    balanced: bool = False
    credit: float = 32.0  # objective units (bytes) at which a flip's credit tanh(delta / credit) saturates
    margin_step: float = 1.0  # a step moves the flipped sites' margins by this many logits (rms, first order)
    # a hinge: a site already decided the better way with a margin of at least this many logits adds nothing
    # (0: off, every measured flip pushes, however far its site is on the right side)
    hinge: float = 0.0
    max_step: float = 4.0  # cap on the step's norm in the normalized space
    probe_rows: int = 65536  # call sites of the probe the step's share of changed modules is measured on
    buckets: int = 4  # size strata of the module sampler
    seed: int = 0
    validate_every: int = 1
    keep_validated: bool = False  # also save every validated policy as validated/<iteration>.npz
    # the run produces the exponential moving average of its iterates, decay d per iteration (0: the iterate)
    average: float = 0.0
    # undo the last step when the next draw's own compiles are more than this many percent larger than the
    # heuristic's (0: off)
    rollback: float = 0.0


def nearest_sites(margins: list[np.ndarray], flips: int, per_module: int,
                  among: list[np.ndarray] | None = None) -> list[tuple[int, int]]:
    """(module, site) pairs: the ``flips`` rows of ``margins`` (one array per module) with the smallest
    |margin|, at most ``per_module`` per module, only rows where ``among`` (a mask per module) holds if
    given; ties by module, then by site. Sorted."""
    rows = []
    for j, m in enumerate(margins):
        sites = np.arange(len(m)) if among is None else np.flatnonzero(among[j])
        if not len(sites):
            continue
        order = sites[np.lexsort((sites, np.abs(m[sites])))[:per_module]]
        rows.extend((float(abs(m[k])), j, int(k)) for k in order)
    rows.sort()
    return sorted((j, k) for _, j, k in rows[:flips])


def balanced_sites(margins: list[np.ndarray], decisions: list[str], flips: int,
                   per_module: int) -> list[tuple[int, int]]:
    """:func:`nearest_sites` taken half among the sites decided 1 and half among those decided 0 (the
    first half rounded up); where one side has too few, the other's nearest fill the rest. Sorted."""
    taken = [np.array([c == "1" for c in d], bool) for d in decisions]
    yes = nearest_sites(margins, (flips + 1) // 2, per_module, taken)
    no = nearest_sites(margins, flips - len(yes), per_module, [~t for t in taken])
    if len(yes) + len(no) < flips:
        yes = nearest_sites(margins, flips - len(no), per_module, taken)
    return sorted(yes + no)


def flipped_prefix(decisions: str, k: int) -> str:
    """Decisions before ``k`` as taken, decision ``k`` flipped (the policy takes the rest)."""
    return decisions[:k] + ("0" if decisions[k] == "1" else "1")


def flip_effect(decision: str, center: float, flipped: float | None) -> float:
    """Objective with action 1 at the site minus with action 0, from the compile that took ``decision``
    there (``center``) and the one that flipped it (``flipped``; None: it failed, NaN)."""
    if flipped is None:
        return float("nan")
    return (center - flipped) if decision == "1" else (flipped - center)


class FlipGradientTrainer(ValidatedRun):
    """Runs the flip gradient into a run directory (``checkpoint.npz`` after every iteration,
    ``metrics.jsonl``, ``best/`` by validation delta). ``baseline``: the heuristic's objective per module
    name; ``sites``: recorded call-site features per training module name (the probe the step's share
    of changed modules is measured on); ``frozen``: a mask of parameters (flat, as ES flattens) the run
    keeps as they are (e.g. :func:`mlopt.problems.inlining_default.prior.carried_vote_mask`); ``env``: an
    :class:`~mlopt.training.environment.Environment` (default: the compiler on ``pool``)."""

    def __init__(self, policy: MLPPolicy, train: list, baseline: dict[str, float], run_dir: Path,
                 config: FlipGradientConfig, *, sites: Mapping[str, Mapping[str, np.ndarray]],
                 validation: list | None = None, pool=None, env=None, frozen: np.ndarray | None = None):
        if not train:
            raise MloptError("the flip gradient needs training modules")
        if policy.problem.num_actions != 2:
            raise MloptError(f"the flip gradient forces 0/1 decisions; problem {policy.problem.name!r} has "
                             f"{policy.problem.num_actions} actions")
        missing = [e.name for e in train + (validation or []) if e.name not in baseline]
        if missing:
            raise MloptError(f"no heuristic size for module {missing[0]!r} (trace the corpus first)")
        c = config
        if not (c.modules >= 1 and c.flips >= 1 and c.per_module >= 1 and c.credit > 0 and c.margin_step > 0
                and c.hinge >= 0
                and c.max_step > 0 and c.probe_rows >= 1 and c.validate_every >= 1 and 0.0 <= c.average < 1.0
                and c.rollback >= 0):
            raise MloptError("flip gradient settings: modules, flips, per_module, probe_rows and validate_every "
                             "must be >= 1, credit, margin_step and max_step > 0, hinge and rollback >= 0, average "
                             f"in [0, 1) (got {c.modules}, {c.flips}, {c.per_module}, {c.probe_rows}, "
                             f"{c.validate_every}, {c.credit}, {c.margin_step}, {c.max_step}, {c.hinge}, "
                             f"{c.rollback}, {c.average})")
        self.template = policy
        self.train = train
        self.validation = validation or []
        self.baseline = baseline
        self.run_dir = Path(run_dir)
        self.config = config
        self.env = env or CompilerEnvironment(policy.problem, pool, heuristic_costs=baseline)
        self.theta = flatten(policy)
        self.averaged = self.theta.astype(np.float64)  # the iterates' moving average (config.average > 0)
        # (theta, averaged) before the last step, while it may still be undone (config.rollback); else None
        self.previous: tuple[np.ndarray, np.ndarray] | None = None
        self.scale = layer_scale(policy)
        self.frozen = np.zeros(self.theta.size, bool) if frozen is None else np.asarray(frozen, bool)
        if self.frozen.shape != self.theta.shape:
            raise MloptError(f"frozen: a mask of {self.frozen.size} parameters for a policy of {self.theta.size}")
        self.probe = site_probe(policy, sites, [e.name for e in train], config.probe_rows, config.seed)
        try:
            self.sampler = SizeStratifiedSampler([baseline[e.name] for e in train], config.buckets, config.seed)
        except ValueError as e:
            raise MloptError(f"flip gradient module sampler: {e}") from None
        self.iteration = 0
        self.best: float | None = None
        self.start_validation: float | None = None

    # -- checkpoints ----------------------------------------------------------------
    def save_checkpoint(self) -> None:
        previous = {} if self.previous is None else {"previous_theta": self.previous[0],
                                                      "previous_averaged": self.previous[1]}
        save_checkpoint(self.run_dir, self.config, theta=self.theta, averaged=self.averaged, scale=self.scale,
                        iteration=np.int64(self.iteration),
                        best=np.float64(np.nan if self.best is None else self.best), **previous)

    def resume(self) -> bool:
        z = load_checkpoint(self.run_dir, self.config)
        if z is None:
            return False
        self.theta, self.scale = z["theta"], z["scale"]
        self.averaged = z["averaged"] if "averaged" in z else self.theta.astype(np.float64)
        self.previous = (z["previous_theta"], z["previous_averaged"]) if "previous_theta" in z else None
        self.iteration = int(z["iteration"])
        best = float(z["best"])
        self.best = None if np.isnan(best) else best
        return True

    # -- evaluation -----------------------------------------------------------------
    def iterate(self) -> MLPPolicy:
        """The current iterate: the policy the next step compiles and flips around."""
        return unflatten(self.template, self.theta)

    def current_policy(self) -> MLPPolicy:
        """The policy the run produces now (what validation measures): the iterate, or with
        ``config.average`` the iterates' moving average."""
        if not self.config.average:
            return self.iterate()
        return unflatten(self.template, self.averaged.astype(np.float32))

    def step(self) -> dict:
        """One iteration; returns its metrics."""
        cfg = self.config
        i = self.iteration
        work = self.run_dir / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        start = time.perf_counter()
        center = self.iterate()
        drawn = [self.train[j] for j in self.sampler.sample(i, cfg.modules)]
        own = self.env.own_compiles(center, drawn, work)
        kept = [(e, o) for e, o in zip(drawn, own) if o is not None and len(o.decisions)]
        if not any(o is not None for o in own):
            raise MloptError(f"iteration {i}: no drawn module compiled" + first_failure(self.env))
        train = total_delta_percent([o.cost for _, o in kept], [self.baseline[e.name] for e, _ in kept])
        if cfg.rollback and self.previous is not None and train is not None and train > cfg.rollback:
            return self._rolled_back(own, kept, train, start, work)
        inputs = [center.training_inputs(o.columns)[0] for _, o in kept]
        margins = [np.diff(center.logits_of_inputs(x), axis=1)[:, 0] if len(x) else np.zeros(0) for x in inputs]
        for (e, o), x in zip(kept, inputs):
            if len(x) != len(o.decisions):
                raise MloptError(f"{e.name}: the log has {len(x)} rows for {len(o.decisions)} decisions")
        chosen = (balanced_sites(margins, [o.decisions for _, o in kept], cfg.flips, cfg.per_module)
                  if cfg.balanced else nearest_sites(margins, cfg.flips, cfg.per_module))
        flipped = self.env.forced_costs(center, [(kept[j][0], flipped_prefix(kept[j][1].decisions, k))
                                                 for j, k in chosen], work)
        delta = np.array([flip_effect(kept[j][1].decisions[k], kept[j][1].cost, c)
                          for (j, k), c in zip(chosen, flipped)], np.float64)
        ok = ~np.isnan(delta)
        credit = np.tanh(delta[ok] / cfg.credit)
        measured = ok.copy()
        if cfg.hinge:  # sites on the better side by at least the hinge already are where they should be
            margin = np.array([margins[j][k] for j, k in chosen], np.float64)
            measured &= ~(np.sign(-np.nan_to_num(delta)) * margin >= cfg.hinge)
        pushing = np.tanh(delta[measured] / cfg.credit)
        rows = np.array([inputs[j][k] for (j, k), good in zip(chosen, measured) if good], np.float32)
        direction = np.zeros_like(self.theta)
        norm = length = 0.0
        if len(rows) and pushing.any():
            grads = margin_gradients(center, rows) * self.scale.astype(np.float64)  # normalized space
            grads[:, self.frozen] = 0.0
            g = -(pushing[:, None] * grads).sum(axis=0)
            norm = float(np.sqrt((g * g).sum()))
            if norm > 0:
                u = g / norm
                moved = (grads * u[None, :]).sum(axis=1)  # margin change per unit step, per flipped site
                rms = float(np.sqrt((moved * moved).mean()))
                length = min(cfg.max_step, cfg.margin_step / rms) if rms > 0 else 0.0
                direction = u.astype(np.float32)
        self.previous = (self.theta, self.averaged.copy()) if cfg.rollback else None
        self.theta = (self.theta + self.scale * (np.float32(length) * direction)).astype(np.float32)
        if cfg.average:
            self.averaged = cfg.average * self.averaged + (1.0 - cfg.average) * self.theta.astype(np.float64)
        share = changed_share(self.probe, center, [self.iterate()]) if length > 0 else 0.0
        return self._ended({**self._draw_metrics(own, kept, train, rolled_back=False), "flips": len(chosen),
                            "failed_flips": int((~ok).sum()), "flips_helping": int((credit > 0).sum()),
                            "flips_hurting": int((credit < 0).sum()), "flips_neutral": int((credit == 0).sum()),
                            "flips_pushing": int((pushing != 0).sum()),
                            "flip_saving_bytes_max": float(-np.min(delta[ok])) if ok.any() else 0.0,
                            "margin_median_abs": (float(np.median([abs(margins[j][k]) for j, k in chosen]))
                                                  if chosen else None),
                            "gradient_norm": norm, "update_norm": length, "step_share": share},
                           len(kept) + len(chosen), start, work)

    def _rolled_back(self, own, kept, train: float, start: float, work: Path) -> dict:
        """The iteration that undoes the last step (its draw came out ``train`` percent larger than the
        heuristic): the iterate before that step is restored, nothing is flipped; its metrics."""
        self.theta, self.averaged = self.previous
        self.previous = None
        return self._ended({**self._draw_metrics(own, kept, train, rolled_back=True), "flips": 0, "failed_flips": 0,
                            "flips_helping": 0, "flips_hurting": 0, "flips_neutral": 0, "flips_pushing": 0,
                            "flip_saving_bytes_max": 0.0, "margin_median_abs": None, "gradient_norm": 0.0,
                            "update_norm": 0.0, "step_share": 0.0},
                           len(kept), start, work)

    @staticmethod
    def _draw_metrics(own, kept, train: float | None, rolled_back: bool) -> dict:
        """The metrics of an iteration's own compiles of its draw."""
        return {"train_delta_percent": train, "rolled_back": rolled_back,
                "reward": None if train is None else -train / 100.0, "modules": len(kept),
                "failed_modules": sum(o is None for o in own),
                "modules_without_decisions": sum(o is not None and not len(o.decisions) for o in own)}

    def _ended(self, metrics: dict, evaluations: int, start: float, work: Path) -> dict:
        """Ends an iteration begun at ``start``: counts it, validates when due, keeps best/ and the
        checkpoint; returns ``metrics`` with the iteration, its timing and validation."""
        seconds = time.perf_counter() - start
        self.iteration += 1
        val = self.validate_current(work) if self.iteration % self.config.validate_every == 0 else None
        metrics = {"iteration": self.iteration, **metrics, "evaluations": evaluations, "seconds": seconds,
                   "evaluations_per_s": evaluations / seconds if seconds > 0 else 0.0,
                   "validation_delta_percent": val}
        self._validated(val)
        self.save_checkpoint()
        shutil.rmtree(work, ignore_errors=True)
        return metrics

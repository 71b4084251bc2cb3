"""Evolution strategies as MLGO / ml-compiler-opt run them, generic over the
problem: antithetic Gaussian perturbations of the policy's flat parameter
vector, each pair evaluated on the same sampled training modules; reward
per module ``1 - (policy_cost + delta) / (heuristic_cost + delta)`` against
cached heuristic costs (the problem's objective: ``.text`` bytes for the
inliner, RegAllocScore for regalloc); pairs with a failed evaluation pruned;
rewards normalized (z-score) before the gradient estimate; Adam ascent.

Every iteration draws its randomness from ``(seed, iteration)`` and reduces
results in a fixed order, so the same seed gives the same policy bytes on
the local pool or Ray, with any number of workers, and a run resumed from
its last checkpoint equals an uninterrupted one."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..corpus import CorpusEntry
from ..errors import MloptError
from ..policy import MLPPolicy
from .mlp_train import Adam
from .validation import costs_of, total_delta_percent


@dataclass
class ESConfig:
    iterations: int = 10
    perturbations: int = 8  # antithetic pairs per iteration
    sigma: float = 0.02
    lr: float = 0.01
    modules_per_perturbation: int = 16
    delta: float = 16.0  # bytes added to both sizes in the reward
    seed: int = 0


def flatten(policy: MLPPolicy) -> np.ndarray:
    return np.concatenate([a.reshape(-1) for wb in policy.layers for a in wb]).astype(np.float32)


def unflatten(policy: MLPPolicy, theta: np.ndarray) -> MLPPolicy:
    layers, at = [], 0
    for w, b in policy.layers:
        nw, nb = w.size, b.size
        layers.append((theta[at:at + nw].reshape(w.shape), theta[at + nw:at + nw + nb].reshape(b.shape)))
        at += nw + nb
    return type(policy)(policy.vocab, layers, problem=policy.problem)


def module_rewards(sizes: np.ndarray, baseline: np.ndarray, delta: float) -> np.ndarray:
    return 1.0 - (sizes + delta) / (baseline + delta)


class ESTrainer:
    """Runs ES into a run directory (``checkpoint.npz`` after every
    iteration, ``metrics.jsonl``, ``best/`` by validation delta)."""

    def __init__(self, policy: MLPPolicy, train: list[CorpusEntry], baseline: dict[str, int], run_dir: Path,
                 config: ESConfig, *, validation: list[CorpusEntry] | None = None, pool=None):
        if not train:
            raise MloptError("ES needs training modules")
        missing = [e.name for e in train + (validation or []) if e.name not in baseline]
        if missing:
            raise MloptError(f"no heuristic size for module {missing[0]!r} (trace the corpus first)")
        self.template = policy
        self.train = train
        self.validation = validation or []
        self.baseline = baseline
        self.run_dir = Path(run_dir)
        self.config = config
        self.pool = pool
        self.theta = flatten(policy)
        self.adam = Adam([self.theta], lr=config.lr)
        self.iteration = 0  # iterations completed
        self.best: float | None = None  # validation delta (%) of best/policy.npz
        self.start_validation: float | None = None  # of the starting policy (a fresh run)

    # -- checkpoints ----------------------------------------------------------------
    def save_checkpoint(self) -> None:
        path = self.run_dir / "checkpoint.npz"
        tmp = self.run_dir / "checkpoint.partial.npz"
        np.savez(tmp, theta=self.theta, m=self.adam.m[0], v=self.adam.v[0], t=np.int64(self.adam.t),
                 iteration=np.int64(self.iteration), best=np.float64(np.nan if self.best is None else self.best),
                 config=np.frombuffer(json.dumps(asdict(self.config), sort_keys=True).encode(), np.uint8))
        os.replace(tmp, path)

    def resume(self) -> bool:
        path = self.run_dir / "checkpoint.npz"
        if not path.exists():
            return False
        with np.load(path) as z:
            saved = json.loads(bytes(z["config"]).decode())
            mine = asdict(self.config)
            changed = [k for k in mine if k != "iterations" and saved.get(k) != mine[k]]
            if changed:
                raise MloptError(f"{path}: the run was started with other settings ({changed[0]}: "
                                 f"{saved.get(changed[0])!r}, now {mine[changed[0]]!r})")
            self.theta = z["theta"].copy()
            self.adam = Adam([self.theta], lr=self.config.lr)
            self.adam.m[0][...] = z["m"]
            self.adam.v[0][...] = z["v"]
            self.adam.t = int(z["t"])
            self.iteration = int(z["iteration"])
            best = float(z["best"])
            self.best = None if np.isnan(best) else best
        return True

    # -- evaluation -----------------------------------------------------------------
    def _export(self, theta: np.ndarray, path: Path) -> str:
        path.write_bytes(unflatten(self.template, theta).to_tflite())
        return str(path)

    def validate(self, theta: np.ndarray, work: Path) -> float | None:
        """Total .text delta (%) of ``theta`` against the heuristic on the validation modules."""
        return total_delta_percent(unflatten(self.template, theta), self.validation, self.baseline, work,
                                   pool=self.pool, name=f"validate-{self.iteration}.tflite")

    def step(self) -> dict:
        """One iteration; returns its metrics."""
        cfg = self.config
        i = self.iteration
        rng = np.random.default_rng([cfg.seed, i])
        eps = rng.standard_normal((cfg.perturbations, self.theta.size)).astype(np.float32)
        k = min(cfg.modules_per_perturbation, len(self.train))
        chosen = [rng.choice(len(self.train), k, replace=False) for _ in range(cfg.perturbations)]
        work = self.run_dir / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        start = time.perf_counter()
        items, owners = [], []
        for p in range(cfg.perturbations):
            for sign in (1, -1):
                name = f"i{i}-p{p}{'+' if sign > 0 else '-'}.tflite"  # new names: workers cache by path
                policy = self._export(self.theta + sign * cfg.sigma * eps[p], work / name)
                for j in chosen[p]:
                    items.append((policy, self.train[j]))
                    owners.append((p, 0 if sign > 0 else 1))
        sizes = costs_of(items, self.template.problem.name, pool=self.pool)
        rewards = np.zeros((cfg.perturbations, 2))
        counts = np.zeros((cfg.perturbations, 2))
        failed = np.zeros(cfg.perturbations, bool)
        for (p, s), size, (_, entry) in zip(owners, sizes, items):
            if size is None:
                failed[p] = True
                continue
            base = self.baseline[entry.name]
            rewards[p, s] += module_rewards(np.float64(size), np.float64(base), cfg.delta)
            counts[p, s] += 1
        kept = ~failed
        if not kept.any():
            raise MloptError(f"iteration {i}: every perturbation had a failed evaluation")
        r = rewards[kept] / counts[kept]
        std = r.std()
        z = (r - r.mean()) / std if std > 0 else np.zeros_like(r)
        grad = ((z[:, 0] - z[:, 1])[:, None] * eps[kept]).sum(axis=0) / (2 * kept.sum() * cfg.sigma)
        self.adam.step([self.theta], [(-grad).astype(np.float32)])  # ascent
        elapsed = time.perf_counter() - start
        self.iteration += 1
        val = self.validate(self.theta, work)
        metrics = {"iteration": self.iteration, "reward": float(r.mean()), "reward_plus": float(r[:, 0].mean()),
                   "reward_minus": float(r[:, 1].mean()), "pruned_pairs": int(failed.sum()),
                   "evaluations": len(items), "evaluations_per_s": len(items) / elapsed,
                   "validation_delta_percent": val}
        if val is not None and (self.best is None or val < self.best):
            self.best = val
            self._save_best()
        self.save_checkpoint()
        shutil.rmtree(work, ignore_errors=True)
        return metrics

    def _save_best(self) -> None:
        best = self.run_dir / "best"
        best.mkdir(exist_ok=True)
        unflatten(self.template, self.theta).save(best / "policy.npz", overwrite=True)

    def current_policy(self) -> MLPPolicy:
        return unflatten(self.template, self.theta)

    def run(self, on_iteration: Callable[[dict], None] | None = None) -> MLPPolicy:
        if self.iteration == 0 and self.best is None and self.validation:
            # The starting policy is the one to beat: ES keeps it if no iteration does better.
            work = self.run_dir / "work"
            work.mkdir(parents=True, exist_ok=True)
            self.best = self.start_validation = self.validate(self.theta, work)
            if self.best is not None:
                self._save_best()
            shutil.rmtree(work, ignore_errors=True)
        while self.iteration < self.config.iterations:
            m = self.step()
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(m, sort_keys=True) + "\n")
            if on_iteration:
                on_iteration(m)
        return self.current_policy()

"""Do two draws of training modules agree on which way ES should step?

ES's estimate from one iteration is a sum over antithetic pairs of the
pair's shaped value difference times its perturbation. Fix one set of
perturbations around POLICY and rank the same candidates on several
independent draws of training modules (the size-stratified sampler, as ES
draws): the correlation across pairs between two draws' differences says
how much of an iteration's step is shared by other code rather than
specific to its draw. With --validation, the same candidates are also
ranked on the whole validation split, the code ES is judged by: the
correlation between a draw's differences and validation's says how much
of a step transfers. Near 0 means an iteration's step is mostly its
draw's own.

With --projected, the same draws also give ES's projected estimate
(ESConfig.project: each module's term restricted to the decision-margin
gradients at its flipped call sites, on the splits' traces), as vectors in
the normalized parameter space: the cosines between draws, each draw's
plain and projected step against validation's projected step (validation's
per-module byte differences, projected the same way: its total bytes
decompose exactly by module), and the draws' means against it.

    MLOPT_LLVM=19 python3 benchmarks/es_draw_agreement.py splits149 POLICY.npz --sigma 0.0751 \\
        --pairs 16 --modules 48 --draws 4 --validation --seed 0

Prints one JSON object: per draw the pair differences, the correlation
matrix between draws, with --validation each draw's correlation with
validation and that of the draws' mean, and the mean and spread of the
off-diagonal correlations."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from mlopt.corpus import corpus_entries
from mlopt.problems import load_weights
from mlopt.rollouts import trace_corpus
from mlopt.rollouts.sampler import SizeStratifiedSampler
from mlopt.training.environment import CompilerEnvironment
from mlopt.training.es import (
    flatten,
    layer_scale,
    module_ranks,
    per_module_ranks,
    shape_values,
    trained_mask,
    unflatten,
)
from mlopt.training.es_projection import orthonormal_rows, project, projected_sum
from mlopt.workers import make_pool


def pair_differences(costs: np.ndarray, objective: str) -> np.ndarray:
    """Per pair, the shaped value of its + candidate minus its - candidate (rows 2p, 2p+1 of
    ``costs``, candidates x modules; modules any candidate failed are left out)."""
    c = costs[:, ~np.isnan(costs).any(axis=0)]
    values = module_ranks(c) if objective == "module-rank" else -c.sum(axis=1)
    shaped = shape_values(values, "rank")
    return shaped[0::2] - shaped[1::2]


def cosine(a: np.ndarray, b: np.ndarray) -> float | None:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na and nb else None


def module_rank_deltas(costs: np.ndarray) -> np.ndarray:
    """Pairs x modules: the + candidate's centered rank on the module minus the - candidate's."""
    ranks = per_module_ranks(costs).T
    return ranks[0::2] - ranks[1::2]


def mean_cosines(vectors: list[np.ndarray]) -> float | None:
    c = [cosine(a, b) for i, a in enumerate(vectors) for b in vectors[i + 1:]]
    c = [v for v in c if v is not None]
    return float(np.mean(c)) if c else None


def correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splits", type=Path, help="holds train/ (and validation/ with --validation)")
    ap.add_argument("policy", type=Path, help="the center of the perturbations (.npz)")
    ap.add_argument("--sigma", type=float, default=0.05, help="relative to each layer's weight scale, as ES's")
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--modules", type=int, default=48, help="modules per draw")
    ap.add_argument("--draws", type=int, default=4)
    ap.add_argument("--objective", choices=("module-rank", "total"), default="module-rank")
    ap.add_argument("--validation", action="store_true", help="also rank the candidates on validation/")
    ap.add_argument("--projected", action="store_true",
                    help="also compare ES's projected estimates (module-rank; with --validation: validation's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--work", type=Path, default=Path("draw-agreement-work"))
    args = ap.parse_args()
    policy = load_weights(args.policy)
    theta, scale = flatten(policy), layer_scale(policy)
    rng = np.random.default_rng([args.seed, 7919])
    eps = rng.standard_normal((args.pairs, theta.size)).astype(np.float32)
    candidates = [unflatten(policy, theta + sign * args.sigma * scale * eps[p])
                  for p in range(args.pairs) for sign in (1, -1)]
    out = {"llvm": os.environ.get("MLOPT_LLVM", "default"), "policy": str(args.policy), "sigma": args.sigma,
           "pairs": args.pairs, "modules": args.modules, "objective": args.objective, "seed": args.seed}
    start = time.perf_counter()
    with make_pool(args.workers) as pool:
        env = CompilerEnvironment(policy.problem, pool)
        train = corpus_entries(args.splits / "train")
        ds = trace_corpus(args.splits / "train", pool=pool, quiet=True)
        out["llvm_version"] = ds.meta["llvm"]
        size = {m: float(v) for m, v in zip(ds.modules, ds.text_size)}
        train = [e for e in train if e.name in size]
        sampler = SizeStratifiedSampler([size[e.name] for e in train], 4, args.seed)
        diffs, plain, projected, bases = [], [], [], []
        trained = trained_mask(policy)
        eps64 = eps.astype(np.float64)
        sites = ds.batches() if args.projected else {}
        for d in range(args.draws):
            chosen = [train[j] for j in sampler.sample(10_000 + d, args.modules)]
            items = [(c, e) for c in range(len(candidates)) for e in chosen]
            flat = np.array([np.nan if v is None else v for v in env.costs(candidates, items, args.work)])
            diffs.append(pair_differences(flat.reshape(len(candidates), -1), args.objective))
            if args.projected:
                c = flat.reshape(len(candidates), -1)
                ok = ~np.isnan(c).any(axis=0)
                delta = module_rank_deltas(c[:, ok])
                names = [m.name for m, good in zip(chosen, ok) if good]
                plain.append((delta.mean(axis=1)[:, None] * eps64).sum(axis=0))
                projected.append(projected_sum(policy, candidates, names, delta, eps, sites, trained, scale,
                                               bases)[0])
            print(f"draw {d}: {time.perf_counter() - start:.0f} s", flush=True)
        r = [[correlation(a, b) for b in diffs] for a in diffs]
        off = [r[i][j] for i in range(len(diffs)) for j in range(i + 1, len(diffs)) if r[i][j] is not None]
        out |= {"pair_differences": [d.round(4).tolist() for d in diffs], "between_draws": r,
                "between_draws_mean": float(np.mean(off)) if off else None,
                "between_draws_std": float(np.std(off)) if off else None}
        if args.validation:
            val = corpus_entries(args.splits / "validation")
            items = [(c, e) for c in range(len(candidates)) for e in val]
            flat = np.array([np.nan if v is None else v for v in env.costs(candidates, items, args.work)])
            # validation selects by total bytes: rank the candidates by that
            dv = pair_differences(flat.reshape(len(candidates), -1), "total")
            out |= {"validation_pair_differences": dv.round(4).tolist(),
                    "with_validation": [correlation(d, dv) for d in diffs],
                    "draws_mean_with_validation": correlation(np.mean(diffs, axis=0), dv)}
            if args.projected:
                c = flat.reshape(len(candidates), -1)
                ok = ~np.isnan(c).any(axis=0)
                bytes_delta = c[1::2][:, ok] - c[0::2][:, ok]  # pairs x modules: what + saves against -
                vsites = trace_corpus(args.splits / "validation", pool=pool, quiet=True).batches()
                names = [m.name for m, good in zip(val, ok) if good]
                vproj, counts = projected_sum(policy, candidates, names, bytes_delta, eps, vsites, trained, scale)
                union = orthonormal_rows(np.concatenate(bases)) if bases else np.zeros((0, len(eps64[0])))
                plain_mean = np.mean(plain, axis=0)
                out["projected"] = {
                    "union_dimensions": len(union),
                    # unbiased projection: the draws' mean plain estimate, inside the subspaces the draws
                    # flipped, points where their mean projected one does
                    "plain_mean_in_union_with_projected_mean": cosine(project(plain_mean, union),
                                                                      np.mean(projected, axis=0)),
                    "plain_mean_share_in_union": float(np.linalg.norm(project(plain_mean, union))
                                                       / np.linalg.norm(plain_mean)),
                    "validation_counts": counts,
                    "between_draws_plain": mean_cosines(plain), "between_draws_projected": mean_cosines(projected),
                    "plain_with_validation_projected": [cosine(v, vproj) for v in plain],
                    "projected_with_validation_projected": [cosine(v, vproj) for v in projected],
                    "plain_mean_with_validation_projected": cosine(np.mean(plain, axis=0), vproj),
                    "projected_mean_with_validation_projected": cosine(np.mean(projected, axis=0), vproj)}
    out["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""How many decisions do ES's perturbations change, C and C++ apart? For a
policy and a trace of the heuristic's decisions (``mlopt trace``), per
perturbation of the policy's weights (sigma relative to each layer's mean
|W|, as ES perturbs; one sigma per layer), the share of modules with at
least one changed decision and the share of call sites changed, on the
logged features (first order: a module's first changed decision is exact,
later ones are on features the heuristic's trajectory had).

    python3 benchmarks/es_flip_rates.py POLICY.npz TRACE.npz CORPUS [--sigma 0.05,0.05,0.05] [--samples 8]

Also prints, per language, quantiles of |logit difference| (the policy's
margin at its logged sites). With ``--calibrate S`` (repeatable), also
:mod:`mlopt.training.sigma_calibration`'s measure (16 perturbations, a
fixed subset of ~130,000 decisions, all languages, exact decisions) at
sigma 0.05 and 0.1, and the sigma whose perturbations change the share S
of the modules (``mlopt train es --flip-share S``). Numpy only: no compile."""

from __future__ import annotations

import argparse

import numpy as np

from mlopt.corpus.manifest import read_manifest
from mlopt.problems import load_weights
from mlopt.rollouts.dataset import TraceDataset
from mlopt.training.es import flatten, layer_scale, unflatten
from mlopt.training.sigma_calibration import calibrate_sigma, flip_probe, module_flip_share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("policy")
    ap.add_argument("trace")
    ap.add_argument("corpus", help="the traced corpus (its manifest names each module's language)")
    ap.add_argument("--sigma", action="append", default=None, metavar="S1,S2,...",
                    help="sigma per layer, relative to its mean |W| (repeatable; default 0.05 for every layer)")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--calibrate", type=float, action="append", default=[], metavar="S",
                    help="also the sigma whose perturbations change the share S of the modules")
    args = ap.parse_args()
    policy = load_weights(args.policy)
    ds = TraceDataset.load(args.trace)
    languages = (read_manifest(args.corpus) or {}).get("module_languages") or {}
    lang = np.array([languages.get(m, "?") for m in ds.modules])
    owner = np.repeat(np.arange(len(ds.modules)), np.diff(ds.module_rows))
    logits = policy.logits_with_slack(ds.columns)[0]
    z = logits[:, 1] - logits[:, 0]
    sizes = [w.size + b.size for w, b in policy.layers]
    for language in ("c", "c++"):
        a = np.abs(z[lang[owner] == language])
        quantiles = np.percentile(a, [1, 5, 25, 50]).round(2)
        print(f"{language}: {len(a)} sites, |logit difference| at 1/5/25/50%: {quantiles}")
    theta, scale = flatten(policy), layer_scale(policy)
    decided = z > 0
    for text in args.sigma or [",".join(["0.05"] * len(sizes))]:
        per_layer = [float(v) for v in text.split(",")]
        if len(per_layer) != len(sizes):
            raise SystemExit(f"--sigma {text}: the policy has {len(sizes)} layers")
        sigma = np.concatenate([np.full(n, s, np.float32) for n, s in zip(sizes, per_layer)])
        rng = np.random.default_rng(0)
        shares = {"c": [], "c++": []}
        for _ in range(args.samples):
            p = unflatten(policy, theta + sigma * scale * rng.standard_normal(theta.size).astype(np.float32))
            lp = p.logits_with_slack(ds.columns)[0]
            flipped = ((lp[:, 1] - lp[:, 0]) > 0) != decided
            changed = np.bincount(owner[flipped], minlength=len(ds.modules)) > 0
            for language in shares:
                shares[language].append((changed[lang == language].mean(), flipped[lang[owner] == language].mean()))
        print(f"sigma {per_layer}: " + "; ".join(
            f"{language}: {100 * m:.2f}% of modules changed, {100 * s:.2f}% of sites"
            for language, (m, s) in ((k, np.mean(v, axis=0)) for k, v in shares.items())))

    if args.calibrate:
        probe = flip_probe(policy, ds.columns, ds.module_rows)
        shares = {sg: module_flip_share(policy, probe, sg, samples=16) for sg in (0.05, 0.1)}
        print(f"calibration probe ({probe.modules} modules, {len(probe.owner)} decisions, 16 perturbations): "
              + ", ".join(f"sigma {sg:g}: {100 * v:.2f}% of modules changed" for sg, v in shares.items()))
        for target in args.calibrate:
            cal = calibrate_sigma(policy, probe, target, samples=16)
            print(f"share {100 * target:.2f}%: sigma {cal.sigma:.4f} ({100 * cal.share:.2f}%)")


if __name__ == "__main__":
    main()

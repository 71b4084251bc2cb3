"""What ES's module draws are made of, package by package, with and without
weighing them by package (``ESConfig.package_power``): from a trace of the
training split (the heuristic's ``.text`` per module, what the sampler
stratifies by), the draws of ``--iterations`` iterations of ``--modules``
modules at each ``--power``, and per power the share of the drawn modules
and of the drawn bytes that the largest packages take, how many distinct
packages an iteration's draw holds, and how many of the split's packages
are never drawn. No compile; the draws are the trainer's own
(``SizeStratifiedSampler``, seed and buckets as ES's).

    python3 benchmarks/draw_shares.py trace149-train.npz --powers 1,0.5,0 --iterations 60 --modules 48 [--top 8]
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from mlopt.corpus.split import package_of
from mlopt.rollouts.dataset import TraceDataset
from mlopt.rollouts.sampler import SizeStratifiedSampler


def draw_shares(sizes: np.ndarray, packages: list[str], power: float, iterations: int, modules: int,
                seed: int = 0, buckets: int = 4) -> dict:
    """Per package, the share of drawn modules and of drawn bytes over the iterations; the mean number of
    distinct packages per draw; the packages never drawn."""
    sampler = SizeStratifiedSampler(sizes, buckets, seed, groups=packages, group_power=power)
    count, nbytes, distinct = Counter(), Counter(), []
    for i in range(iterations):
        drawn = sampler.sample(i, modules)
        distinct.append(len({packages[j] for j in drawn}))
        for j in drawn:
            count[packages[j]] += 1
            nbytes[packages[j]] += float(sizes[j])
    n, b = sum(count.values()), sum(nbytes.values())
    return {"modules": {p: c / n for p, c in count.items()}, "bytes": {p: v / b for p, v in nbytes.items()},
            "distinct_per_draw": float(np.mean(distinct)), "never": sorted(set(packages) - set(count))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="a trace of the training split (mlopt trace SPLIT/train -o TRACE.npz)")
    ap.add_argument("--powers", default="1,0.5,0", help="package powers to compare (1: modules drawn alike)")
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--modules", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=8, help="packages listed, the largest by module count")
    args = ap.parse_args()
    ds = TraceDataset.load(args.trace)
    sizes = np.asarray(ds.text_size, np.float64)
    packages = [package_of(m) for m in ds.modules]
    per_package = Counter(packages)
    bytes_of = Counter()
    for p, s in zip(packages, sizes):
        bytes_of[p] += float(s)
    total = float(sizes.sum())
    powers = [float(x) for x in args.powers.split(",")]
    runs = {a: draw_shares(sizes, packages, a, args.iterations, args.modules, args.seed) for a in powers}
    print(f"{len(ds.modules)} modules of {len(per_package)} packages; {args.iterations} draws of {args.modules} "
          f"(seed {args.seed}); shares in % of the drawn modules / drawn bytes")
    head = " | ".join(f"power {a:g}" for a in powers)
    print(f"| package | modules | % of the split's modules / bytes | {head} |")
    print("|---|---|---|" + "---|" * len(powers))
    top = [p for p, _ in per_package.most_common(args.top)]
    for p in top:
        cells = " | ".join(f"{100 * runs[a]['modules'].get(p, 0):.1f} / {100 * runs[a]['bytes'].get(p, 0):.1f}"
                           for a in powers)
        print(f"| {p} | {per_package[p]} | {100 * per_package[p] / len(packages):.1f} / "
              f"{100 * bytes_of[p] / total:.1f} | {cells} |")
    rest = set(top)
    cells = " | ".join(f"{100 * sum(v for k, v in runs[a]['modules'].items() if k not in rest):.1f} / "
                       f"{100 * sum(v for k, v in runs[a]['bytes'].items() if k not in rest):.1f}" for a in powers)
    n_rest = len(packages) - sum(per_package[p] for p in top)
    print(f"| the other {len(per_package) - len(top)} | {n_rest} | {100 * n_rest / len(packages):.1f} / "
          f"{100 * (total - sum(bytes_of[p] for p in top)) / total:.1f} | {cells} |")
    print("| distinct packages per draw | | | " + " | ".join(f"{runs[a]['distinct_per_draw']:.1f}" for a in powers)
          + " |")
    print("| packages never drawn | | | " + " | ".join(str(len(runs[a]["never"])) for a in powers) + " |")


if __name__ == "__main__":
    main()

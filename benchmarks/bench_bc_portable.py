"""What BC's CPU independence costs: BC on a trace with training's fixed-order
products and portable softmax (mlopt's default) against the same run with
numpy's BLAS matmul and numpy's exp/log patched in, measured in one process
(alternating, best of ``--repeat``). Prints both times, their ratio, each
result's agreement with the heuristic and the weights' sha256.

    python3 benchmarks/bench_bc_portable.py TRACE.npz [--epochs 20] [--repeat 1]
    python3 benchmarks/bench_bc_portable.py --quick

Run it again under ``OPENBLAS_CORETYPE=Haswell`` (or ``Zen``) and
``NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL"``: the default's
sha256 stays, BLAS's changes."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import time

import numpy as np

import mlopt.training.mlp_train as mlp_train
from mlopt.problems import inlining
from mlopt.rollouts.dataset import TraceDataset
from mlopt.training import train_bc


@contextlib.contextmanager
def blas():
    """numpy's own matmul, exp and log in training (what mlopt did before training became portable)."""
    saved = mlp_train.matmul, mlp_train.portable_math

    class NumpyMath:
        exp, log = staticmethod(np.exp), staticmethod(np.log)

    mlp_train.matmul = lambda a, b: np.asarray(a, np.float32) @ np.asarray(b, np.float32)
    mlp_train.portable_math = NumpyMath
    try:
        yield
    finally:
        mlp_train.matmul, mlp_train.portable_math = saved


def fingerprint(policy) -> str:
    h = hashlib.sha256()
    for w, b in policy.layers:
        h.update(np.asarray(w, np.float32).tobytes())
        h.update(np.asarray(b, np.float32).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="the heuristic's trace of the demo's reduced training split (marisa-trie), 2 epochs")
    args = ap.parse_args()
    if args.quick:
        import tempfile
        from pathlib import Path

        from _common import quick_inputs

        _, args.trace, _ = quick_inputs(Path(tempfile.mkdtemp(prefix="mlopt-bench-bc-")))
        args.epochs = 2
    elif args.trace is None:
        ap.error("give TRACE, or --quick")
    ds = TraceDataset.load(args.trace)
    best: dict[str, float] = {}
    out: dict[str, tuple[str, float]] = {}
    for _ in range(args.repeat):
        for name in ("fixed order", "BLAS"):
            with blas() if name == "BLAS" else contextlib.nullcontext():
                t = time.perf_counter()
                r = train_bc(ds, inlining.PROBLEM, epochs=args.epochs, seed=args.seed)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - t)
            out[name] = (fingerprint(r.policy), r.train_agreement)
    print(f"BC on {args.trace}: {len(ds):,} rows, {args.epochs} epochs, seed {args.seed}")
    for name in ("fixed order", "BLAS"):
        print(f"  {name:12s} {best[name]:7.1f} s  agreement {100 * out[name][1]:.2f}%  weights {out[name][0]}")
    print(f"  fixed order / BLAS: {best['fixed order'] / best['BLAS']:.2f}x the time")


if __name__ == "__main__":
    main()

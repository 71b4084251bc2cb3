"""Seconds per ES iteration of this checkout against an earlier commit's
Python code, the same iterations on both sides: ``bench_es_iteration.py
--side current`` run twice, one checkout after the other, each with a fresh
worker pool, and the iterations' training delta, update and validation
required equal bit for bit (an exact speedup changes no result). Both sides
use the installed compiled modules (mlopt's C++ is the same; only Python
differs), linked into a git worktree of COMMIT made for the run.

    python3 benchmarks/bench_against_commit.py d6cb1b7~1 splits149/train prior20-s0.npz --iterations 12 \\
        --validation splits149/validation --validate-every 2 --sigma 0.0751 --lr 0.0300

Prints seconds per iteration of each side and the ratio; ``--json`` keeps both sides' iterations.
``--at-once`` runs the two sides at the same time (with ``--workers 1`` each on 2 cores), so that other
work on the machine slows both alike."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent


def _compiled_parts() -> list[Path]:
    """The installed mlopt's compiled modules and native folders (what a worktree of Python code lacks)."""
    import mlopt

    package = Path(mlopt.__file__).resolve().parent
    return [p for p in package.iterdir() if p.suffix == ".so" or (p.is_dir() and p.name in ("lib", "_valgrind"))]


def _side(python_dir: Path, bench_args: list[str], out: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(python_dir))
    return subprocess.Popen([sys.executable, str(HERE / "bench_es_iteration.py"), *bench_args, "--side", "current",
                             "--json", str(out)], env=env)


def _iterations(process: subprocess.Popen, out: Path) -> list[dict]:
    if process.wait():
        raise SystemExit(f"bench_es_iteration.py failed (exit {process.returncode})")
    return json.loads(out.read_text())["current"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="the other arguments go to bench_es_iteration.py")
    ap.add_argument("commit", help="the baseline commit (e.g. HEAD~1)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--at-once", action="store_true",
                    help="run both sides at the same time (e.g. --workers 1 each on 2 cores) instead of one after "
                         "the other: on a machine busy with other work, the load slows both sides alike")
    args, rest = ap.parse_known_args()
    parts = _compiled_parts()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(CHECKOUT), "worktree", "add", "--detach", "-q", str(tree), args.commit],
                       check=True)
        try:
            for p in parts:
                link = tree / "python" / "mlopt" / p.name
                if not link.exists():
                    link.symlink_to(p)
            base_out, current_out = Path(tmp) / "base.json", Path(tmp) / "current.json"
            if args.at_once:  # both sides at the same time: whatever else loads the machine slows both alike
                sides = [_side(tree / "python", rest, base_out), _side(CHECKOUT / "python", rest, current_out)]
                before, after = _iterations(sides[0], base_out), _iterations(sides[1], current_out)
            else:
                before = _iterations(_side(tree / "python", rest, base_out), base_out)
                after = _iterations(_side(CHECKOUT / "python", rest, current_out), current_out)
        finally:
            subprocess.run(["git", "-C", str(CHECKOUT), "worktree", "remove", "--force", str(tree)], check=False)
            shutil.rmtree(tree, ignore_errors=True)
    for a, b in zip(before, after):
        if any(a[k] != b[k] for k in ("train_delta_percent", "update_norm", "validation_delta_percent")):
            raise SystemExit(f"iteration {a['iteration']}: the two checkouts trained differently "
                             f"({a['train_delta_percent']} vs {b['train_delta_percent']})")
    sb, sa = sum(m["seconds"] for m in before), sum(m["seconds"] for m in after)
    print(f"{len(before)} iterations, identical training on both sides")
    print(f"baseline ({args.commit}): {sb / len(before):.2f} s per iteration")
    print(f"current  (this checkout): {sa / len(after):.2f} s per iteration")
    print(f"ratio: {sb / sa:.2f}x the iterations per second")
    if args.json:
        args.json.write_text(json.dumps({"commit": args.commit, "baseline": before, "current": after,
                                         "ratio": sb / sa}, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""``mlopt train bc``: train a policy and write a run directory."""

from __future__ import annotations

import json
import sys

from ._common import add_command, int_list, positive_int


def cmd_train_bc(args) -> int:
    from ..problems import get
    from ..rollouts import TraceDataset
    from ..training import train_bc
    from ..training.run_dir import RunDir
    from ..workers import Progress

    problem = get(args.problem)
    ds = TraceDataset.load(args.trace)
    run = RunDir(args.output, create=True, force=args.force)
    config = {"kind": "bc", "trace": args.trace, "problem": problem.name, "hidden": list(args.hidden),
              "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "buckets": args.buckets,
              "seed": args.seed, "heldout": args.heldout}
    run.write_config(config)
    with Progress(args.epochs, "behavioral cloning", quiet=args.quiet, unit="epoch") as bar:
        def epoch_done(epoch: int, loss: float) -> None:
            run.log_metrics({"stage": "bc", "epoch": epoch, "loss": loss})
            bar.update(loss=f"{loss:.4f}")

        result = train_bc(ds, problem, hidden=args.hidden, epochs=args.epochs, batch_size=args.batch_size,
                          lr=args.lr, num_buckets=args.buckets, heldout_fraction=args.heldout, seed=args.seed,
                          on_epoch=epoch_done)
    files = run.save_policy(result.policy, compile_so=not args.no_compile)
    report = result.report() | {"run": str(run.path), "files": files}
    (run.path / "bc.json").write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        held = ("no held-out rows" if result.heldout_agreement is None else
                f"{100 * result.heldout_agreement:.2f}% on {result.heldout_rows} rows of held-out modules")
        print(f"{run.path}: agreement with the heuristic {100 * result.train_agreement:.2f}% on "
              f"{result.train_rows} training rows, {held}")
        for k, v in files.items():
            print(f"  {k}: {v}", file=sys.stdout)
    return 0


def register(sub) -> None:
    train = sub.add_parser("train", help="train policies: bc (imitate the heuristic)",
                           description="Train policies; each run writes a run directory.")
    tsub = train.add_subparsers(dest="train_command", metavar="COMMAND", required=True)
    bc = add_command(tsub, "bc", "behavioral cloning: a policy that imitates the heuristic from a trace",
                     ["mlopt trace corpus/ -o trace.npz && mlopt train bc trace.npz -o runs/bc"])
    bc.add_argument("trace", help="a dataset written by mlopt trace")
    bc.add_argument("-o", "--output", required=True, metavar="DIR", help="run directory")
    bc.add_argument("--problem", default="inlining")
    bc.add_argument("--hidden", type=int_list, default=(64, 64), metavar="64,64")
    bc.add_argument("--epochs", type=positive_int, default=10)
    bc.add_argument("--batch-size", type=positive_int, default=512)
    bc.add_argument("--lr", type=float, default=3e-3)
    bc.add_argument("--buckets", type=positive_int, default=1000, help="vocab quantiles per feature")
    bc.add_argument("--heldout", type=float, default=0.2, metavar="F",
                    help="fraction of modules held out to measure agreement (0.2)")
    bc.add_argument("--seed", type=int, default=0)
    bc.add_argument("--no-compile", action="store_true", help="skip compiling policy.so")
    bc.add_argument("--force", action="store_true", help="replace an existing run directory's files")
    bc.add_argument("--quiet", action="store_true")
    bc.add_argument("--json", action="store_true")
    bc.set_defaults(func=cmd_train_bc)

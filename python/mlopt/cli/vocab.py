"""``mlopt vocab``: feature quantiles (.buckets files) from training logs."""

from __future__ import annotations

import sys

from ._common import add_command, positive_int, problem_name


def cmd_vocab(args) -> int:
    import numpy as np

    from .. import problems
    from ..policy import Vocab

    problem = problems.get(args.problem)
    vocab = Vocab.from_logs(args.logs, num_buckets=args.buckets, features=problem.feature_names,
                            zscore=problem.zscore_features)
    vocab.save(args.output, overwrite=args.force)
    print(f"wrote {len(vocab.boundaries)} .buckets files ({args.buckets} boundaries each)"
          + (f" and {len(vocab.zscore)} .zscore files" if vocab.zscore else "") + f" to {args.output}")
    few = {f: int(np.unique(vocab.boundaries[f]).size) for f in vocab.boundaries}
    few = {f: k for f, k in few.items() if k < args.buckets}
    if few:
        shown = ", ".join(f"{f} ({k})" for f, k in sorted(few.items(), key=lambda x: x[1])[:5])
        print(f"mlopt: warning: {len(few)} of {len(vocab.features)} features have fewer distinct quantiles than "
              f"--buckets {args.buckets} (few distinct values: boundaries repeat): {shown}"
              + (", ..." if len(few) > 5 else ""), file=sys.stderr)
    return 0


def register(sub) -> None:
    from ..problems import DEFAULT

    vocab = add_command(sub, "vocab", "compute feature quantiles (.buckets files) from training logs",
                        ["mlopt vocab traces/*.log -o vocab/"])
    vocab.add_argument("logs", nargs="+", metavar="LOG", help="training logs with the problem's features")
    vocab.add_argument("-o", "--output", required=True, metavar="DIR", help="vocab directory to write")
    vocab.add_argument("--buckets", type=positive_int, default=1000, metavar="N",
                       help="boundaries per feature (default 1000)")
    vocab.add_argument("--problem", type=problem_name, default=DEFAULT, help=f"whose features (default {DEFAULT})")
    vocab.add_argument("--force", action="store_true", help="replace existing .buckets files")
    vocab.set_defaults(func=cmd_vocab)

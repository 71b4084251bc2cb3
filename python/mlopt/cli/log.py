"""``mlopt log``: read MLGO training logs and interactive streams."""

from __future__ import annotations

import json
import os

from ..errors import OutputExistsError
from ._common import add_command

# numpy and the log reader are imported by the commands that use them, so
# `mlopt --help` and the other commands start without them.


def _format_value(arr) -> str:
    # As LLVM's log_reader.py prints: Python str() of each element, joined by ','.
    return ",".join(str(v) for v in arr.reshape(-1).tolist())


def cmd_show(args) -> int:
    from ..log import LogStream

    with LogStream(args.file) as stream:
        context = None
        shown = 0
        header = stream.header
        if header is None:
            return 0
        for obs in stream:
            if args.context is not None and obs.context != args.context:
                continue
            if obs.context != context:
                context = obs.context
                print(f"context: {context}")
            print(f"observation: {obs.id}")
            for spec in header.features:
                print(f"{spec.name}: {_format_value(obs[spec.name])}")
            if header.score is not None:
                print(f"{header.score.name}: {_format_value(obs.score)}")
            shown += 1
            if args.limit is not None and shown >= args.limit:
                break
    return 0


def _column_stats(name: str, arr) -> dict:
    import numpy as np

    flat = arr.reshape(-1)
    if flat.size == 0:
        return {"name": name, "count": 0, "min": None, "mean": None, "max": None}
    values = flat.astype(np.float64)
    return {
        "name": name,
        "count": int(flat.size),
        "min": flat.min().item(),
        "mean": float(values.mean()),
        "max": flat.max().item(),
    }


def cmd_stats(args) -> int:
    import numpy as np

    from ..log import read_log

    log = read_log(args.file, allow_truncated=args.allow_truncated)
    per_context = {name: int(np.count_nonzero(log.context_index == i)) for i, name in enumerate(log.contexts)}
    columns = [_column_stats(s.name, log[i]) for i, s in enumerate(log.features)]
    score = _column_stats(log.score_spec.name, log.score) if log.score_spec is not None else None
    if args.json:
        print(json.dumps({
            "file": str(args.file),
            "bytes": log.input_bytes,
            "observations": len(log),
            "contexts": per_context,
            "features": columns,
            "score": score,
            "advice": json.loads(log.advice_spec.to_json()) if log.advice_spec else None,
            "truncated_bytes": log.truncated_bytes,
        }, indent=2))
        return 0
    print(f"file:          {args.file}")
    print(f"bytes:         {log.input_bytes}")
    print(f"observations:  {len(log)}")
    empty = sum(1 for v in per_context.values() if v == 0)
    print(f"contexts:      {len(log.contexts)}" + (f" ({empty} without observations)" if empty else ""))
    print(f"features:      {len(log.features)}")
    if log.score_spec is not None:
        print(f"score:         {log.score_spec.name} ({log.score_spec.type})")
    if log.advice_spec is not None:
        print(f"advice:        {log.advice_spec.name} ({log.advice_spec.type})")
    if log.truncated_bytes:
        print(f"dropped:       {log.truncated_bytes} bytes of an incomplete last record")
    rows = columns + ([score] if score else [])
    if not rows:
        return 0
    width = max(len(r["name"]) for r in rows)
    print()
    print(f"{'feature':<{width}}  {'type':>8}  {'min':>14}  {'mean':>14}  {'max':>14}")
    types = [s.type for s in log.features] + ([log.score_spec.type] if score else [])
    for r, t in zip(rows, types):
        if r["count"] == 0:
            print(f"{r['name']:<{width}}  {t:>8}  {'-':>14}  {'-':>14}  {'-':>14}")
        else:
            print(f"{r['name']:<{width}}  {t:>8}  {r['min']:>14.6g}  {r['mean']:>14.6g}  {r['max']:>14.6g}")
    return 0


def cmd_to_npz(args) -> int:
    from ..log import read_log

    if os.path.exists(args.out) and not args.force:
        raise OutputExistsError(args.out)
    log = read_log(args.file, allow_truncated=args.allow_truncated)
    log.to_npz(args.out, overwrite=args.force)
    print(f"wrote {args.out}: {len(log)} observations, {len(log.features)} features")
    return 0


def register(sub) -> None:
    log = add_command(sub, "log", "read MLGO training logs and interactive streams",
                      ["mlopt log show inline.log | head", "mlopt log stats inline.log",
                       "mlopt log to-npz inline.log inline.npz"])
    log_sub = log.add_subparsers(dest="log_command", metavar="SUBCOMMAND", required=True)

    show = add_command(log_sub, "show", "print every observation, as LLVM's log_reader.py does",
                       ["mlopt log show inline.log --limit 3", "mlopt log show inline.log --context main"])
    show.add_argument("file", help="training log or captured interactive stream")
    show.add_argument("--limit", type=int, help="stop after N observations")
    show.add_argument("--context", help="only observations of this context")
    show.set_defaults(func=cmd_show)

    stats = add_command(log_sub, "stats", "counts and per-feature min/mean/max",
                        ["mlopt log stats inline.log", "mlopt log stats inline.log --json"])
    stats.add_argument("file")
    stats.add_argument("--json", action="store_true", help="machine-readable output")
    stats.add_argument("--allow-truncated", action="store_true",
                       help="drop an incomplete last record instead of failing")
    stats.set_defaults(func=cmd_stats)

    npz = add_command(log_sub, "to-npz", "save the columns as a numpy .npz archive",
                      ["mlopt log to-npz inline.log inline.npz"])
    npz.add_argument("file")
    npz.add_argument("out", help="output .npz (not replaced unless --force; missing directories are created)")
    npz.add_argument("--force", action="store_true", help="replace OUT if it exists")
    npz.add_argument("--allow-truncated", action="store_true",
                     help="drop an incomplete last record instead of failing")
    npz.set_defaults(func=cmd_to_npz)

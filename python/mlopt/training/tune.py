"""``mlopt tune``: the callee search as a product, for code that is built
again and again (firmware, apps, a library at every release).

:func:`tune_corpus` searches each binary of a full-LTO build -- its corpus,
``mlopt corpus extract MODULES OUT --lto`` of the modules the plugin saved
(``mlopt clang-flags --lto full --save-lto-modules MODULES``) -- for callees
whose sites, all inlined or none, make the binary's ``.text`` smaller, as
lld links it with ``--gc-sections --icf=all`` (problem ``inlining-lto``),
starting from the heuristic's own decisions; every move is a compile of the
merged module and a link. What it keeps it writes as callee-decision files,
one per binary, ``DIR/<module name>.txt`` (the name the plugin's ``%m``
gives the binary's merged module), which the next build applies with
``mlopt clang-flags --lto full --callee-decisions DIR/%m.txt`` on its
compile and link lines. :func:`check_tuned` takes a later build's corpus
and says, per binary, how many decisions still name a callee it calls and
what they save there.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..corpus import corpus_entries
from ..corpus.lto import lto_module_facts
from ..errors import CorpusError, OutputExistsError
from ..rollouts import RolloutTask, run_rollouts, trace_corpus
from .callee_search import CalleeSearch
from .local_search import SearchConfig

PROBLEM = "inlining-lto"
LINK_FLAGS = "-Wl,--gc-sections,--icf=all"  # what the sizes assume on the link line
REPORT = "tune.json"


def module_names(entries) -> dict[str, str]:
    """Each full-LTO corpus module's name in the plugin's ``%m`` (its link facts' ``module_name``)."""
    names = {}
    for e in entries:
        facts = lto_module_facts(e.bitcode_path)
        if facts is None or facts.get("lto") != "full":
            raise CorpusError(f"{e.name}: not a full-LTO module with link facts: tune needs a corpus from "
                              "mlopt corpus extract MODULES OUT --lto of a full-LTO build")
        if "module_name" not in facts:
            raise CorpusError(f"{e.name}: its link facts predate module_name: save the modules again with this "
                              "mlopt's plugin (mlopt clang-flags --lto full --save-lto-modules DIR)")
        names[e.name] = facts["module_name"]
    return names


def read_callee_decisions(path: str | os.PathLike) -> dict[str, int]:
    """A callee-decision file's ``<0|1> <name>`` lines (comments and blank lines skipped)."""
    out = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        d, _, name = line.partition(" ")
        if d not in ("0", "1") or not name or " " in name:
            raise CorpusError(f"{path}: line {number} is not \"<0|1> <callee name>\"")
        out[name] = int(d)
    return out


def _write_decisions(path: Path, module: str, decisions: dict[str, int], before: float, after: float) -> None:
    lines = [f"# mlopt tune: {module}: .text {int(before)} -> {int(after)} bytes linked with {LINK_FLAGS}",
             *(f"{d} {name}" for name, d in sorted(decisions.items()))]
    path.write_text("\n".join(lines) + "\n")


def _start_policy(ds, work: Path):
    """A policy that decides exactly as the heuristic (its vote cannot be overturned), for inlining-lto."""
    from ..problems import get, load_weights
    from ..problems.inlining_default.prior import with_default_prior
    from ..problems.inlining_linkage.rule import with_linkage_input
    from .bc import train_bc

    bc = train_bc(ds, get("inlining"), epochs=1).policy
    path = work / "start.npz"
    with_linkage_input(with_default_prior(bc, 1e4)).save(path, overwrite=True)
    return load_weights(path, PROBLEM)


def tune_corpus(corpus: str | os.PathLike, out: str | os.PathLike, *, evaluations: int = 48, pool=None,
                workers: int | None = None, force: bool = False,
                say: Callable[[str], None] = lambda s: None) -> dict:
    """Searches every binary of ``corpus`` (see the module docstring) with ``evaluations`` compiles each
    and writes ``out/<module name>.txt`` per binary and ``out/tune.json``; returns that report."""
    out = Path(out)
    if (out / REPORT).exists() and not force:
        raise OutputExistsError(str(out / REPORT))
    entries = corpus_entries(corpus)
    if not entries:
        raise CorpusError(f"{corpus}: no modules")
    names = module_names(entries)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    start = time.perf_counter()
    say(f"tracing {len(entries)} binaries' merged modules")
    ds = trace_corpus(corpus, workers=workers, pool=pool, callee_linkage=True, quiet=True)
    policy = _start_policy(ds, work)
    heuristic = run_rollouts([RolloutTask(e, None, problem=PROBLEM, cache=False) for e in entries], pool=pool,
                             quiet=True)
    bad = [(e.name, r.describe()) for e, r in zip(entries, heuristic) if not r.ok]
    if bad:
        raise CorpusError(f"{bad[0][0]}: its heuristic compile failed: {bad[0][1]}")
    baseline = {e.name: r.value.cost for e, r in zip(entries, heuristic)}
    config = SearchConfig(evaluations_per_module=evaluations, batch=8, max_decisions=1 << 30,
                          max_flips=evaluations)
    search = CalleeSearch(policy, ds, entries, config, work=work, pool=pool, baseline=baseline)
    search.run(on_round=lambda r: say(f"round {r['round']}: {r['evaluations']} compiles "
                                      f"({r['evaluations_per_s']:.2f}/s), {search.delta_percent():+.3f}% so far"))
    binaries = {}
    for m in search.modules:
        name = names[m.entry.name]
        _write_decisions(out / f"{name}.txt", m.entry.name, m.forced, m.baseline, m.best.cost)
        binaries[m.entry.name] = {"module_name": name, "before": int(m.baseline), "after": int(m.best.cost),
                                  "decisions": len(m.forced), "evaluations": m.evaluations}
    from .._native import default_llvm

    report = {"corpus": str(Path(corpus).resolve()), "problem": PROBLEM, "link_flags": LINK_FLAGS,
              "llvm": default_llvm(), "evaluations_per_binary": evaluations,
              "compiles": sum(m.evaluations for m in search.modules) + len(entries),
              "minutes": (time.perf_counter() - start) / 60, "binaries": binaries,
              "before": sum(b["before"] for b in binaries.values()),
              "after": sum(b["after"] for b in binaries.values())}
    (out / REPORT).write_text(json.dumps(report, indent=1) + "\n")
    return report


def check_tuned(corpus: str | os.PathLike, decisions: str | os.PathLike, *, pool=None) -> dict:
    """A later build's binaries (its full-LTO corpus) against the decisions ``tune_corpus`` wrote in
    ``decisions``: per binary, the decisions whose callee it still calls, and its ``.text`` without and with
    them (linked with --gc-sections --icf=all)."""
    entries = corpus_entries(corpus)
    names = module_names(entries)
    found = {e.name: Path(decisions) / f"{names[e.name]}.txt" for e in entries}
    files = {m: read_callee_decisions(p) for m, p in found.items() if p.exists()}
    tasks = [RolloutTask(e, None, problem=PROBLEM, call_sites=True, cache=False) for e in entries]
    plain = run_rollouts(tasks, pool=pool, quiet=True)
    bad = [(e.name, r.describe()) for e, r in zip(entries, plain) if not r.ok]
    if bad:
        raise CorpusError(f"{bad[0][0]}: its compile failed: {bad[0][1]}")
    applies = {}
    for e, r in zip(entries, plain):
        callees = {callee for _, callee in r.value.call_sites}
        applies[e.name] = {c: d for c, d in files.get(e.name, {}).items() if c in callees}
    tuned = run_rollouts([RolloutTask(e, None, problem=PROBLEM, cache=False,
                                      forced_callees=tuple(sorted(applies[e.name].items())))
                          for e in entries], pool=pool, quiet=True)
    binaries = {}
    for e, p, t in zip(entries, plain, tuned):
        if not t.ok:
            raise CorpusError(f"{e.name}: its compile with the decisions failed: {t.describe()}")
        binaries[e.name] = {"module_name": names[e.name], "decisions": len(files.get(e.name, {})),
                            "apply": len(applies[e.name]), "without": int(p.value.cost), "with": int(t.value.cost)}
    return {"corpus": str(Path(corpus).resolve()), "decisions": str(Path(decisions).resolve()),
            "binaries": binaries, "without": sum(b["without"] for b in binaries.values()),
            "with": sum(b["with"] for b in binaries.values())}


def _table(header: list[str], rows: list[list]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|---" * len(header) + "|",
                      *("| " + " | ".join(map(str, r)) + " |" for r in rows)])


def format_tuned(report: dict) -> str:
    """tune_corpus's report as a table."""
    bins = report["binaries"]
    rows = [[m, f"{b['before']:,}", f"{b['after']:,}", _pct(b["after"], b["before"]), b["decisions"], b["evaluations"]]
            for m, b in bins.items()]
    rows.append(["total", f"{report['before']:,}", f"{report['after']:,}", _pct(report["after"], report["before"]),
                 sum(b["decisions"] for b in bins.values()), report["compiles"]])
    return _table(["binary", ".text before", "after", "delta", "decisions", "compiles"], rows)


def format_checked(report: dict) -> str:
    """check_tuned's report as a table."""
    bins = report["binaries"]
    rows = [[m, b["decisions"], b["apply"], f"{b['without']:,}", f"{b['with']:,}", _pct(b["with"], b["without"])]
            for m, b in bins.items()]
    rows.append(["total", sum(b["decisions"] for b in bins.values()), sum(b["apply"] for b in bins.values()),
                 f"{report['without']:,}", f"{report['with']:,}", _pct(report["with"], report["without"])])
    return _table(["binary", "decisions", "still apply", ".text without", "with", "delta"], rows)


def _pct(new: float, old: float) -> str:
    return f"{100.0 * (new - old) / old:+.2f}%" if old else "-"

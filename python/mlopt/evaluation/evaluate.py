"""``mlopt eval POLICY CORPUS``: every module compiled in process with the
policy, against the heuristic's cached sizes (:func:`trace_corpus`)."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..compiler import load_policy
from ..corpus import corpus_entries
from ..errors import CorpusError
from ..rollouts import RolloutTask, failures_of, run_rollout, run_rollouts, trace_corpus
from ..rollouts.tasks import default_ir2vec_vocab
from .linked import linked_summary
from .report import ModuleResult, summarize


@dataclass
class Evaluation:
    policy: str
    corpus: str
    rows: list[ModuleResult]
    failed: list[tuple[str, str]] = field(default_factory=list)
    linked: dict | None = None  # evaluation/linked.py's linked_summary (evaluate(linked=True))

    def summary(self) -> dict:
        s = summarize(self.rows, self.failed)
        s["policy"], s["corpus"] = self.policy, self.corpus
        if self.linked is not None:
            s["linked"] = self.linked
        return s


def evaluate(policy: str | os.PathLike | None, corpus: str | os.PathLike, *, workers: int | None = None,
             ray: str | None = None, timeout: float | None = None, pool=None, quiet: bool = False,
             linked: bool = False, rule=None) -> Evaluation:
    """Per-module ``.text`` of ``policy`` and of the heuristic on ``corpus``.
    The policy is checked here first (a bad file fails before any work).
    ``linked``: also the package-linked estimate (:mod:`.linked`); the
    policy's compiles then keep their objects (no cache), and the
    heuristic's are compiled again, with theirs. ``policy=None`` with
    ``rule`` (a :class:`PackageCallSites`): the heuristic with the
    one-site-linkonce rule's decisions forced, no model."""
    if policy is None and rule is None:
        raise ValueError("evaluate: give a policy, a rule, or both")
    if policy is not None:
        policy = os.fspath(Path(policy).resolve())
        load_policy(policy, ir2vec_vocab=default_ir2vec_vocab() or None)
    baseline = trace_corpus(corpus, workers=workers, ray=ray, timeout=timeout, pool=pool, quiet=quiet)
    base = {m: int(s) for m, s in zip(baseline.modules, baseline.text_size)}
    entries = [e for e in corpus_entries(corpus) if e.name in base]
    tasks = [RolloutTask(e, policy, text_sections=linked,
                         forced_callees=() if rule is None else tuple(sorted(rule.decisions(e.name).items())))
             for e in entries]
    results = run_rollouts(tasks, pool=pool, workers=workers, ray=ray, timeout=timeout, quiet=quiet,
                           desc="evaluating")
    rows = [ModuleResult(t.entry.name, base[t.entry.name], r.value.text_size, r.value.decisions, r.value.inlined,
                         r.value.default_inlined)
            for t, r in zip(tasks, results) if r.ok]
    failed = list(baseline.meta["failed"]) + failures_of(tasks, results)
    summary = None
    if linked:
        done = [t.entry for t, r in zip(tasks, results) if r.ok]
        heuristic_tasks = [RolloutTask(e, None, text_sections=True) for e in done]
        heuristic = run_rollouts(heuristic_tasks, pool=pool, workers=workers, ray=ray, timeout=timeout,
                                 quiet=quiet, desc="heuristic objects")
        failed += failures_of(heuristic_tasks, heuristic)
        agree = {}
        for t, r in zip(heuristic_tasks, heuristic):
            if r.ok and r.value.text_size != base[t.entry.name]:  # the trace's size, recompiled: must agree
                failed.append((t.entry.name, f"package-linked estimate: the heuristic's .text is "
                                             f"{r.value.text_size} bytes recompiled, {base[t.entry.name]} in the "
                                             "trace; left out of the estimate"))
            elif r.ok:
                agree[t.entry.name] = r.value.text_sections
        summary = linked_summary(agree,
                                 {t.entry.name: r.value.text_sections for t, r in zip(tasks, results) if r.ok})
    return Evaluation(policy or "-Oz + the one-site-linkonce rule", os.fspath(Path(corpus).resolve()), rows,
                      failed, summary)


def call_site_report(policy: str | os.PathLike | None, corpus: str | os.PathLike, module: str,
                     path: str | os.PathLike) -> dict:
    """Every decision the inliner asked about in one module, compiled with
    ``policy``: caller, callee, the heuristic's answer at that site and the
    policy's. Written as CSV; returns counts."""
    entries = {e.name: e for e in corpus_entries(corpus)}
    if module not in entries:
        raise CorpusError(f"{corpus}: no module {module!r}")
    r = run_rollout(RolloutTask(entries[module], os.fspath(policy) if policy else None, call_sites=True))
    with open(path, "w", newline="", encoding="utf-8", errors="surrogateescape") as f:
        w = csv.writer(f)
        w.writerow(["index", "caller", "callee", "heuristic", "policy", "differs"])
        for i, ((caller, callee), h, p) in enumerate(zip(r.call_sites, r.default_decisions, r.policy_decisions)):
            w.writerow([i, caller, callee, int(h), int(p), int(h != p)])
    differs = int((r.default_decisions != r.policy_decisions).sum())
    return {"module": module, "sites": len(r.call_sites), "differs": differs, "text_size": r.text_size,
            "path": os.fspath(path)}

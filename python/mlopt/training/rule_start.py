"""A start for ES that decides as a fixed rule does (a
:class:`~mlopt.problems.inlining_linkage.site_rule.SiteRule`) with the
weight scales of a trained network: an ``inlining-default`` prior (the
heuristic's vote, ``mlopt policy default-prior``) given the linkage input
(``with_linkage_input``) and fine-tuned by behavioral cloning on the rule's
decisions over a trace that logs the linkage (``mlopt trace
--callee-linkage``). Why not the exact construction (``with_linkage_rule``):
its vote is a large weight, ES's noise is relative to each layer's scale,
and the start it gives learns slowly (benchmarks/README.md, stop 73).

    result = taught_start(prior, TraceDataset.load("trace-linkage.npz"), SiteRule.parse("linkonce:2:100"))
    result.bc.policy.save("start.npz")   # mlopt train es --init start.npz ...

The rows the rule adds to the heuristic's are rare (5% of the sites on
splits149's training packages) and weigh ``added_weight`` each in the loss;
whole packages are held out (``heldout_fraction``) to measure agreement."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import MloptError
from ..problems.inlining.spec import DEFAULT_DECISION
from ..problems.inlining_default import PROBLEM as DEFAULT_INFORMED
from ..problems.inlining_linkage import PROBLEM as LINKAGE_INFORMED
from ..problems.inlining_linkage.rule import with_linkage_input
from ..problems.inlining_linkage.site_rule import SiteRule
from ..rollouts import TraceDataset
from .bc import BCResult, train_bc

RULE_COLUMN = "site_rule_decision"  # the labels' column in the copy of the dataset BC trains on


@dataclass
class RuleStart:
    bc: BCResult
    rule: SiteRule
    rows: int
    added: int  # rows where the rule inlines and the heuristic does not
    added_recall: float  # of those, the share the taught policy inlines (all rows, training and held out)
    agreement: float  # with the rule on every row

    def report(self) -> dict:
        return {"rule": str(self.rule), "rows": self.rows, "rule_added_rows": self.added,
                "rule_added_recall": self.added_recall, "agreement": self.agreement,
                "train_agreement": self.bc.train_agreement, "heldout_agreement": self.bc.heldout_agreement,
                "heldout_units": self.bc.heldout_units, "losses": self.bc.losses}


def taught_start(policy, dataset: TraceDataset, rule: SiteRule, *, epochs: int = 3, lr: float = 1e-3,
                 added_weight: float = 4.0, heldout_fraction: float = 0.2, seed: int = 0) -> RuleStart:
    """``policy`` (``inlining-default`` or ``inlining-linkage``) fine-tuned to decide as ``rule`` on
    ``dataset``'s rows. MloptError names what is missing."""
    name = policy.problem.name
    if name == DEFAULT_INFORMED.name:
        policy = with_linkage_input(policy)
    elif name != LINKAGE_INFORMED.name:
        raise MloptError(f"a rule start needs an {DEFAULT_INFORMED.name!r} or {LINKAGE_INFORMED.name!r} policy "
                         f"(mlopt policy default-prior makes one), not {name!r}")
    try:
        labels = rule.labels(dataset.columns)
    except KeyError as e:
        hint = " (mlopt trace --callee-linkage logs it)" if e.args[0] == "callee_linkage" else ""
        raise MloptError(f"the trace has no {e.args[0]!r} column{hint}") from None
    added = (labels == 1) & (np.asarray(dataset.columns[DEFAULT_DECISION]).reshape(-1) == 0)
    weights = np.where(added, float(added_weight), 1.0)
    labelled = replace(dataset, columns={**dataset.columns, RULE_COLUMN: labels.reshape(-1, 1)})
    bc = train_bc(labelled, LINKAGE_INFORMED, epochs=epochs, lr=lr, heldout_fraction=heldout_fraction, seed=seed,
                  label=RULE_COLUMN, init=policy, weights=weights)
    decided = np.asarray(bc.policy.decide(dataset.columns)).reshape(-1)
    recall = float(decided[added].mean()) if added.any() else 1.0
    return RuleStart(bc, rule, len(labels), int(added.sum()), recall, float((decided == labels).mean()))

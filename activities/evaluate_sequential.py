"""The evaluate activity's side of a sequential evaluation (spec.rollout.evaluation.sequential).

Where the test starts (the revision's ledger entry in the live status, if the dataset still
starts with the cases it counted), which cases this evaluation runs (the ones after those,
renumbered from 0 so the heartbeat and the resume work as for any dataset), the gate fed case
by case in dataset order, and the stop once it decides. The gate's state rides in the
heartbeat (numbers only), so a retried attempt continues it exactly where its prefix ends.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from decisionmodel.evaluation import GoldenCase
from decisionmodel.evaluation import ledger as ledgers
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.ledger import LedgerEntry, TestStart
from decisionmodel.evaluation.sequential import SequentialGate
from decisionmodel.vocabulary import EvaluationResult


class Decided(Exception):
    """The test decided: the candidate's phase stops sending cases."""


@dataclass
class SequentialRun:
    """One evaluation's part of a revision's test."""

    begun: TestStart
    digests: list[str]
    revision: str
    threshold: str
    gate: SequentialGate = field(init=False)

    def __post_init__(self) -> None:
        self.gate = self.begun.gate

    @classmethod
    def begin(
        cls,
        entries: list[LedgerEntry],
        revision: str,
        threshold: str,
        confidence: str,
        raw: bytes,
        cases: list[GoldenCase],
        carried: dict[str, Any] | None = None,
    ) -> SequentialRun:
        """``carried``: where an earlier attempt of this evaluation started the test (its
        heartbeat, same dataset), which wins over the ledger: the ledger may already hold this
        very evaluation's result, written before the attempt was lost."""
        digests = ledgers.prefix_digests(raw, cases)
        if carried is not None:
            begun = TestStart.from_wire(carried)
        else:
            begun = ledgers.start(entries, revision, threshold, Decimal(confidence), digests)
        return cls(begun, digests, revision, threshold)

    def unseen(self, cases: list[GoldenCase]) -> list[GoldenCase]:
        """The cases this evaluation runs: those after the ones the test counted, from 0."""
        tail = cases[self.begun.offset :]
        return [dataclasses.replace(c, index=i) for i, c in enumerate(tail)]

    @property
    def decided(self) -> bool:
        return self.gate.verdict() != EvaluationResult.INCONCLUSIVE

    def resume(self, wire: dict[str, Any] | None, done: int) -> None:
        """Continue from a heartbeat's gate when it is exactly the state after the ``done``
        cases the attempt resumes at; else from the test's start (the phase restarts)."""
        self.gate = self.begun.gate
        if wire is None or done == 0:
            return
        found = SequentialGate.from_wire(wire)
        if found.cases == self.begun.offset + done:
            # The confidence is the test's, whatever the heartbeat's attempt used.
            self.gate = dataclasses.replace(found, alpha=self.begun.gate.alpha)

    def feed(self, record: CaseRecord) -> None:
        """One more case, in dataset order: its share of right questions (a case the runtime
        refused counts 0); raises :class:`Decided` once the test has a verdict."""
        share = record.correct / record.pairs if record.pairs else 0.0
        self.gate = self.gate.after(min(max(share, 0.0), 1.0))
        if self.decided:
            raise Decided

    def entry(self) -> LedgerEntry:
        return ledgers.entry_of(self.begun, self.gate, self.revision, self.threshold, self.digests)

"""The evaluate activity's side of a sequential evaluation (spec.rollout.evaluation.sequential).

Where the test starts (the revision's ledger entry in the live status, if the dataset still
starts with the cases it counted), which cases this evaluation runs (the ones after those,
renumbered from 0 so the heartbeat and the resume work as for any dataset), the gate fed case
by case in dataset order, and the stop once it decides. The gate's state rides in the
heartbeat (numbers only), so a retried attempt continues it exactly where its prefix ends.
The paired gates (maxAccuracyDrop, maxNegativeFlipRate) are fed from the case records of both
phases, recomputed from the test's start whenever the stable has answered more cases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from decisionmodel.evaluation import GoldenCase
from decisionmodel.evaluation import ledger as ledgers
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.ledger import LedgerEntry, TestStart
from decisionmodel.evaluation.sequential import SequentialGate
from decisionmodel.evaluation.sequential_gates import overall, paired_fed, share
from decisionmodel.vocabulary import EvaluationResult, Gate


class Decided(Exception):
    """The test decided: the candidate's phase stops sending cases."""


@dataclass
class SequentialRun:
    """One evaluation's part of a revision's test: minAccuracy's gate, fed in the candidate's
    phase, and the paired gates, fed once the stable has answered the same cases."""

    begun: TestStart
    digests: list[str]
    revision: str
    threshold: str
    gate: SequentialGate = field(init=False)
    # Cases of this evaluation the test read (minAccuracy stops reading once decided).
    fed: int = field(init=False, default=0)
    paired: dict[Gate, SequentialGate] = field(init=False)

    def __post_init__(self) -> None:
        self.gate = self.begun.gate
        self.paired = dict(self.begun.paired)

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
        *,
        paired: dict[Gate, str] | None = None,
        baseline: str | None = None,
    ) -> SequentialRun:
        """``carried``: where an earlier attempt of this evaluation started the test (its
        heartbeat, same dataset), which wins over the ledger: the ledger may already hold this
        very evaluation's result, written before the attempt was lost. ``paired``: the paired
        gates' thresholds, with the stable ``baseline`` they compare with."""
        digests = ledgers.prefix_digests(raw, cases)
        if carried is not None:
            begun = TestStart.from_wire(carried)
        else:
            begun = ledgers.start(
                entries, revision, threshold, Decimal(confidence), digests, paired, baseline
            )
        return cls(begun, digests, revision, threshold)

    def unseen(self, cases: list[GoldenCase]) -> list[GoldenCase]:
        """The cases this evaluation runs: those after the ones the test counted, from 0."""
        tail = cases[self.begun.offset :]
        return [dataclasses.replace(c, index=i) for i, c in enumerate(tail)]

    @property
    def compares(self) -> bool:
        """Whether the test has gates that need the stable's answers."""
        return bool(self.begun.paired)

    @property
    def decided(self) -> bool:
        verdicts = [self.gate.verdict(), *(g.verdict() for g in self.paired.values())]
        return overall(verdicts) != EvaluationResult.INCONCLUSIVE

    def resume(self, wire: dict[str, Any] | None, done: int) -> None:
        """Continue from a heartbeat's state when it is exactly the state after the ``done``
        cases the attempt resumes at; else from the test's start (the phase restarts)."""
        self.gate, self.fed = self.begun.gate, 0
        if wire is None or done == 0:
            return
        if "fed" in wire:
            found, fed = SequentialGate.from_wire(wire["gate"]), int(wire["fed"])
        else:  # a heartbeat of a worker before paired gates: the gate alone
            found = SequentialGate.from_wire(wire)
            fed = found.cases - self.begun.offset
        if fed == done:
            # The confidence is the test's, whatever the heartbeat's attempt used.
            self.gate = dataclasses.replace(found, alpha=self.begun.gate.alpha)
            self.fed = done

    def wire(self) -> dict[str, Any]:
        """The candidate side's state for the heartbeat (numbers only)."""
        return {"gate": self.gate.to_wire(), "fed": self.fed}

    def feed(self, record: CaseRecord) -> None:
        """One more case of the candidate, in dataset order; raises :class:`Decided` once the
        test has a verdict (with paired gates: once minAccuracy has failed, or every gate
        already passed)."""
        self.fed += 1
        if self.gate.verdict() == EvaluationResult.INCONCLUSIVE:
            self.gate = self.gate.after(share(record))
        if self.decided:
            raise Decided

    def pair(self, candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord]) -> None:
        """The paired gates fed every case both revisions answered in this evaluation."""
        self.paired = paired_fed(self.begun.paired, candidate, stable)

    def entry(self) -> LedgerEntry:
        return ledgers.entry_of(
            self.begun,
            self.gate,
            self.revision,
            self.threshold,
            self.digests,
            fed=self.fed,
            paired=self.paired,
        )

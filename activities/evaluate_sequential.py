"""The evaluate activity's side of a sequential evaluation (spec.rollout.evaluation.sequential).

Where the test starts (the revision's ledger entry in the live status, if the dataset still
starts with the cases it counted), which cases this evaluation runs (the ones after those,
renumbered from 0 so the heartbeat and the resume work as for any dataset), the gate fed case
by case in dataset order, and the stop once it decides. The gate's state rides in the
heartbeat (numbers only), so a retried attempt continues it exactly where its prefix ends.
The other gates (maxAccuracyDrop, maxNegativeFlipRate, the slices', the ECE gates) are fed
from the case records of both phases, recomputed from the test's start after each round.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from decisionmodel.evaluation import GoldenCase
from decisionmodel.evaluation import ledger as ledgers
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decision import EvaluationDecision, SliceGates
from decisionmodel.evaluation.gates import EvaluationGates
from decisionmodel.evaluation.ledger import LedgerEntry, OtherGates, TestStart
from decisionmodel.evaluation.sequential import SequentialGate
from decisionmodel.evaluation.sequential_decision import decide_sequential
from decisionmodel.evaluation.sequential_ece import ECE_GATES, EceGate, ece_fed
from decisionmodel.evaluation.sequential_gates import (
    PAIRED_GATES,
    overall,
    record_fed,
    share,
    slice_gate,
)
from decisionmodel.vocabulary import EvaluationResult, Gate


class Decided(Exception):
    """The test decided: the candidate's phase stops sending cases."""


def other_gates(
    gates: dict[str, str],
    slices: SliceGates | None,
    cases: list[GoldenCase],
    stable: str | None,
) -> OtherGates:
    """What the test judges besides minAccuracy: the paired gates (with a ``stable``), the
    ECE gates (maxECEIncrease with a ``stable``), and each slice with at least ``minCases``
    cases in the dataset, its alpha shared among the slice comparisons (Bonferroni, as
    decision._slices with fixed n)."""
    written = {str(g): gates[str(g)] for g in PAIRED_GATES if stable and str(g) in gates}
    # maxECE judges the candidate alone; maxECEIncrease compares with the stable.
    written |= {g: gates[g] for g in ECE_GATES if g in gates and (stable or g == Gate.MAX_ECE)}
    shares: dict[str, int] = {}
    if slices is not None:
        counts = Counter(c.slice for c in cases if c.slice is not None)
        per = [(Gate.MIN_ACCURACY, slices.min_accuracy)]
        if stable:
            per.append((Gate.MAX_ACCURACY_DROP, slices.max_accuracy_drop))
        sliced = {
            slice_gate(name, gate): threshold
            for name in sorted(n for n, k in counts.items() if k >= slices.min_cases)
            for gate, threshold in per
            if threshold is not None
        }
        written |= sliced
        shares = dict.fromkeys(sliced, len(sliced))
    paired = any(ledgers.compares_with_stable(g) for g in written)
    return OtherGates(written, stable if paired else None, shares)


@dataclass
class SequentialRun:
    """One evaluation's part of a revision's test: minAccuracy's gate, fed in the candidate's
    phase, and the other gates (paired, slices, ECE), fed from the case records after each
    round."""

    begun: TestStart
    digests: list[str]
    revision: str
    threshold: str
    gate: SequentialGate = field(init=False)
    # Cases of this evaluation the test read (minAccuracy stops reading once decided).
    fed: int = field(init=False, default=0)
    others: dict[str, SequentialGate] = field(init=False)
    ece: dict[str, EceGate] = field(init=False)

    def __post_init__(self) -> None:
        self.gate = self.begun.gate
        self.others = dict(self.begun.others)
        self.ece = dict(self.begun.ece)

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
        others: OtherGates | None = None,
    ) -> SequentialRun:
        """``carried``: where an earlier attempt of this evaluation started the test (its
        heartbeat, same dataset), which wins over the ledger: the ledger may already hold this
        very evaluation's result, written before the attempt was lost. ``others``: the gates
        judged besides minAccuracy (:func:`other_gates`)."""
        digests = ledgers.prefix_digests(raw, cases)
        if carried is not None:
            begun = TestStart.from_wire(carried)
        else:
            begun = ledgers.start(
                entries, revision, threshold, Decimal(confidence), digests, others
            )
        return cls(begun, digests, revision, threshold)

    def unseen(self, cases: list[GoldenCase]) -> list[GoldenCase]:
        """The cases this evaluation runs: those after the ones the test counted, from 0."""
        tail = cases[self.begun.offset :]
        return [dataclasses.replace(c, index=i) for i, c in enumerate(tail)]

    @property
    def in_rounds(self) -> bool:
        """Whether gates read from the case records (paired, slices, ECE): the cases then run
        in rounds, each judged before the next."""
        return bool(self.begun.others or self.begun.ece)

    @property
    def decided(self) -> bool:
        verdicts = [self.gate.verdict()] + [g.verdict() for g in self.others.values()]
        verdicts += [e.verdict() for e in self.ece.values()]
        return overall(verdicts) != EvaluationResult.INCONCLUSIVE

    def resume(self, wire: dict[str, Any] | None, done: int) -> None:
        """Continue from a heartbeat's state when it is exactly the state after the ``done``
        cases the attempt resumes at; else from the test's start (the phase restarts)."""
        self.gate, self.fed = self.begun.gate, 0
        if wire is None or done == 0:
            return
        if "fed" in wire:
            found, fed = SequentialGate.from_wire(wire["gate"]), int(wire["fed"])
        else:  # a heartbeat of a worker before the other gates: the gate alone
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
        test has a verdict (with other gates: once minAccuracy has failed, or every gate
        already passed)."""
        self.fed += 1
        if self.gate.verdict() == EvaluationResult.INCONCLUSIVE:
            self.gate = self.gate.after(share(record))
        if self.decided:
            raise Decided

    def read(self, candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord] | None) -> None:
        """The other gates fed every case of this evaluation they read."""
        self.others = record_fed(self.begun.others, candidate, stable)
        self.ece = {g: ece_fed(e, candidate, stable) for g, e in self.begun.ece.items()}

    def decision(
        self,
        gates: EvaluationGates,
        candidate: Sequence[CaseRecord],
        stable: Sequence[CaseRecord] | None,
        seed_parts: tuple[str, ...],
    ) -> EvaluationDecision:
        """The decision record: every test's verdict and this evaluation's figures."""
        return decide_sequential(
            gates, self.entry(), self.gate, candidate, stable, seed_parts, self.others, self.ece
        )

    def entry(self) -> LedgerEntry:
        return ledgers.entry_of(
            self.begun,
            self.gate,
            self.revision,
            self.threshold,
            self.digests,
            fed=self.fed,
            others=self.others,
            ece=self.ece,
        )

"""The evaluation ledger: one sequential test per candidate revision, continued across
evaluations so that a retry or added cases cannot buy a pass (issue 35 item 4).

A sequential evaluation (``spec.rollout.evaluation.sequential``) judges ``minAccuracy`` by
betting (:mod:`decisionmodel.evaluation.sequential`) after every case and stops as soon as the
gate is decided. Its state is a few numbers, kept in ``status.evaluationLedger`` per revision:

- **lineage**: the digest of the dataset's first ``cases`` cases (their bytes as read). The
  next evaluation of the same revision continues the test only when the dataset still starts
  with exactly those cases (cases appended, or ``maxCases`` raised); it then feeds the cases
  after them only. Re-feeding a case already counted would multiply the bettors' wealth on
  evidence already used (a retry on the same dataset would be a fresh look at old data).
- A dataset that no longer starts with those cases (edited, reordered, replaced) starts a new
  test, said so in the decision record: a new sample is new evidence; the old test's verdict
  stays in the history of the run that reached it.
- **confidence**: the strictest one the test was judged at; lowering ``confidence`` between
  evaluations does not lower the bar (the bettors' wealth does not depend on it, the verdict's
  bar does, so raising it is always sound).
- a changed ``minAccuracy`` is another hypothesis: a new test.

Numbers only: no case, label or answer; the digest binds the lineage without showing content.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.evaluation.dataset import GoldenCase
from decisionmodel.evaluation.sequential import Bettor, SequentialGate
from decisionmodel.vocabulary import EvaluationResult

# Revisions whose test status keeps (the newest first): enough for undo and rollback-to.
LEDGER_REVISIONS: Final = 8
DIGEST_HEX: Final = 16


class LedgerEntry(BaseModel):
    """One revision's sequential test: what it has consumed and where its bettors stand."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    revision: str = Field(max_length=64)
    threshold: str = Field(max_length=16)
    confidence: str = Field(max_length=16)
    dataset_prefix: str = Field(max_length=64)
    cases: int = Field(ge=0)
    this_evaluation: int = Field(ge=0)
    dataset_cases: int = Field(ge=0)
    evaluations: int = Field(ge=1)
    verdict: EvaluationResult
    pass_evidence: str = Field(max_length=32)
    fail_evidence: str = Field(max_length=32)
    needed: str = Field(max_length=32)
    restarted: str | None = Field(default=None, max_length=200)
    # The bettors' state, exact (repr of floats): what the next evaluation continues from.
    total: str = Field(max_length=32)
    squares: str = Field(max_length=32)
    pass_log_wealth: str = Field(max_length=32)
    fail_log_wealth: str = Field(max_length=32)

    @property
    def stopped_early(self) -> bool:
        return self.this_evaluation > 0 and self.cases < self.dataset_cases

    def line(self) -> str:
        """What the decision record says of the test, beside the gate's own line."""
        text = (
            f"sequential test: {self.cases} cases in all, {self.this_evaluation} in this "
            f"evaluation (evaluation {self.evaluations}); pass evidence {self.pass_evidence}, "
            f"fail evidence {self.fail_evidence}, {self.needed} decides"
        )
        if self.stopped_early:
            text += f"; stopped after {self.cases} of the dataset's {self.dataset_cases} cases"
        elif self.verdict == EvaluationResult.INCONCLUSIVE:
            text += (
                "; every case read is counted: append cases to the dataset (and raise "
                "maxCases if it reached it) to continue the test"
            )
        if self.restarted:
            text += f"; {self.restarted}"
        return text


@dataclass(frozen=True)
class TestStart:
    """Where an evaluation's test starts: the gate's state, the cases already counted, the
    evaluations before this one, and why an earlier test was not continued (if one was not)."""

    gate: SequentialGate
    offset: int
    evaluations: int
    confidence: Decimal
    restarted: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """Numbers only: a retried attempt of the same evaluation starts where this one did
        (the ledger in status may already hold this evaluation's own result)."""
        return {
            "gate": self.gate.to_wire(),
            "offset": self.offset,
            "evaluations": self.evaluations,
            "confidence": str(self.confidence),
            "restarted": self.restarted,
        }

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> TestStart:
        return cls(
            SequentialGate.from_wire(raw["gate"]),
            int(raw["offset"]),
            int(raw["evaluations"]),
            Decimal(raw["confidence"]),
            raw.get("restarted"),
        )


def alpha_of(confidence: Decimal) -> float:
    """Each verdict's error: (1 - confidence) / 2, as the fixed-n gates."""
    return float((1 - confidence) / 2)


def prefix_digests(raw: bytes, cases: list[GoldenCase]) -> list[str]:
    """For k = 0 … len(cases): the digest of the dataset's bytes up to the end of case k's
    line (k = 0: of nothing), the lineage a test is continued on."""
    lines = raw.split(b"\n")
    found = [hashlib.sha256(b"").hexdigest()[:DIGEST_HEX]]
    digest = hashlib.sha256()
    done = 0
    for case in cases:
        for line in lines[done : case.line]:
            digest.update(line + b"\n")
        done = case.line
        found.append(digest.copy().hexdigest()[:DIGEST_HEX])
    return found


def start(
    entries: list[LedgerEntry],
    revision: str,
    threshold: str,
    confidence: Decimal,
    digests: list[str],
) -> TestStart:
    """The test this evaluation continues, or a new one (and why the earlier one was not)."""
    fresh = SequentialGate(threshold=float(threshold), side="min", alpha=alpha_of(confidence))
    prior = next((e for e in entries if e.revision == revision), None)
    if prior is None:
        return TestStart(fresh, 0, 0, confidence)
    why = None
    if Decimal(prior.threshold) != Decimal(threshold):
        why = f"minAccuracy changed from {prior.threshold}: a new test"
    elif prior.cases >= len(digests):
        why = (
            f"the dataset (or maxCases) now gives fewer cases than the {prior.cases} the "
            "earlier test counted: a new test on this dataset"
        )
    elif digests[prior.cases] != prior.dataset_prefix:
        why = (
            f"the dataset no longer starts with the {prior.cases} cases the earlier test "
            "counted: a new test on this dataset"
        )
    if why is not None:
        return TestStart(fresh, 0, 0, confidence, why)
    strictest = max(confidence, Decimal(prior.confidence))
    return TestStart(_restored(prior, strictest), prior.cases, prior.evaluations, strictest)


def _restored(prior: LedgerEntry, confidence: Decimal) -> SequentialGate:
    n, total, squares = prior.cases, float(prior.total), float(prior.squares)
    return SequentialGate(
        threshold=float(prior.threshold),
        side="min",
        alpha=alpha_of(confidence),
        passer=Bettor(1, float(prior.pass_log_wealth), n, total, squares),
        failer=Bettor(-1, float(prior.fail_log_wealth), n, total, squares),
    )


def entry_of(
    begun: TestStart,
    gate: SequentialGate,
    revision: str,
    threshold: str,
    digests: list[str],
) -> LedgerEntry:
    """The ledger entry once this evaluation fed ``gate`` its cases."""
    assert gate.passer is not None and gate.failer is not None
    passing, failing = gate.evidence()
    return LedgerEntry(
        revision=revision,
        threshold=threshold,
        confidence=str(begun.confidence),
        dataset_prefix=digests[gate.cases],
        cases=gate.cases,
        this_evaluation=gate.cases - begun.offset,
        dataset_cases=len(digests) - 1,
        evaluations=begun.evaluations + 1,
        verdict=gate.verdict(),
        pass_evidence=_wealth(passing),
        fail_evidence=_wealth(failing),
        needed=_wealth(1 / gate.alpha),
        restarted=begun.restarted,
        total=repr(gate.passer.total),
        squares=repr(gate.passer.squares),
        pass_log_wealth=repr(gate.passer.log_wealth),
        fail_log_wealth=repr(gate.failer.log_wealth),
    )


def with_entry(entries: list[LedgerEntry], entry: LedgerEntry) -> list[LedgerEntry]:
    """``entry`` first, the other revisions' after it, at most :data:`LEDGER_REVISIONS`."""
    others = [e for e in entries if e.revision != entry.revision]
    return [entry, *others][:LEDGER_REVISIONS]


def _wealth(value: float) -> str:
    if value >= 1e6:
        return f"{value:.3g}"
    return f"{value:.4g}"

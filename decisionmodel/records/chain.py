"""Verify a DecisionModel's records: each signature, each subject, and the chain.

Each record names the sha256 of the previous record's envelope; sequences start at 1 and
have no gaps. So a record altered by one byte fails its signature, one removed from the
middle leaves a gap and a ``previous`` that names nothing kept, one signed by another key
names another key id. The newest record's removal is seen against the head the DecisionModel's
status keeps (``status.decisionRecords``), when the caller passes it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric import ec

from decisionmodel.records.dsse import RecordProblem, open_envelope
from decisionmodel.records.statement import DecisionPredicate, read_statement


@dataclass(frozen=True)
class StoredRecord:
    name: str  # where it is kept (a ConfigMap's name)
    envelope: bytes


@dataclass(frozen=True)
class VerifiedRecord:
    name: str
    digest: str  # "sha256:<hex>" of the envelope
    predicate: DecisionPredicate

    def line(self) -> str:
        p = self.predicate
        approval = f", approved by {p.approval.by or 'unknown'}" if p.approval else ""
        return (
            f"#{p.sequence} {p.recorded_at} {p.decision} revision {p.revision.hash} "
            f"({p.revision.model}@sha256:{p.revision.digest[:12]}…) {p.reason}{approval} "
            f"[{self.name}]"
        )


@dataclass
class ChainReport:
    records: list[VerifiedRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def envelope_digest(envelope: bytes) -> str:
    return "sha256:" + hashlib.sha256(envelope).hexdigest()


def verify_chain(
    stored: list[StoredRecord],
    key: ec.EllipticCurvePublicKey,
    head: tuple[int, str] | None = None,
) -> ChainReport:
    """Every record of one DecisionModel (one uid); ``head``: the newest (sequence, digest)
    the DecisionModel's status names, when known."""
    report = ChainReport()
    for s in stored:
        try:
            predicate = read_statement(open_envelope(s.envelope, key))
        except RecordProblem as e:
            report.problems.append(f"record {s.name}: {e}")
            continue
        report.records.append(VerifiedRecord(s.name, envelope_digest(s.envelope), predicate))
    report.records.sort(key=lambda r: r.predicate.sequence)
    report.problems.extend(_chain_problems(report.records))
    if head is not None:
        report.problems.extend(_head_problems(report.records, *head))
    return report


def _chain_problems(records: list[VerifiedRecord]) -> list[str]:
    problems = []
    uids = {r.predicate.decision_model.uid for r in records}
    if len(uids) > 1:
        problems.append(f"records of {len(uids)} DecisionModels mixed in one chain")
    before: VerifiedRecord | None = None
    for r in records:
        seq, previous = r.predicate.sequence, r.predicate.previous
        if before is None:
            if seq != 1:
                problems.append(
                    f"records #1 to #{seq - 1} are missing (removed from the chain): the first "
                    f"kept, {r.name}, is #{seq}"
                )
            elif previous is not None:
                problems.append(f"record {r.name} is #1 but names a previous record")
        elif seq == before.predicate.sequence:
            problems.append(f"records {before.name} and {r.name} are both #{seq}")
        elif seq != before.predicate.sequence + 1:
            gap = f"#{before.predicate.sequence + 1} to #{seq - 1}"
            problems.append(
                f"record(s) {gap} are missing (removed from the chain): {r.name} (#{seq}) "
                f"follows {before.name} (#{before.predicate.sequence})"
            )
        elif previous != before.digest:
            problems.append(
                f"record {r.name} (#{seq}) names previous {previous}, but #{seq - 1} "
                f"({before.name}) is {before.digest}: replaced"
            )
        before = r
    return problems


def _head_problems(records: list[VerifiedRecord], sequence: int, digest: str) -> list[str]:
    newest = records[-1] if records else None
    if newest is None or newest.predicate.sequence < sequence:
        kept = f"#{newest.predicate.sequence}" if newest else "none"
        return [
            f"the newest record, #{sequence} ({digest}), is missing (removed): the "
            f"DecisionModel's status names it, the newest kept is {kept}"
        ]
    match = next((r for r in records if r.predicate.sequence == sequence), None)
    if match is not None and match.digest != digest:
        return [f"record #{sequence} ({match.name}) is not the one status names ({digest})"]
    return []

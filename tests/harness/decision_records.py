"""A decision record's predicate for the records tests (unit and cosign)."""

from __future__ import annotations

from decisionmodel.records.statement import (
    DecisionPredicate,
    RecordedBuilds,
    RecordedModel,
    RecordedRevision,
    RecordedRun,
)

DIGEST = "ab" * 32


def predicate(sequence: int, previous: str | None, decision: str = "Promote") -> DecisionPredicate:
    return DecisionPredicate(
        decision_model=RecordedModel(namespace="ns", name="dm", uid="u-1"),
        sequence=sequence,
        previous=previous,
        decision=decision,  # type: ignore[arg-type]
        reason="Promoted",
        message="evaluation Passed",
        revision=RecordedRevision(hash=f"rev{sequence}", model="laya:en", digest=DIGEST),
        policy={"promotion": "Automatic"},
        policy_digest="0" * 16,
        run=RecordedRun(workflow_id="rollout/ns/dm/rev", run_id=f"run-{sequence}"),
        builds=RecordedBuilds(worker="1.0", controller="1.0"),
        recorded_at="2026-12-07T00:00:00+00:00",
    )

"""The status models: wire names, round trip, enums."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from decisionmodel.api import (
    DecisionModelStatus,
    EvaluationResult,
    FailedRevisionStatus,
    Phase,
)

STATUS_WIRE = {
    "phase": "RolledBack",
    "phaseTransitionTime": "2026-10-02T12:00:00Z",
    "lastPromotionTime": "2026-10-01T08:00:00Z",
    "observedGeneration": 3,
    "endpoint": "http://support-router.default.svc:11435/v1/systemone",
    "stableRevision": {
        "hash": "7c9f0a1b2c3d4e5f",
        "engine": "ollaya",
        "model": "laya:en",
        "digest": "c305bd41e2f5f0b4d1b2dcb5f9a1e3c7a4d6e8f0b2c4d6e8f0a2c4e6a8b0c2d4",
        "device": "cpu",
        "precision": "F32",
    },
    "failedRevision": {
        "hash": "1111222233334444",
        "model": "laya:multilingual",
        "reason": "EvaluationFailed",
        "message": "accuracy 0.8000 < minAccuracy 0.90",
        "failedAt": "2026-10-02T12:00:00Z",
    },
    "lastRetryToken": "1",
    "replicas": {"desired": 2, "modelReady": 2},
    "evaluation": {
        "accuracy": "0.8000",
        "baselineAccuracy": "0.9300",
        "cases": 500,
        "failedCases": 100,
        "ece": "0.0400",
        "baselineEce": "0.0300",
        "brier": "0.1000",
        "gates": {"minAccuracy": "0.90", "maxECE": "0.1"},
        "result": "Failed",
        "completedAt": "2026-10-02T11:59:00Z",
    },
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": 3,
            "lastTransitionTime": "2026-10-01T08:00:00Z",
            "reason": "CandidateRejected",
            "message": "candidate 1111222233334444 failed evaluation; stable keeps serving",
        }
    ],
}


def test_status_round_trip() -> None:
    status = DecisionModelStatus.model_validate(STATUS_WIRE)
    assert status.phase is Phase.ROLLED_BACK
    assert status.phase_transition_time == datetime(2026, 10, 2, 12, tzinfo=UTC)
    assert isinstance(status.failed_revision, FailedRevisionStatus)
    assert status.failed_revision.reason == "EvaluationFailed"
    assert status.evaluation is not None
    assert status.evaluation.result is EvaluationResult.FAILED
    assert status.evaluation.gates is not None and status.evaluation.gates.max_ece == "0.1"
    assert status.replicas is not None and status.replicas.model_ready == 2
    assert status.to_wire() == STATUS_WIRE


def test_empty_status() -> None:
    assert DecisionModelStatus().to_wire() == {"conditions": []}


def test_explicit_nulls_for_merge_patches() -> None:
    wire = DecisionModelStatus(phase=Phase.READY).to_wire(exclude_none=False)
    assert wire["candidateRevision"] is None
    assert wire["phase"] == "Ready"


@pytest.mark.parametrize(
    "patch",
    [
        {"phase": "Running"},
        {"evaluation": {"result": "Maybe"}},
        {"evaluation": {"accuracy": "high"}},
        {"stableRevision": {"model": "laya:en"}},  # hash is required
        {"stableRevision": {"hash": "x", "digest": "abc"}},
        {"replicas": {"desired": -1}},
        {"conditions": [{"type": "Ready", "status": "Yes", "reason": "Serving"}]},
    ],
)
def test_invalid_status_is_refused(patch: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DecisionModelStatus.model_validate(patch)


def test_phases_are_the_reference_list() -> None:
    assert [p.value for p in Phase] == [
        "Pending",
        "Resolving",
        "Caching",
        "Starting",
        "Evaluating",
        "AwaitingPromotion",
        "Promoting",
        "Ready",
        "Degraded",
        "Failed",
        "RolledBack",
    ]

"""The rollout's share of DecisionModel status (kube.rollout_status.build_rollout_status): pure.

Moved from tests/integration/test_activities_objects.py, where the cluster marker kept it out
of ``make unit``; what it asserts is unchanged.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from decisionmodel.rollout.contracts import (
    ConditionUpdate,
    DMRef,
    EvaluationOutcome,
    Phase,
    RevisionRecord,
    StatusUpdate,
)
from kube.rollout_status import build_rollout_status, entered


def test_build_rollout_status_keeps_times_of_repeated_writes() -> None:
    t0 = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    t1 = t0 + timedelta(minutes=5)
    old = RevisionRecord(hash="aaaa", model="laya:en", digest="a" * 64)
    new = RevisionRecord(hash="bbbb", model="laya:en", digest="b" * 64)
    dm = DMRef(namespace="ns", name="router", uid="u", generation=3)
    current = {
        "phase": "Evaluating",
        "phaseTransitionTime": "2030-01-01T11:00:00Z",
        "stableRevision": old.to_status(),
        "candidateRevision": new.to_status(),
        "observedGeneration": 3,  # the controller's: never in the rollout's applied set
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Serving"},
            {"type": "Resolved", "status": "True", "reason": "DigestResolved",
             "lastTransitionTime": "2030-01-01T10:00:00Z", "observedGeneration": 2},
        ],
    }  # fmt: skip
    outcome = EvaluationOutcome(
        result="Passed", reason="GatesPassed", message="ok", accuracy="0.9200",
        ece="0.0500", brier="0.0700", cases=10, failed_cases=1, dataset_digest="d" * 64,
    )  # fmt: skip
    same_phase = build_rollout_status(
        current,
        StatusUpdate(dm=dm, phase=Phase.EVALUATING, evaluation=outcome,
                     evaluation_gates={"minAccuracy": "0.9", "maxCases": "10"}),
        3, t1,
    )  # fmt: skip
    assert same_phase["phaseTransitionTime"] == "2030-01-01T11:00:00Z"
    assert "observedGeneration" not in same_phase
    assert [c["type"] for c in same_phase["conditions"]] == ["Resolved"]
    assert same_phase["evaluation"] == {
        "revision": "bbbb", "accuracy": "0.9200", "cases": 10, "failedCases": 1,
        "ece": "0.0500", "brier": "0.0700", "result": "Passed", "reason": "GatesPassed",
        "gates": {"minAccuracy": "0.9", "maxCases": 10}, "completedAt": "2030-01-01T12:05:00Z",
    }  # fmt: skip
    # The same evaluation again later keeps completedAt.
    repeat = build_rollout_status(
        {**current, "evaluation": same_phase["evaluation"]},
        StatusUpdate(dm=dm, evaluation=outcome),
        3, t1 + timedelta(minutes=1),
    )  # fmt: skip
    assert repeat["evaluation"]["completedAt"] == "2030-01-01T12:05:00Z"

    promoted = build_rollout_status(
        current,
        StatusUpdate(
            dm=dm, phase=Phase.READY, stable=new, previous_revision="aaaa", clear_candidate=True,
            promoted=True,
            conditions=[
                ConditionUpdate(type="Promoted", status="True", reason="Promoted"),
                ConditionUpdate(
                    type="Resolved", status="True", reason="DigestResolved", message="m"
                ),
                ConditionUpdate(type="Ready", status="True", reason="Serving"),  # not ours
            ],
        ),
        4, t1,
    )  # fmt: skip
    assert promoted["phaseTransitionTime"] == "2030-01-01T12:05:00Z"
    assert promoted["previousRevision"] == old.to_status()
    assert promoted["stableRevision"]["hash"] == "bbbb"
    assert "candidateRevision" not in promoted
    assert promoted["lastPromotionTime"] == "2030-01-01T12:05:00Z"
    conds = {c["type"]: c for c in promoted["conditions"]}
    assert set(conds) == {"Resolved", "Promoted"}
    # Status unchanged: the transition time stays, the generation and message move on.
    assert conds["Resolved"]["lastTransitionTime"] == "2030-01-01T10:00:00Z"
    assert (conds["Resolved"]["observedGeneration"], conds["Resolved"]["message"]) == (4, "m")
    assert conds["Promoted"]["lastTransitionTime"] == "2030-01-01T12:05:00Z"


def _guarded(phase: str, condition: str, reason: str, generation: int = 3) -> dict[str, object]:
    return {
        "phase": phase,
        "phaseTransitionTime": "2030-01-01T11:00:00Z",
        "conditions": [
            {"type": condition, "status": "False", "reason": reason, "message": "label it",
             "lastTransitionTime": "2030-01-01T11:00:00Z", "observedGeneration": generation},
        ],
    }  # fmt: skip


def test_a_retry_of_a_guard_held_step_leaves_the_guards_phase() -> None:
    """Issue 34: each attempt of a held step entered its phase again, and the controller put
    Degraded back: the phase flapped on every retry. While the guard of this generation holds
    the step, the phase stays; otherwise the step's phase is written as before."""
    t1 = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    dm = DMRef(namespace="ns", name="router", uid="u", generation=3)
    starting = StatusUpdate(dm=dm, phase=Phase.STARTING)
    held = _guarded("Degraded", "Promoted", "SecretNotAllowed")
    kept = entered(held, starting, 3, t1)
    assert kept["phase"] == "Degraded"
    assert kept["phaseTransitionTime"] == "2030-01-01T11:00:00Z"
    # A guard of an older generation, on another step's condition, or not a guard: entered.
    for current in (
        _guarded("Degraded", "Promoted", "SecretNotAllowed", generation=2),
        _guarded("Degraded", "Cached", "SecretNotAllowed"),
        _guarded("Degraded", "Promoted", "GuardCleared"),
        _guarded("Caching", "Promoted", "SecretNotAllowed"),
    ):
        assert entered(current, starting, 3, t1)["phase"] == "Starting", current
    caching = StatusUpdate(dm=dm, phase=Phase.CACHING)
    held_cache = _guarded("Degraded", "Cached", "SecretNotAllowed")
    assert entered(held_cache, caching, 3, t1)["phase"] == "Degraded"

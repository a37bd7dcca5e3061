"""Seed 001: a guard holding a step shows on Ready and Degraded, and a Secret guard outside the
evaluation puts the phase at Degraded; only for the spec's generation."""

from __future__ import annotations

from controller.reconciler.guard_status import guard_shown, held_by_guard, held_phase, show_held
from decisionmodel.api.status import Condition
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason
from kube.controller_status import Cond


def step(type_: str, reason: str, generation: int = 3, status: str = "False") -> Condition:
    return Condition.model_validate(
        {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": "label the Secret decisionmodel.io/api-key=true",
            "observedGeneration": generation,
            "lastTransitionTime": "2026-12-02T00:00:00Z",
        }
    )


def test_a_guard_of_this_generation_is_held_and_shown_on_ready_and_degraded() -> None:
    held = held_by_guard([step("Promoted", "SecretNotAllowed")], generation=3)
    assert held is not None
    serving = [Cond(ConditionType.READY, ConditionStatus.TRUE, Reason.SERVING, "")]
    shown = {c.type: c for c in show_held(serving, held)}
    assert (shown["Ready"].status, shown["Ready"].reason) == ("False", "SecretNotAllowed")
    assert (shown["Degraded"].status, shown["Degraded"].reason) == ("True", "SecretNotAllowed")
    assert "decisionmodel.io/api-key=true" in shown["Ready"].message
    assert held_phase(held) == "Degraded"


def test_a_dataset_secret_is_held_in_evaluating_and_a_conflict_keeps_the_phase() -> None:
    dataset = held_by_guard([step("Evaluated", "SecretNotAllowed")], generation=3)
    assert dataset is not None and held_phase(dataset) is None
    conflict = held_by_guard([step("Cached", "ResourceConflict")], generation=3)
    assert conflict is not None and held_phase(conflict) is None


def test_an_older_generation_a_failure_or_a_cleared_guard_is_not_held() -> None:
    assert held_by_guard([step("Promoted", "SecretNotAllowed", generation=2)], 3) is None
    assert held_by_guard([step("Evaluated", "EvaluationFailed")], 3) is None
    assert held_by_guard([step("Promoted", "GuardCleared", status="Unknown")], 3) is None


def test_a_guard_of_any_generation_keeps_the_run_looked_up() -> None:
    """Issue 34: after a spec change (a newer generation) the guard-held run must still be
    found (controller.reconciler.reconcile._running), else a second run starts beside it."""
    assert guard_shown([step("Promoted", "SecretNotAllowed", generation=2)])
    assert guard_shown([step("Cached", "ResourceConflict")])
    assert not guard_shown([step("Promoted", "GuardCleared", status="Unknown")])
    assert not guard_shown([step("Evaluated", "EvaluationFailed")])
    assert not guard_shown([step("Ready", "SecretNotAllowed")])

"""The phase the stable's health calls for when nothing rolls out (issue 22): health is never
hidden by a rolled-back history, and a rollout phase left behind when the spec came back to
the stable is ended."""

from __future__ import annotations

from controller.reconciler.reconcile import RolloutStep, steady_phase
from decisionmodel.vocabulary import Phase

IDLE = RolloutStep()
AT_STABLE = RolloutStep(at_stable=True)


def test_steady_phases_follow_health() -> None:
    assert steady_phase("Ready", IDLE, degraded=True, failed=False) == (Phase.DEGRADED, False)
    assert steady_phase("Degraded", IDLE, degraded=False, failed=False) == (Phase.READY, False)


def test_rolled_back_shows_a_stable_losing_replicas_then_comes_back() -> None:
    assert steady_phase("RolledBack", IDLE, degraded=True, failed=True) == (Phase.DEGRADED, False)
    assert steady_phase("Degraded", IDLE, degraded=False, failed=True) == (
        Phase.ROLLED_BACK,
        True,
    )


def test_a_rollout_phase_left_at_the_stable_ends_and_one_in_flight_stands() -> None:
    assert steady_phase("AwaitingPromotion", AT_STABLE, degraded=False, failed=False) == (
        Phase.READY,
        False,
    )
    in_flight = RolloutStep(in_flight=True)
    assert steady_phase("Evaluating", in_flight, degraded=False, failed=False) == (None, False)


def test_returning_the_spec_to_the_stable_ends_rolled_back() -> None:
    assert steady_phase("RolledBack", AT_STABLE, degraded=False, failed=True) == (
        Phase.READY,
        False,
    )

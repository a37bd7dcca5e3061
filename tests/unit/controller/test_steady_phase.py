"""The phase the stable's health calls for when nothing rolls out (issue 22): health is never
hidden by a rolled-back history, and a rollout phase left behind when the spec came back to
the stable is ended."""

from __future__ import annotations

from test_decide import dm

from controller.reconciler.reconcile import (
    RolloutStep,
    reconciling_condition,
    stalled_condition,
    steady_phase,
)
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


def test_stalled_only_while_the_spec_names_a_failure_nothing_retries() -> None:
    def failed(reason: str) -> dict[str, object]:
        return {"failedRevision": {"hash": "f1", "model": "laya:x", "reason": reason}}

    rejected = dm({"model": "laya:x"}, failed("EvaluationFailed"))
    shown = stalled_condition(rejected, IDLE, "RolledBack")
    assert shown is not None and (shown.type, shown.status, shown.reason) == (
        "Stalled",
        "True",
        "EvaluationFailed",
    )
    assert stalled_condition(rejected, IDLE, "Ready") is None
    assert stalled_condition(rejected, AT_STABLE, "RolledBack") is None
    assert (
        stalled_condition(dm({"model": "laya:x"}, failed("ModelNotFound")), IDLE, "Failed") is None
    )


def test_reconciling_while_the_spec_is_on_its_way_and_absent_once_current() -> None:
    model = dm({"model": "laya:x"}, {})
    shown = reconciling_condition(model, RolloutStep(in_flight=True), "Evaluating")
    assert shown is not None and (shown.type, shown.status, shown.reason) == (
        "Reconciling",
        "True",
        "Evaluating",
    )
    queued = reconciling_condition(model, RolloutStep(queued=True), "Pending")
    assert queued is not None and queued.reason == "RolloutQueued"
    # A run replaced for its policy is stopping and the revision starts again (explorer seed
    # 6013): said, not shown as the old run's AwaitingPromotion.
    replaced = reconciling_condition(model, RolloutStep(replaced=True, in_flight=True), "Pending")
    assert replaced is not None and replaced.reason == "PolicyMismatch"
    assert "approve that run once it awaits promotion" in replaced.message
    away = reconciling_condition(model, RolloutStep(temporal_down="temporal:7233"), "Ready")
    assert away is not None and away.reason == "TemporalUnavailable"
    # Current (the spec serves), refused (its own condition says what to change), or nothing
    # working on it (stalled: Stalled says so): absent.
    assert reconciling_condition(model, AT_STABLE, "Ready") is None
    assert reconciling_condition(model, RolloutStep(refusal="no", in_flight=True), "Ready") is None


def test_a_refused_spec_is_stalled_for_kstatus() -> None:
    """Issue 38: a refused placement carried no kstatus condition, so kstatus (Flux, Helm 4
    --wait) read it as Current; it is Stalled, naming the refusal and its fix."""
    model = dm({"model": "laya:x"}, {})
    step = RolloutStep(refusal="PlacementRefused: spec.replicas 9 exceeds 4; lower it")
    found = stalled_condition(model, step, "Ready")
    assert found is not None and (found.status, found.reason) == ("True", "PlacementRefused")
    assert "lower it" in found.message
    assert reconciling_condition(model, IDLE, "RolledBack") is None


def test_a_stranded_rollout_is_stalled_naming_the_fix_not_reconciling() -> None:
    """Issue 34: a run no worker can serve is not "rolling out"; Stalled carries the fix."""
    model = dm({"model": "laya:x"}, {})
    step = RolloutStep(in_flight=True, stranded="pinned to build 1.4.0 …: list it under draining")
    shown = stalled_condition(model, step, "AwaitingPromotion")
    assert shown is not None
    assert (shown.type, shown.status, shown.reason) == ("Stalled", "True", "RolloutStranded")
    assert shown.message == step.stranded
    assert reconciling_condition(model, step, "AwaitingPromotion") is None
    assert stalled_condition(model, RolloutStep(in_flight=True), "AwaitingPromotion") is None


def test_reconciling_says_when_the_held_candidate_is_not_fully_model_ready() -> None:
    """Issue 34: a candidate awaiting approval with a Pod not model-ready (replaced, lost its
    model) is shown on Reconciling, with the count and each Pod's reason; once whole, the
    phase is the reason again."""
    from controller.reconciler.reconcile import held_candidate_condition
    from controller.reconciler.steady import HeldCandidate

    model = dm({"model": "laya:x"}, {})
    held = reconciling_condition(model, RolloutStep(in_flight=True), "AwaitingPromotion")
    assert held is not None
    short = HeldCandidate("c1", desired=2, model_ready=1, not_ready=["p-2: starting"])
    shown = held_candidate_condition(held, short)
    assert (shown.type, shown.status, shown.reason) == (
        "Reconciling",
        "True",
        "ReplicasNotModelReady",
    )
    assert "c1" in shown.message and "1/2" in shown.message and "p-2: starting" in shown.message
    assert "approval is refused" in shown.message
    whole = HeldCandidate("c1", desired=2, model_ready=2)
    assert held_candidate_condition(held, whole) == held
    away = reconciling_condition(model, RolloutStep(temporal_down="t:7233"), "AwaitingPromotion")
    assert away is not None and held_candidate_condition(away, short) == away

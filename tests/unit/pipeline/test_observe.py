"""What a stage reads off its cluster's DecisionModel after applying generation G (issue 25)."""

from __future__ import annotations

from typing import Any

from decisionmodel.pipeline.observe import observe, rollout_verdict, stage_health
from decisionmodel.vocabulary import RolloutResult, StageReason, StageState

G = 3


def dm(
    generation: int,
    *conditions: tuple[str, str, int],
    rollout: str | None = None,
    stable: str | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": [
            {"type": t, "status": s, "reason": "R", "message": "m", "observedGeneration": g}
            for t, s, g in conditions
        ],
    }
    if rollout:
        status["rollout"] = {"workflowId": rollout, "runId": "run"}
    if stable:
        status["stableRevision"] = {"hash": "h", "digest": stable}
    return {"status": status}


def test_not_seen_yet_is_undecided() -> None:
    assert observe(dm(G - 1), G) is None


def test_the_rollout_of_the_applied_generation_is_found_by_its_first_step() -> None:
    seen = observe(
        dm(G, ("Reconciling", "True", G), ("Resolved", "True", G), rollout="rollout/ns/m/new"), G
    )
    assert seen is not None and seen.rollout_workflow_id == "rollout/ns/m/new"
    assert seen.state is None


def test_a_rollout_of_an_earlier_generation_is_not_ours() -> None:
    """The controller took G up (Reconciling) but its rollout has not written yet: status.rollout
    still names the earlier generation's run, which a retried apply must not take for G's."""
    earlier = dm(G, ("Reconciling", "True", G), ("Resolved", "True", G - 1), rollout="rollout/old")
    assert observe(earlier, G) is None


def test_a_refused_spec_fails_the_stage() -> None:
    seen = observe(dm(G, ("Stalled", "True", G)), G)
    assert seen is not None and seen.state == StageState.FAILED


def test_nothing_to_roll_out_is_promoted_only_when_the_freight_serves() -> None:
    quiet = ("Ready", "True", G), ("Resolved", "True", G - 1)
    seen = observe(dm(G, *quiet, rollout="old", stable="a" * 64), G, "a" * 64)
    assert seen is not None and seen.state == StageState.PROMOTED
    assert seen.rollout_workflow_id == ""
    # Not Reconciling, not Stalled, but other bytes serve (a refused spec, a failed revision):
    # never taken for a promotion.
    assert observe(dm(G, *quiet, rollout="old", stable="b" * 64), G, "a" * 64) is None
    assert observe(dm(G, *quiet, rollout="old"), G, "a" * 64) is None


def test_rollout_results_map_to_stage_states() -> None:
    assert rollout_verdict(RolloutResult.PROMOTED) == StageState.PROMOTED
    assert rollout_verdict(RolloutResult.ABORTED) == StageState.ABORTED
    for failed in (RolloutResult.ROLLED_BACK, RolloutResult.FAILED, RolloutResult.SUPERSEDED):
        assert rollout_verdict(failed) == StageState.FAILED


FREIGHT = "a" * 64


def test_a_promoted_stage_that_serves_the_freight_healthy_is_serving() -> None:
    assert stage_health(dm(G, ("Degraded", "False", G), stable=FREIGHT), "ns", "m", FREIGHT).serving


def test_a_stage_rolled_back_or_degraded_during_a_soak_is_not_serving() -> None:
    rolled_back = stage_health(dm(G, stable="b" * 64), "ns", "m", FREIGHT)
    assert not rolled_back.serving and rolled_back.reason == StageReason.UNHEALTHY
    assert "serves sha256:bbbbbbbbbbbb, not the freight sha256:aaaaaaaaaaaa" in rolled_back.message
    degraded = stage_health(dm(G, ("Degraded", "True", G), stable=FREIGHT), "ns", "m", FREIGHT)
    assert not degraded.serving and "Degraded (R: m)" in degraded.message
    gone = stage_health(None, "ns", "m", FREIGHT)
    assert not gone.serving and "DecisionModel ns/m is gone" in gone.message

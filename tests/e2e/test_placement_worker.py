"""The worker's own placement guard (issue 12, point 3, defence in depth): a workflow started by
hand with a placement the operator refuses fails for good with PlacementRefused before any
object exists. The workflow input is not trusted: the controller's check is not the only wall."""

from __future__ import annotations

from harness.rollout_harness import RolloutHarness

from decisionmodel.rollout.contracts import RolloutResult


async def test_a_hand_started_rollout_with_a_control_plane_toleration_fails_for_good(
    harness: RolloutHarness,
) -> None:
    harness.create_dm("byhand", {"model": "laya:en"})
    toleration = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
    inp = harness.input_for("byhand")
    revision = inp.revision.model_copy(update={"scheduling": {"tolerations": [toleration]}})
    outcome = await harness.rollout("byhand", revision=revision)
    assert outcome.result == RolloutResult.FAILED, outcome
    assert outcome.reason == "PlacementRefused"
    assert "spec.scheduling.tolerations[0].key" in (outcome.message or "")
    failed = harness.status("byhand")["failedRevision"]
    assert failed["reason"] == "PlacementRefused"
    for kind in ("deployment", "job", "pvc", "pod"):
        assert harness.names(kind) == [], kind

"""The post-promotion watch (issue 11, beyond the reference): with spec.rollout.
postPromotionWatch set, the previous revision keeps running for the window; a new stable that
fails its readiness gate inside it loses the Service to the previous revision again, and the
DecisionModel says why. Only a real reason does that (issue 22): a scale-down or a Pod being
replaced inside the window keeps the promotion."""

from __future__ import annotations

import pytest
from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, RolloutHarness


def selected(h: RolloutHarness, name: str) -> str | None:
    service = h.get("Service", name) or {}
    return ((service.get("spec") or {}).get("selector") or {}).get("decisionmodel.io/revision")


async def promoted_again(
    ctl: RolloutHarness, spec: dict[str, object], name: str = "watched"
) -> tuple[str, str]:
    """``name`` Ready with ``spec``, then a new model promoted: (previous, new) revisions."""
    ctl.create_dm(name, spec)
    await eventually(lambda: ctl.status(name).get("phase") == "Ready", 120, what="Ready")
    old = ctl.status(name)["stableRevision"]["hash"]

    ctl.update_spec(name, {"model": "laya:multilingual"})
    new = await eventually(
        lambda: (
            s["hash"]
            if (s := ctl.status(name).get("stableRevision")) and s["hash"] != old
            else None
        ),
        120,
        what="the new revision promoted",
    )
    assert selected(ctl, name) == new
    # In the window the previous revision is still there to go back to.
    assert ctl.pods(name, old), "the previous revision was deleted inside the watch"
    return old, new


@pytest.mark.parametrize(
    "fault", ["lose-model=true", "digest=sha256:" + "e" * 64], ids=["model-lost", "digest"]
)
async def test_a_new_stable_failing_its_gate_in_the_window_is_switched_back(
    ctl: RolloutHarness, fault: str
) -> None:
    spec = {"model": "laya:en", "replicas": 2, "rollout": {"postPromotionWatch": "10m"}}
    old, new = await promoted_again(ctl, spec)
    for pod in ctl.pods("watched", new):
        ctl.kubectl("annotate", "pod", pod["metadata"]["name"], f"{SIM_PREFIX}{fault}")

    failed = await eventually(
        lambda: ctl.status("watched").get("failedRevision"), 60, what="switched back"
    )
    status = ctl.status("watched")
    assert failed["hash"] == new and failed["reason"] == "PostPromotionGateFailed"
    assert f"selects revision {old} again" in failed["message"]
    assert status["phase"] == "RolledBack"
    assert status["stableRevision"]["hash"] == old
    assert selected(ctl, "watched") == old
    promoted = ctl.condition("watched", "Promoted")
    assert promoted["status"] == "False" and "PostPromotionGateFailed" in promoted["message"]
    # The failed revision's objects go; the restored stable keeps its Deployment.
    await eventually(lambda: not ctl.pods("watched", new), 60, what="new revision deleted")
    assert ctl.get("Deployment", f"watched-{old}") is not None


async def test_a_scale_down_and_a_pod_replaced_in_the_window_keep_the_promotion(
    ctl: RolloutHarness,
) -> None:
    spec = {"model": "laya:en", "replicas": 3, "rollout": {"postPromotionWatch": "1m"}}
    old, new = await promoted_again(ctl, spec, "scaled")
    # What an HPA or an operator does right after a promotion: fewer replicas, and one Pod
    # replaced (its successor warms up while the watch looks). The Pod is deleted before the
    # scale-down: after it, the ReplicaSet may already have deleted the one picked (CI, loaded).
    ctl.kubectl("delete", "pod", ctl.pods("scaled", new)[0]["metadata"]["name"], "--wait=false")
    ctl.kubectl("scale", "dm/scaled", "--replicas=2")

    # The watch ends (the previous revision is deleted after it) with the promotion kept.
    await eventually(lambda: not ctl.pods("scaled", old), 180, what="the watch over")
    status = ctl.status("scaled")
    assert status["phase"] == "Ready", status
    assert status["stableRevision"]["hash"] == new
    assert "failedRevision" not in status, status["failedRevision"]
    assert selected(ctl, "scaled") == new

"""The post-promotion watch (issue 11, beyond the reference): with spec.rollout.
postPromotionWatch set, the previous revision keeps running for the window; a new stable that
fails its readiness gate inside it loses the Service to the previous revision again, and the
DecisionModel says why."""

from __future__ import annotations

from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, RolloutHarness


def selected(h: RolloutHarness, name: str) -> str | None:
    service = h.get("Service", name) or {}
    return ((service.get("spec") or {}).get("selector") or {}).get("decisionmodel.io/revision")


async def test_a_new_stable_failing_its_gate_in_the_window_is_switched_back(
    ctl: RolloutHarness,
) -> None:
    spec = {"model": "laya:en", "rollout": {"postPromotionWatch": "10m"}}
    ctl.create_dm("watched", spec)
    await eventually(lambda: ctl.status("watched").get("phase") == "Ready", 120, what="Ready")
    old = ctl.status("watched")["stableRevision"]["hash"]

    ctl.update_spec("watched", {"model": "laya:multilingual"})
    new = await eventually(
        lambda: (
            s["hash"]
            if (s := ctl.status("watched").get("stableRevision")) and s["hash"] != old
            else None
        ),
        120,
        what="the new revision promoted",
    )
    assert selected(ctl, "watched") == new
    # In the window the previous revision is still there to go back to.
    assert ctl.pods("watched", old), "the previous revision was deleted inside the watch"

    pod = ctl.pods("watched", new)[0]["metadata"]["name"]
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}lose-model=true")

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

"""Pods a step waits for that the cluster cannot start (issue 34): a prefetch Pod or candidate
Pods the scheduler cannot place show on the step's condition at once (PodsUnschedulable, with
the scheduler's words and the fix), not only as CacheTimeout/StartTimeout at the deadline; the
step goes on by itself once a node fits, and a fixed spec rolls on leaving nothing behind."""

from __future__ import annotations

import json

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness

NODE = "kwok-cpu-0"


def unschedulable(h: RolloutHarness, name: str, condition: str) -> str | None:
    found = h.held(name, condition, "PodsUnschedulable")
    return str(found["message"]) if found is not None else None


async def test_a_prefetch_pod_no_node_fits_shows_on_cached_and_goes_on_once_one_does(
    ctl: RolloutHarness,
) -> None:
    key = f"dmrollout.dev/test-{ctl.namespace}"
    spec = {"model": "laya:en", "scheduling": {"nodeSelector": {key: "yes"}}}
    ctl.create_dm("unplaced", spec)
    await eventually(
        lambda: unschedulable(ctl, "unplaced", "Cached") is not None, 60, what="shown on Cached"
    )
    message = unschedulable(ctl, "unplaced", "Cached") or ""
    assert "unschedulable: 0/" in message, message  # the scheduler's own words
    assert "spec.scheduling" in message and "CacheTimeout" in message, message
    assert ctl.status("unplaced").get("phase") == "Caching"
    events = json.loads(ctl.kubectl("get", "events", "-o", "json"))["items"]
    assert "PodsUnschedulable" in [e.get("reason") for e in events if e.get("type") == "Warning"]
    ctl.cluster.kubectl("label", "node", NODE, f"{key}=yes")
    try:
        await eventually(
            lambda: ctl.status("unplaced").get("phase") == "Ready", 150, what="Ready once placed"
        )
        assert ctl.condition("unplaced", "Cached").get("status") == "True"
    finally:
        ctl.cluster.kubectl("label", "node", NODE, f"{key}-")


async def test_candidate_pods_no_node_can_hold_show_on_promoted_and_a_fixed_spec_rolls_on(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("too-big", {"model": "laya:en", "resources": {"requests": {"cpu": "9000"}}})
    await eventually(
        lambda: unschedulable(ctl, "too-big", "Promoted") is not None, 120, what="shown"
    )
    message = unschedulable(ctl, "too-big", "Promoted") or ""
    assert "Insufficient cpu" in message and "StartTimeout" in message, message
    assert ctl.status("too-big").get("phase") == "Starting"
    held = ctl.status("too-big")["candidateRevision"]["hash"]
    ctl.update_spec("too-big", {"resources": {"requests": {"cpu": "1"}}})
    await eventually(lambda: ctl.status("too-big").get("phase") == "Ready", 150, what="Ready")
    await eventually(
        lambda: ctl.get("deployment", f"too-big-{held}") is None, 60, what="nothing left behind"
    )

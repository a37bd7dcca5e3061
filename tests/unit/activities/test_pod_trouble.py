"""Why the Pods a step waits for cannot start, from what the scheduler and kubelet wrote."""

from __future__ import annotations

from typing import Any

from decisionmodel.rollout.pod_trouble import pod_trouble
from decisionmodel.vocabulary import Reason

SCHEDULER_SAYS = "0/2 nodes are available: 1 Too many pods, 1 node(s) didn't match selector."


def pod(name: str, *, scheduled: str | None = None, waiting: str | None = None,
        deleting: bool = False) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name} | ({"deletionTimestamp": "now"} if deleting else {})
    status: dict[str, Any] = {"phase": "Pending"}
    if scheduled is not None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": scheduled,
             "message": SCHEDULER_SAYS}
        ]  # fmt: skip
    if waiting is not None:
        state = {"waiting": {"reason": waiting, "message": "pull access denied for x"}}
        status["containerStatuses"] = [{"name": "ollaya", "state": state}]
    return {"metadata": meta, "status": status}


def test_an_unschedulable_pod_is_named_with_the_scheduler_s_words_and_the_fix() -> None:
    found = pod_trouble([pod("a", scheduled="Unschedulable"), pod("b")])
    assert found is not None and found.reason == Reason.PODS_UNSCHEDULABLE
    message = found.message("prefetch Job j cannot start its Pod", "timeouts.caching")
    assert f"Pod a unschedulable: {SCHEDULER_SAYS}" in message
    assert "spec.scheduling" in message and "ends at timeouts.caching" in message
    assert "Pod b" not in message


def test_a_container_that_cannot_start_is_named_after_scheduling() -> None:
    found = pod_trouble([pod("a", waiting="ImagePullBackOff")])
    assert found is not None and found.reason == Reason.PODS_NOT_STARTING
    assert found.pods == ("Pod a container ollaya ImagePullBackOff (pull access denied for x)",)
    both = pod_trouble([pod("a", waiting="ErrImagePull"), pod("b", scheduled="Unschedulable")])
    assert both is not None and both.reason == Reason.PODS_UNSCHEDULABLE  # placed first


def test_pods_that_are_merely_on_their_way_are_no_trouble() -> None:
    assert pod_trouble([]) is None
    assert pod_trouble([pod("a"), pod("b", waiting="ContainerCreating")]) is None
    assert pod_trouble([pod("a", scheduled="SchedulingGated")]) is None
    assert pod_trouble([pod("gone", scheduled="Unschedulable", deleting=True)]) is None


def test_at_most_five_pods_are_named() -> None:
    found = pod_trouble([pod(f"p{i}", scheduled="Unschedulable") for i in range(9)])
    assert found is not None and len(found.pods) == 5
    assert len(found.message("x", "y")) <= 1000

"""The stable keeps its placement when it is restored after spec.scheduling moved on to a
candidate's (issue 11, point 10): it is rendered from its recorded constraints."""

from __future__ import annotations

import json

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness

CPU_NODES = {"dmrollout.dev/node-class": "cpu"}


def node_selector(h: RolloutHarness, deployment: str) -> dict[str, str] | None:
    obj = h.get("deployment", deployment)
    if obj is None:
        return None
    selector: dict[str, str] = obj["spec"]["template"]["spec"].get("nodeSelector") or {}
    return selector


async def test_a_restored_stable_keeps_its_recorded_placement(ctl: RolloutHarness) -> None:
    spec = {
        "model": "laya:en",
        "scheduling": {"nodeSelector": CPU_NODES},
        "rollout": {"promotion": "Manual"},
    }
    ctl.create_dm("placed", spec)
    await eventually(lambda: ctl.status("placed").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("placed")["stableRevision"]
    assert stable["scheduling"]["nodeSelector"] == CPU_NODES
    name = f"placed-{stable['hash']}"
    # The spec's placement moves on: a candidate is held, the stable still serves.
    ctl.update_spec("placed", {"scheduling": {"nodeSelector": {"kubernetes.io/os": "linux"}}})
    await eventually(
        lambda: ctl.status("placed").get("phase") == "AwaitingPromotion", 120, what="held"
    )
    ctl.kubectl("delete", "deployment", name, "--wait=true")
    await eventually(lambda: node_selector(ctl, name) is not None, 60, what="restored")
    assert node_selector(ctl, name) == CPU_NODES, json.dumps(ctl.get("deployment", name))

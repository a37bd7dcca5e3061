"""The placement guard (issue 12, point 3): a placement or a replica count outside the
operator's policy starts nothing, shows at once as Degraded=True PlacementRefused naming the
field, the value and the setting that allows it, leaves the stable serving, and goes on by
itself once the spec is fixed; every emptyDir dmrollout renders has a sizeLimit.

The controller and worker of these tests run with the default policy
(decisionmodel/rollout/settings.py):
any taint key but the protected ones, at most 10 replicas, emptyDirs of 1Gi.
"""

from __future__ import annotations

import json
from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness
from temporalio.service import RPCError
from test_controller import phase

from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import workflow_id
from decisionmodel.rollout.dispatch import DispatchSettings, desired_revision
from decisionmodel.rollout.spec_mapping import dm_ref

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"


def refused(h: RolloutHarness, name: str) -> dict[str, Any] | None:
    found = h.condition(name, "Degraded")
    if (found.get("status"), found.get("reason")) == ("True", "PlacementRefused"):
        return found
    return None


async def never_started(h: RolloutHarness, name: str) -> bool:
    """No workflow exists for the revision the live spec asks for (asked by ID, not through
    visibility, which may lag a start)."""
    dm = DecisionModel.from_k8s(h.dm(name))
    wid = workflow_id(dm_ref(dm), desired_revision(dm, DispatchSettings()).requested_hash)
    try:
        await h.client.get_workflow_handle(wid).describe()
    except RPCError:
        return True
    return False


def warning_reasons(h: RolloutHarness) -> list[str]:
    events = json.loads(h.kubectl("get", "events", "-o", "json"))["items"]
    return [e.get("reason", "") for e in events if e.get("type") == "Warning"]


def pod_tolerations(h: RolloutHarness, name: str) -> list[str]:
    """Toleration keys of every Pod of the DecisionModel (serving and prefetch)."""
    out = h.kubectl("get", "pods", "-l", f"decisionmodel.io/name={name}", "-o", "json")
    return [
        str(t.get("key", ""))
        for pod in json.loads(out)["items"]
        for t in pod["spec"].get("tolerations") or []
    ]


async def test_a_control_plane_toleration_is_refused_the_stable_serves_and_the_fix_rolls(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("cp", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "cp") == "Ready", 90, what="Ready")
    stable = ctl.status("cp")["stableRevision"]["hash"]
    toleration = {"key": CONTROL_PLANE, "operator": "Exists", "effect": "NoSchedule"}
    ctl.update_spec("cp", {"scheduling": {"tolerations": [toleration]}})

    shown = await eventually(lambda: refused(ctl, "cp"), 30, what="PlacementRefused")
    message = shown["message"]
    assert "spec.scheduling.tolerations[0].key" in message
    assert CONTROL_PLANE in message
    assert "DMROLLOUT_ALLOWED_TOLERATION_KEYS" in message
    assert await never_started(ctl, "cp")
    assert "PlacementRefused" in warning_reasons(ctl)
    # The stable keeps serving, untouched: same revision, Ready, its Deployment the only one.
    status = ctl.status("cp")
    assert status["stableRevision"]["hash"] == stable and status["phase"] == "Ready"
    assert ctl.condition("cp", "Ready")["status"] == "True"
    # kstatus (Flux, Helm 4 --wait) reads the refused spec as failed, not Current (issue 38).
    stalled = ctl.condition("cp", "Stalled")
    assert (stalled.get("status"), stalled.get("reason")) == ("True", "PlacementRefused")
    assert ctl.names("deployment") == [f"cp-{stable}"]
    assert CONTROL_PLANE not in pod_tolerations(ctl, "cp")

    fixed = {"key": "dedicated", "operator": "Equal", "value": "models", "effect": "NoSchedule"}
    ctl.update_spec("cp", {"scheduling": {"tolerations": [fixed]}})
    await eventually(
        lambda: (
            ctl.status("cp").get("stableRevision", {}).get("hash") not in (None, stable)
            and phase(ctl, "cp") == "Ready"
        ),
        120,
        what="the fixed spec promoted",
    )
    assert refused(ctl, "cp") is None
    assert ctl.condition("cp", "Stalled").get("status") != "True"
    assert CONTROL_PLANE not in pod_tolerations(ctl, "cp")
    assert "dedicated" in pod_tolerations(ctl, "cp")


async def test_replicas_above_the_maximum_start_nothing_and_never_scale_the_stable(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("many", {"model": "laya:en", "replicas": 11})
    shown = await eventually(lambda: refused(ctl, "many"), 30, what="PlacementRefused")
    assert "spec.replicas '11'" in shown["message"] and "DMROLLOUT_MAX_REPLICAS" in shown["message"]
    assert ctl.condition("many", "Ready")["reason"] == "PlacementRefused"
    assert phase(ctl, "many") == "Failed"
    assert await never_started(ctl, "many")
    assert ctl.names("deployment") == [] and ctl.names("job") == []

    ctl.update_spec("many", {"replicas": 1})
    await eventually(lambda: phase(ctl, "many") == "Ready", 90, what="Ready after the fix")
    assert refused(ctl, "many") is None
    stable = ctl.status("many")["stableRevision"]["hash"]

    # In place, on a serving stable: refused, and the Deployment keeps its one replica.
    ctl.update_spec("many", {"replicas": 50})
    shown = await eventually(lambda: refused(ctl, "many"), 30, what="refused in place")
    assert "spec.replicas '50'" in shown["message"]
    deployment = ctl.get("deployment", f"many-{stable}")
    assert deployment is not None and deployment["spec"]["replicas"] == 1
    assert phase(ctl, "many") == "Ready"


async def test_every_emptydir_of_the_serving_and_prefetch_pods_has_a_size_limit(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("scratch", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "scratch") == "Ready", 90, what="Ready")
    stable = ctl.status("scratch")["stableRevision"]["hash"]
    deployment = ctl.get("deployment", f"scratch-{stable}")
    job = ctl.get("job", f"scratch-pf-{stable}")
    assert deployment is not None and job is not None
    for obj in (deployment, job):
        volumes = obj["spec"]["template"]["spec"]["volumes"]
        empty_dirs = [v["emptyDir"] for v in volumes if "emptyDir" in v]
        assert len(empty_dirs) == 2
        assert all(e.get("sizeLimit") == "1Gi" for e in empty_dirs), empty_dirs

"""A way in (issue 22, point 11): a DecisionModel and the objects the reference operator made for
it (seeds 000/001: labelled decisionmodel.io/name and /revision, owned by the DecisionModel, no
dmrollout label, a status of the reference's shape) are taken over when dmrollout starts: no Pod
restarted, no rollout started; the next spec change rolls out normally, under dmrollout's
admission policies, and deletes the reference-made revision."""

from __future__ import annotations

import json
from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import ControllerProcess, RolloutHarness, put_model
from test_controller import phase, workflows_of

MANAGED_BY = "app.kubernetes.io/managed-by"
DM = "legacy"


def objects(stable: str) -> list[tuple[str, str]]:
    return [
        ("deployment", f"{DM}-{stable}"),
        ("poddisruptionbudget", f"{DM}-{stable}"),
        ("service", DM),
        ("persistentvolumeclaim", f"{DM}-store-{stable}"),
        ("job", f"{DM}-pf-{stable}"),
    ]


def as_the_reference_made_them(h: RolloutHarness, stable: str) -> None:
    """What differs from dmrollout's own layout: no managed-by label on any object, and a status
    without dmrollout's fields (the workflow run; the stable's full scheduling)."""
    for kind, name in objects(stable):
        h.kubectl("label", kind, name, f"{MANAGED_BY}-")
    status = h.status(DM)
    ops: list[dict[str, Any]] = []
    if "rollout" in status:
        ops.append({"op": "remove", "path": "/status/rollout"})
    if "scheduling" in status["stableRevision"]:
        ops.append({"op": "remove", "path": "/status/stableRevision/scheduling"})
    if ops:
        h.kubectl("patch", "dm", DM, "--subresource=status", "--type=json", "-p", json.dumps(ops))


def pods(h: RolloutHarness, stable: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in h.pods(DM, stable)}


def labelled(h: RolloutHarness, kind: str, name: str) -> bool:
    obj = h.get(kind, name) or {}
    return (obj.get("metadata", {}).get("labels") or {}).get(MANAGED_BY) == "dmrollout"


async def test_the_reference_operators_objects_are_taken_over_without_a_restart(
    ctl: RolloutHarness, controller: ControllerProcess
) -> None:
    ctl.api_key_secret("key-legacy", "legacy-key-value")
    spec = {
        "model": "laya:en",
        "replicas": 2,
        "cache": {"accessModes": ["ReadWriteMany"]},
        "auth": {"apiKeySecretRef": {"name": "key-legacy", "key": "token"}},
    }
    ctl.create_dm(DM, spec)
    await eventually(lambda: phase(ctl, DM) == "Ready", 120, what="Ready")
    stable = ctl.status(DM)["stableRevision"]["hash"]
    await eventually(lambda: ctl.get("poddisruptionbudget", f"{DM}-{stable}") is not None, 30)
    serving = pods(ctl, stable)
    assert len(serving) == 2
    controller.stop()
    try:
        as_the_reference_made_them(ctl, stable)
        assert not labelled(ctl, "service", DM)
    finally:
        controller.start()
    # dmrollout's first reconciles: labels added (metadata only), nothing restarted, no rollout.
    for kind in ("deployment", "service", "persistentvolumeclaim"):
        name = dict((k, n) for k, n in objects(stable))[kind]
        await eventually(lambda k=kind, n=name: labelled(ctl, k, n), 60, what=f"{kind} taken")
    await eventually(lambda: phase(ctl, DM) == "Ready", 60, what="Ready after the take-over")
    assert pods(ctl, stable) == serving
    assert len(await workflows_of(ctl, DM)) == 1

    # The next change rolls out as any other: the Service switches (an UPDATE of a reference-made
    # Service) and the reference-made revision's objects are deleted, the PDB and the Job
    # (never labelled: only deleted) included.
    put_model("laya", "legacy2", revision="legacy2")
    ctl.update_spec(DM, {"model": "laya:legacy2"})
    await eventually(
        lambda: ctl.status(DM).get("stableRevision", {}).get("hash") not in (None, stable),
        180,
        what="promoted",
    )
    await eventually(lambda: phase(ctl, DM) == "Ready", 60, what="Ready on the new revision")
    for kind, name in objects(stable):
        if kind == "service":
            continue
        await eventually(lambda k=kind, n=name: ctl.get(k, n) is None, 90, what=f"{kind} deleted")
    cleanup = [c for c in ctl.status(DM).get("conditions") or [] if c["type"] == "CleanupPending"]
    assert all(c["status"] != "True" for c in cleanup), cleanup

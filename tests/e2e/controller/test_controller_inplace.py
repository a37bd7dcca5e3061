"""In-place changes and restores of the stable revision, without a new rollout (issue 5)."""

from __future__ import annotations

import asyncio
import json

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness
from test_controller import phase, workflows_of

CHECKSUM = "decisionmodel.io/apikey-checksum"


def template_checksum(h: RolloutHarness, deployment: str) -> str | None:
    dep = h.get("deployment", deployment) or {}
    annotations = dep.get("spec", {}).get("template", {}).get("metadata", {}).get("annotations")
    return (annotations or {}).get(CHECKSUM)


async def test_api_key_rotation_rolls_the_stable_in_place(ctl: RolloutHarness) -> None:
    ctl.api_key_secret("key", "first-key-value")
    ctl.create_dm(
        "rot", {"model": "laya:en", "auth": {"apiKeySecretRef": {"name": "key", "key": "token"}}}
    )
    await eventually(lambda: phase(ctl, "rot") == "Ready", 90, what="Ready")
    stable = ctl.status("rot")["stableRevision"]["hash"]
    before = template_checksum(ctl, f"rot-{stable}")
    assert before
    ctl.api_key_secret("key", "second-key-value")
    # No Secret watch (get-only RBAC): picked up on the next re-check (10 s in these tests).
    await eventually(lambda: template_checksum(ctl, f"rot-{stable}") not in (None, before), 60)
    await eventually(lambda: phase(ctl, "rot") == "Ready", 90, what="Ready with the new key")
    assert len(await workflows_of(ctl, "rot")) == 1
    dep = ctl.get("deployment", f"rot-{stable}")
    assert "second-key-value" not in str(dep) and "first-key-value" not in str(dep)


async def test_cache_grow_and_immutable_changes(ctl: RolloutHarness) -> None:
    ctl.create_dm("grow", {"model": "laya:en", "cache": {"size": "1Gi"}})
    ctl.create_dm(
        "fix", {"model": "laya:en", "cache": {"size": "1Gi", "storageClassName": "fixed"}}
    )
    await eventually(lambda: phase(ctl, "grow") == "Ready" and phase(ctl, "fix") == "Ready", 90)
    grow = ctl.status("grow")["stableRevision"]["hash"]
    ctl.update_spec("grow", {"cache": {"size": "2Gi"}})
    ctl.update_spec("fix", {"cache": {"size": "2Gi", "storageClassName": "fixed"}})

    def capacity() -> str | None:
        pvc = ctl.get("pvc", f"grow-store-{grow}") or {}
        return pvc.get("status", {}).get("capacity", {}).get("storage")

    await eventually(lambda: capacity() == "2Gi", 60, what="store expanded in place")

    def immutable() -> bool:
        conds = {c["type"]: c for c in ctl.status("fix").get("conditions", [])}
        return conds.get("Degraded", {}).get("reason") == "CacheSpecImmutable"

    await eventually(immutable, 60, what="CacheSpecImmutable on a class without expansion")
    assert len(await workflows_of(ctl, "grow")) == 1 and len(await workflows_of(ctl, "fix")) == 1


async def test_deleted_stable_objects_are_restored(ctl: RolloutHarness) -> None:
    ctl.create_dm("res", {"model": "laya:en", "replicas": 2})
    await eventually(lambda: phase(ctl, "res") == "Ready", 90, what="Ready")
    stable = ctl.status("res")["stableRevision"]["hash"]
    ctl.kubectl("delete", "deployment", f"res-{stable}", "--wait=false")
    ctl.kubectl("delete", "service", "res", "--wait=false")
    ctl.kubectl("delete", "pdb", f"res-{stable}", "--wait=false")

    def restored() -> bool:
        dep = ctl.get("deployment", f"res-{stable}")
        svc = ctl.get("service", "res")
        pdb = ctl.get("pdb", f"res-{stable}")
        return bool(
            dep
            and not dep["metadata"].get("deletionTimestamp")
            and svc
            and svc["spec"]["selector"].get("decisionmodel.io/revision") == stable
            and pdb
        )

    await eventually(restored, 60, what="Deployment, Service and PDB restored")
    await eventually(lambda: phase(ctl, "res") == "Ready", 90, what="Ready again")
    assert len(await workflows_of(ctl, "res")) == 1


def condition(h: RolloutHarness, name: str, kind: str) -> dict[str, str] | None:
    for c in h.status(name).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def events(h: RolloutHarness, reason: str) -> list[dict[str, object]]:
    out = h.kubectl("get", "events", "--field-selector", f"reason={reason}", "-o", "json")
    return list(json.loads(out)["items"])


async def test_pinned_runtime_reports_a_newer_default_and_rolls_only_when_asked(
    ctl: RolloutHarness,
) -> None:
    """Seed 001 "Upgrading the operator", policy Pinned (the default): a DecisionModel on an
    older runtime that leaves spec.runtimeVersion unset stays there, and says a newer one
    exists; setting spec.runtimeVersion rolls onto it."""
    ctl.create_dm("rt", {"model": "laya:en", "runtimeVersion": "0.9.0"})
    await eventually(lambda: phase(ctl, "rt") == "Ready", 90, what="Ready on 0.9.0")
    assert ctl.status("rt")["stableRevision"]["runtimeVersion"] == "0.9.0"
    assert condition(ctl, "rt", "RuntimeUpdateAvailable") is None  # chosen explicitly

    # Unset: the stable's 0.9.0 is kept (no rollout), and the newer default is announced.
    ctl.kubectl("patch", "dm", "rt", "--type=json", "-p",
                '[{"op": "remove", "path": "/spec/runtimeVersion"}]')  # fmt: skip
    await eventually(
        lambda: (condition(ctl, "rt", "RuntimeUpdateAvailable") or {}).get("status") == "True",
        60,
        what="RuntimeUpdateAvailable",
    )
    message = condition(ctl, "rt", "RuntimeUpdateAvailable")["message"]  # type: ignore[index]
    assert "0.10.0" in message and "0.9.0" in message and "spec.runtimeVersion" in message
    await eventually(lambda: len(events(ctl, "RuntimeUpdateAvailable")) == 1, 30, what="Event")
    # Re-checks (every 10 s here) repeat neither a rollout nor the Event.
    await asyncio.sleep(12)
    assert len(await workflows_of(ctl, "rt")) == 1
    notices = events(ctl, "RuntimeUpdateAvailable")
    assert len(notices) == 1 and notices[0].get("count", 1) in (1, None)
    assert phase(ctl, "rt") == "Ready"

    # Adopting it is a normal rollout; the notice goes away.
    ctl.update_spec("rt", {"runtimeVersion": "0.10.0"})
    await eventually(
        lambda: (ctl.status("rt").get("stableRevision") or {}).get("runtimeVersion") == "0.10.0",
        90,
        what="rolled onto 0.10.0",
    )
    await eventually(lambda: condition(ctl, "rt", "RuntimeUpdateAvailable") is None, 30)
    assert len(await workflows_of(ctl, "rt")) == 2


async def test_an_upgraded_stable_only_gets_the_checksum_recorded_then_rolls_on_a_new_key(
    ctl: RolloutHarness,
) -> None:
    """Seed 001: "On upgrade, the first reconcile only records the checksum (it does not roll a
    Pod that is otherwise unchanged)". The stable's template is made to hold another operator's
    checksum, as the reference's Deployments do; dmrollout records its own on the Deployment and
    leaves the Pods; a new key value afterwards rolls them."""
    ctl.api_key_secret("key-up", "first-key-value")
    auth = {"apiKeySecretRef": {"name": "key-up", "key": "token"}}
    ctl.create_dm("upgr", {"model": "laya:en", "auth": auth})
    await eventually(lambda: phase(ctl, "upgr") == "Ready", 90, what="Ready")
    name = f"upgr-{ctl.status('upgr')['stableRevision']['hash']}"
    theirs = "sha256:" + "c" * 64
    patch = {"spec": {"template": {"metadata": {"annotations": {CHECKSUM: theirs}}}}}
    ctl.kubectl("patch", "deployment", name, "--type=merge", "-p", json.dumps(patch))

    def recorded() -> str | None:
        annotations = (ctl.get("deployment", name) or {}).get("metadata", {}).get("annotations")
        return (annotations or {}).get(CHECKSUM)

    await eventually(lambda: (recorded() or "").startswith("hmac-sha256:"), 60, what="recorded")
    assert template_checksum(ctl, name) == theirs  # the Pods were not rolled by dmrollout
    dep = ctl.get("deployment", name) or {}
    generation = dep["metadata"]["generation"]
    await eventually(lambda: phase(ctl, "upgr") == "Ready", 90, what="Ready after the record")
    # A later reconcile (every 10 s here) sees its own record: still no template change.
    first = recorded()
    await eventually(
        lambda: ctl.status("upgr").get("replicas", {}).get("modelReady") == 1, 60, what="serving"
    )
    assert (ctl.get("deployment", name) or {})["metadata"]["generation"] == generation
    assert recorded() == first
    ctl.api_key_secret("key-up", "second-key-value")
    await eventually(
        lambda: (template_checksum(ctl, name) or "").startswith("hmac-sha256:"), 60, what="roll"
    )
    await eventually(lambda: phase(ctl, "upgr") == "Ready", 90, what="Ready with the new key")

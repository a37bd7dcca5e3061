"""In-place changes and restores of the stable revision, without a new rollout (issue 5)."""

from __future__ import annotations

import pytest
from helpers import eventually
from rollout_harness import RolloutHarness
from test_controller import phase, workflows_of

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.temporal]

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

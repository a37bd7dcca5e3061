"""A lost stable store is recovered as a transaction (issue 11, point 1; seed 001 StoreLost,
StoreTerminating): shown at once, recreated and filled again by its own workflow, never
served empty, and the stable is Ready again."""

from __future__ import annotations

from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness

from decisionmodel.rollout.contracts import DMRef, store_workflow_id


def degraded(h: RolloutHarness, name: str) -> dict[str, Any]:
    for c in h.status(name).get("conditions") or []:
        if c["type"] == "Degraded":
            return dict(c)
    return {}


async def test_a_lost_stable_store_is_recovered_and_never_served_empty(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("store", {"model": "laya:en"})
    await eventually(lambda: ctl.status("store").get("phase") == "Ready", 90, what="Ready")
    stable = ctl.status("store")["stableRevision"]["hash"]
    pvc = f"store-store-{stable}"
    # Deleted while the stable Pods mount it: held by pvc-protection, a human decides.
    ctl.kubectl("delete", "pvc", pvc, "--wait=false")

    def terminating() -> dict[str, Any] | None:
        found = degraded(ctl, "store")
        return found if found.get("reason") == "StoreTerminating" else None

    shown = await eventually(terminating, 60, what="StoreTerminating")
    assert "Delete the stable Pods" in shown["message"]
    # The runbook's fix; the finished prefetch Job, whose Pod references the PVC too, the
    # controller removes itself.
    selector = f"decisionmodel.io/name=store,decisionmodel.io/revision={stable}"
    ctl.kubectl("delete", "pod", "-l", selector)

    def recovering() -> bool:
        found = degraded(ctl, "store")
        if found.get("reason") != "StoreLost":
            return False
        obj = ctl.get("pvc", pvc)
        if obj is not None and (obj["metadata"].get("annotations") or {}).get(
            "decisionmodel.io/store-recovering"
        ):
            # While the store is being filled again no Pod of it is model-ready.
            for pod in ctl.pods("store", stable):
                gates = [
                    c
                    for c in pod["status"].get("conditions") or []
                    if c["type"] == "decisionmodel.io/model-ready"
                ]
                assert not gates or gates[0]["status"] != "True", pod["metadata"]["name"]
        return True

    try:
        await eventually(recovering, 90, what="StoreLost while recovering")
    except AssertionError:
        print("PVC", ctl.kubectl("get", "pvc", "-o", "wide"))
        print("PODS", ctl.kubectl("get", "pods", "-o", "wide"))
        raise
    await eventually(lambda: ctl.status("store").get("phase") == "Ready", 180, what="Ready again")
    assert ctl.status("store")["stableRevision"]["hash"] == stable
    obj = ctl.get("pvc", pvc)
    assert obj is not None
    assert "decisionmodel.io/store-recovering" not in (obj["metadata"].get("annotations") or {})
    dm = ctl.dm("store")["metadata"]
    ref = DMRef(namespace=ctl.namespace, name="store", uid=dm["uid"])
    desc = await ctl.client.get_workflow_handle(store_workflow_id(ref, stable)).describe()
    assert desc.status is not None and desc.status.name == "COMPLETED"


async def test_a_revision_rolled_out_again_shows_its_store_still_being_deleted(
    ctl: RolloutHarness,
) -> None:
    """Explorer seed 10026: v1 → v2 → v1 while a Pod someone left still mounts v1's store PVC,
    so the clean-up's delete cannot finish. The prefetch of v1 waits for its namesake to go; it
    says so on Cached at once (naming the Pod and the fix), not only when timeouts.caching
    expires, and goes on by itself once the Pod is deleted."""
    ctl.create_dm("again", {"model": "laya:en"})
    await eventually(lambda: ctl.status("again").get("phase") == "Ready", 90, what="Ready")
    v1 = ctl.status("again")["stableRevision"]["hash"]
    claim = f"again-store-{v1}"
    ctl.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "left-behind", "namespace": ctl.namespace},
            "spec": {
                "containers": [{"name": "shell", "image": "busybox"}],
                "volumes": [{"name": "store", "persistentVolumeClaim": {"claimName": claim}}],
            },
        }
    )
    ctl.update_spec("again", {"model": "laya:multilingual"})
    await eventually(
        lambda: (ctl.get("pvc", claim) or {}).get("metadata", {}).get("deletionTimestamp"),
        120,
        what="v1's store PVC deleted after v2's promotion, held by the Pod left behind",
    )

    ctl.update_spec("again", {"model": "laya:en"})
    shown = await eventually(
        lambda: ctl.held("again", "Cached", "StoreTerminating"), 60, what="Cached says why"
    )
    assert claim in shown["message"] and "left-behind" in shown["message"]
    assert f"kubectl delete pod -n {ctl.namespace} left-behind" in shown["message"]
    assert ctl.status("again")["phase"] == "Caching"

    ctl.kubectl("delete", "pod", "left-behind", "--wait=false")
    await eventually(
        lambda: (
            (s := ctl.status("again")).get("phase") == "Ready" and s["stableRevision"]["hash"] == v1
        ),
        180,
        what="v1 Ready again",
    )
    assert ctl.condition("again", "Cached")["status"] == "True"

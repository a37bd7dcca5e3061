"""Concurrent status writes from the rollout and the controller never lose a field.

Both sides apply their own subset by server-side apply under distinct field managers, each
apply conditional on the resourceVersion it read and rebuilt after a 409. Here both hammer the
same DecisionModel at once; afterwards every field either side last wrote is present.
"""

from __future__ import annotations

import asyncio
import uuid

from harness.rollout_harness import install_crd

from decisionmodel.rollout.contracts import (
    ConditionUpdate,
    DMRef,
    Phase,
    RevisionRecord,
    StatusUpdate,
)
from decisionmodel.vocabulary import ConditionType
from kube.client import Kube
from kube.controller_status import Cond, ControllerStatus, apply_controller_status
from kube.rollout_status import show_guard, write_status
from localenv.cluster import LocalCluster

DIGEST = "c" * 64


def fresh_dm(cluster: LocalCluster, spec: dict[str, object] | None = None) -> str:
    """A new namespace with DecisionModel ``race`` in it; the namespace."""
    install_crd(cluster)
    ns = f"own-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", ns)
    cluster.apply(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "race", "namespace": ns},
            "spec": spec or {"model": "laya:en"},
        }
    )
    return ns


async def test_concurrent_rollout_and_controller_writes_keep_every_field(
    local_cluster: LocalCluster,
) -> None:
    ns = fresh_dm(local_cluster)
    obj = local_cluster.kubectl_json("get", "dm", "race", "-n", ns)
    dm = DMRef(namespace=ns, name="race", uid=obj["metadata"]["uid"], generation=1)
    kube = Kube.from_config(str(local_cluster.kubeconfig))

    async def rollout_side() -> None:
        for i in range(15):
            await write_status(
                kube,
                StatusUpdate(
                    dm=dm,
                    phase=Phase.CACHING if i % 2 else Phase.STARTING,
                    candidate=RevisionRecord(hash=f"cand{i:012d}", model="laya:en", digest=DIGEST),
                    conditions=[
                        ConditionUpdate(
                            type="Resolved", status="True", reason="DigestResolved", message=str(i)
                        )
                    ],
                ),
            )

    async def controller_side() -> None:
        for i in range(15):
            await apply_controller_status(
                kube,
                dm,
                ControllerStatus(
                    observed_generation=1,
                    endpoint="http://race.x.svc:11435/v1/systemone",
                    replicas={"desired": 1, "modelReady": i % 2},
                    conditions=[Cond("Ready", "True", "Serving", str(i))],
                ),
            )

    await asyncio.gather(rollout_side(), controller_side())
    status = local_cluster.kubectl_json("get", "dm", "race", "-n", ns)["status"]
    assert status["candidateRevision"]["hash"] == "cand000000000014"
    assert status["phase"] == "Starting"  # i = 14 is even
    assert status["replicas"] == {"desired": 1, "modelReady": 0}
    assert status["endpoint"].startswith("http://race")
    assert status["observedGeneration"] == 1
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Resolved"]["message"] == "14" and conds["Ready"]["message"] == "14"
    managers = {m["manager"] for m in obj_managed(local_cluster, ns)}
    assert {"dmrollout-rollout", "dmrollout-controller"} <= managers


def obj_managed(cluster: LocalCluster, ns: str) -> list[dict]:
    obj = cluster.kubectl_json("get", "dm", "race", "-n", ns, "--show-managed-fields")
    fields: list[dict] = obj["metadata"]["managedFields"]
    return fields


async def test_a_superseded_rollouts_guard_does_not_overwrite_the_newer_rollouts_condition(
    local_cluster: LocalCluster,
) -> None:
    """The older spec's resolve, still retrying its guard after the newer spec resolved, leaves
    the newer Resolved=True alone; a guard of the current generation still shows."""
    install_crd(local_cluster)
    ns = f"own-{uuid.uuid4().hex[:6]}"
    local_cluster.kubectl("create", "namespace", ns)
    manifest = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": "race", "namespace": ns},
        "spec": {"model": "laya:en"},
    }
    local_cluster.apply(manifest)
    manifest["spec"] = {"model": "laya:fr"}
    local_cluster.apply(manifest)
    uid = local_cluster.kubectl_json("get", "dm", "race", "-n", ns)["metadata"]["uid"]
    old, new = (DMRef(namespace=ns, name="race", uid=uid, generation=g) for g in (1, 2))
    kube = Kube.from_config(str(local_cluster.kubeconfig))
    resolved = ConditionUpdate(type="Resolved", status="True", reason="DigestResolved", message="")
    await write_status(kube, StatusUpdate(dm=new, conditions=[resolved]))

    await show_guard(kube, old, ConditionType.RESOLVED, "RegistryUnavailable", "old", first=True)
    conds = {
        c["type"]: c
        for c in local_cluster.kubectl_json("get", "dm", "race", "-n", ns)["status"]["conditions"]
    }
    assert (conds["Resolved"]["status"], conds["Resolved"]["observedGeneration"]) == ("True", 2)

    await show_guard(kube, new, ConditionType.RESOLVED, "RegistryUnavailable", "new", first=False)
    conds = {
        c["type"]: c
        for c in local_cluster.kubectl_json("get", "dm", "race", "-n", ns)["status"]["conditions"]
    }
    assert (conds["Resolved"]["reason"], conds["Resolved"]["message"]) == (
        "RegistryUnavailable",
        "new",
    )


async def test_a_phase_judged_from_a_stale_read_loses_to_the_status_written_since(
    local_cluster: LocalCluster,
) -> None:
    """CI, stop 47: the controller judged the stable Degraded from the DecisionModel as its
    cache held it (the new stable's Pods had lost their model); meanwhile the rollout switched
    back and wrote RolledBack. The conditional apply met the 409, re-read, and laid the stale
    Degraded over RolledBack. A judgement made from a read is void once the read is: nothing
    is written, and the change's own reconcile judges again."""
    ns = fresh_dm(local_cluster)
    kube = Kube.from_config(str(local_cluster.kubeconfig))
    uid = local_cluster.kubectl_json("get", "dm", "race", "-n", ns)["metadata"]["uid"]
    dm = DMRef(namespace=ns, name="race", uid=uid, generation=1)
    await write_status(kube, StatusUpdate(dm=dm, phase=Phase.READY))
    judged = local_cluster.kubectl_json("get", "dm", "race", "-n", ns)  # the cache's copy
    await write_status(kube, StatusUpdate(dm=dm, phase=Phase.ROLLED_BACK))  # the rollout

    written = await write_status(kube, StatusUpdate(dm=dm, phase=Phase.DEGRADED), read=judged)
    assert written is None
    want = ControllerStatus(conditions=[Cond("Degraded", "True", "ReplicasNotModelReady", "x")])
    assert await apply_controller_status(kube, dm, want, judged) is None
    status = local_cluster.kubectl_json("get", "dm", "race", "-n", ns)["status"]
    assert status["phase"] == "RolledBack"
    assert "Degraded" not in {c["type"] for c in status.get("conditions", [])}

    # A read that is current is written as before, and a rollout's own write (it passes no
    # read: its update is not a judgement of the status) reads afresh and lands whatever the
    # controller's cache held (a 409 in between is re-read: the concurrent test above).
    fresh = local_cluster.kubectl_json("get", "dm", "race", "-n", ns)
    assert await write_status(kube, StatusUpdate(dm=dm, phase=Phase.READY), read=fresh)
    written = await write_status(kube, StatusUpdate(dm=dm, phase=Phase.FAILED))
    assert written is not None and written["status"]["phase"] == "Failed"

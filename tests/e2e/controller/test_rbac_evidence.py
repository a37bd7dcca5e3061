"""The shipped RBAC against the API server's audit log (issue 12, point 1).

The controller and the worker run as their own ServiceAccounts, holding only the Roles of
deploy/namespaced (tests/rollout_harness.py grants them per namespace), and the API server logs
every request of those accounts (localenv/cluster.py, AUDIT_POLICY). One DecisionModel here goes
through every path that needs a grant: first rollout with store, prefetch, PDB, API key and
golden set; a held candidate approved by annotation; the previous revision deleted; the stable's
Deployment, Service and PDB repaired or restored; its store grown in place; orphans reaped; its
store lost and recovered. Then, per component: nothing used ungranted (no 403, anywhere in the
session), and nothing granted unused (in this test's namespace the uses ARE the grants).
"""

from __future__ import annotations

import json
from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import (
    LEADER_ELECTION_ROLE,
    RolloutHarness,
    golden_jsonl,
    namespaced_rbac,
    put_model,
)

from localenv import audit
from localenv.cluster import LocalCluster
from localenv.identities import CONTROLLER, SYSTEM_NAMESPACE, WORKER, username

Perm = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)
DM = "ev"
ORPHAN = "0rphan0000000000"


def role_perms(role: dict[str, Any]) -> set[Perm]:
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def shipped(component: str) -> set[Perm]:
    (role,) = [
        o for o in namespaced_rbac() if o["kind"] == "Role" and o["metadata"]["name"] == component
    ]
    return role_perms(role)


def lease_perms() -> set[Perm]:
    import yaml

    docs = [d for d in yaml.safe_load_all(LEADER_ELECTION_ROLE.read_text()) if d]
    return role_perms(next(d for d in docs if d["kind"] == "Role"))


def used(reqs: list[audit.Request], component: str, namespace: str) -> set[Perm]:
    return {
        (r.use.group, r.use.resource, r.use.verb)
        for r in reqs
        if r.user == username(component) and r.namespace == namespace
    }


def phase(h: RolloutHarness) -> str | None:
    return h.status(DM).get("phase")


def stable(h: RolloutHarness) -> str:
    return str((h.status(DM).get("stableRevision") or {}).get("hash"))


def orphans(h: RolloutHarness, uid: str) -> list[dict[str, Any]]:
    """Objects of a revision no rollout owns (a hand-terminated workflow leaves such): the
    reaper's to delete."""
    labels = {
        "decisionmodel.io/name": DM,
        "decisionmodel.io/revision": ORPHAN,
        "app.kubernetes.io/managed-by": "dmrollout",  # as dmrollout labels what it makes
    }
    meta = {
        "name": f"{DM}-{ORPHAN}",
        "namespace": h.namespace,
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": "decisionmodel.io/v1alpha1",
                "kind": "DecisionModel",
                "name": DM,
                "uid": uid,
                "controller": True,
            }
        ],
    }
    pod = {
        "metadata": {"labels": labels},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {**pod, "spec": {**pod["spec"], "restartPolicy": "Always"}},
            },
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": {"suspend": True, "template": pod},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": meta,
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Mi"}},
            },
        },
    ]


async def first_rollout_then_approved_candidate(ctl: RolloutHarness) -> str:
    put_model("laya", "ev2", accuracy=0.95, revision="ev2")
    ctl.golden_configmap("golden", golden_jsonl(10))
    ctl.api_key_secret("key", "evidence-key-value")
    spec = {
        "model": "laya:en",
        "replicas": 2,
        "cache": {"size": "1Gi", "accessModes": ["ReadWriteMany"]},
        "auth": {"apiKeySecretRef": {"name": "key", "key": "token"}},
        "rollout": {
            "promotion": "Manual",
            "evaluation": {
                "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
                "minAccuracy": "0.80",
            },
        },
    }
    ctl.create_dm(DM, spec)
    await eventually(lambda: phase(ctl) == "Ready", 150, what="first revision Ready")
    first = stable(ctl)
    ctl.update_spec(DM, {"model": "laya:ev2"})
    await eventually(lambda: phase(ctl) == "AwaitingPromotion", 150, what="candidate held")
    candidate = ctl.status(DM)["candidateRevision"]["hash"]
    ctl.kubectl("annotate", "dm", DM, f"decisionmodel.io/promote={candidate}")
    await eventually(lambda: stable(ctl) == candidate, 120, what="approved and promoted")
    # The previous revision's objects are deleted after the grace.
    await eventually(
        lambda: (
            ctl.get("deployment", f"{DM}-{first}") is None
            and ctl.get("pvc", f"{DM}-store-{first}") is None
        ),
        90,
        what="previous revision deleted",
    )
    return candidate


async def stable_repaired_restored_grown(ctl: RolloutHarness, rev: str) -> None:
    ctl.kubectl("scale", "deployment", f"{DM}-{rev}", "--replicas=1")
    drift = {"spec": {"selector": {"decisionmodel.io/revision": "other"}}}
    ctl.kubectl("patch", "service", DM, "--type=merge", "-p", json.dumps(drift))
    await eventually(
        lambda: (
            (ctl.get("deployment", f"{DM}-{rev}") or {})["spec"]["replicas"] == 2
            and (ctl.get("service", DM) or {})["spec"]["selector"]["decisionmodel.io/revision"]
            == rev
        ),
        60,
        what="replicas and selector repaired",
    )
    ctl.kubectl("delete", "deployment", f"{DM}-{rev}", "--wait=false")
    ctl.kubectl("delete", "service", DM, "--wait=false")
    ctl.kubectl("delete", "pdb", f"{DM}-{rev}", "--wait=false")

    def restored() -> bool:
        dep = ctl.get("deployment", f"{DM}-{rev}")
        return bool(
            dep
            and not dep["metadata"].get("deletionTimestamp")
            and ctl.get("service", DM)
            and ctl.get("pdb", f"{DM}-{rev}")
        )

    await eventually(restored, 60, what="Deployment, Service and PDB restored")
    ctl.update_spec(DM, {"cache": {"size": "2Gi", "accessModes": ["ReadWriteMany"]}})

    def capacity() -> str | None:
        pvc = ctl.get("pvc", f"{DM}-store-{rev}") or {}
        return pvc.get("status", {}).get("capacity", {}).get("storage")

    await eventually(lambda: capacity() == "2Gi", 60, what="store grown in place")
    await eventually(lambda: phase(ctl) == "Ready", 90, what="Ready again")


async def orphans_reaped(ctl: RolloutHarness) -> None:
    objs = orphans(ctl, ctl.dm(DM)["metadata"]["uid"])
    ctl.cluster.apply(objs)
    kinds = ("deployment", "job", "pdb", "pvc")

    def gone() -> bool:
        for kind in kinds:
            obj = ctl.get(kind, f"{DM}-{ORPHAN}")
            if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                return False
        return True

    # The reaper's grace is 15 s here (tests/e2e/controller/conftest.py).
    await eventually(gone, 90, what="orphans reaped")


async def store_lost_and_recovered(ctl: RolloutHarness, rev: str) -> None:
    ctl.kubectl("delete", "pvc", f"{DM}-store-{rev}", "--wait=false")
    selector = f"decisionmodel.io/name={DM},decisionmodel.io/revision={rev}"

    def reason() -> str | None:
        for c in ctl.status(DM).get("conditions") or []:
            if c["type"] == "Degraded":
                return str(c.get("reason"))
        return None

    await eventually(lambda: reason() == "StoreTerminating", 60, what="StoreTerminating")
    ctl.kubectl("delete", "pod", "-l", selector)
    await eventually(lambda: reason() == "StoreLost", 90, what="StoreLost")
    await eventually(
        lambda: phase(ctl) == "Ready" and reason() != "StoreLost", 180, what="recovered"
    )


# Secure metrics review a scraper's token (cluster-scoped APIs): granted by the separate
# deploy/metrics-auth ClusterRole (tests/unit/ship/test_rbac_guard.py checks its rules), used
# here only by the secure-metrics tests' processes.
METRICS_REVIEWS = {
    ("authentication.k8s.io", "tokenreviews", "create"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
}


async def test_shipped_rbac_is_exactly_what_the_audit_log_shows(
    ctl: RolloutHarness, crd: LocalCluster
) -> None:
    rev = await first_rollout_then_approved_candidate(ctl)
    await stable_repaired_restored_grown(ctl, rev)
    await orphans_reaped(ctl)
    await store_lost_and_recovered(ctl, rev)

    reqs = audit.read(crd.audit_log)
    denied = audit.forbidden(reqs)
    assert not denied, f"used but not granted: {[(r.user, str(r.use)) for r in denied]}"
    granted = {CONTROLLER: shipped(CONTROLLER), WORKER: shipped(WORKER)}
    for component, perms in granted.items():
        # Anywhere in the session: namespaced uses only, each granted.
        mine = [
            r
            for r in reqs
            if r.user == username(component)
            and (r.use.group, r.use.resource, r.use.verb) not in METRICS_REVIEWS
        ]
        assert {r.use.scope for r in mine} == {audit.NAMESPACED}
        outside = {(r.use.group, r.use.resource, r.use.verb) for r in mine} - perms
        if component == CONTROLLER:
            outside -= lease_perms()
        assert not outside, f"{component} used ungranted: {sorted(outside)}"
        # Here, where every path ran: each grant was used.
        assert used(reqs, component, ctl.namespace) == perms, component
    assert used(reqs, CONTROLLER, SYSTEM_NAMESPACE) == lease_perms()
    assert not used(reqs, WORKER, SYSTEM_NAMESPACE)

"""The object activities (prefetch, start, promote, delete_revision, record_status) against the
local control plane, the fake kubelet and the registry simulator, called directly through
Temporal's ActivityEnvironment (which also records heartbeats).

The pure parts (classify_failure, build_rollout_status, decisionmodel.rollout.render_params) are
unit tests:
tests/unit/activities/test_prefetch_classify.py and tests/unit/kube/.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from harness.helpers import assert_eventually
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.delete_revision import DeleteRevisionActivities
from activities.prefetch import PrefetchActivities
from activities.promote import PromoteActivities
from activities.resolve import ResolveActivities
from activities.start import StartActivities
from activities.status import StatusActivities
from decisionmodel.api import DecisionModel
from decisionmodel.engine.render.labels import ANNOTATION_APIKEY_CHECKSUM
from decisionmodel.rollout.contracts import (
    CachePolicy,
    ConditionUpdate,
    DeleteRevisionInput,
    DMRef,
    KeyRef,
    Phase,
    PromoteInput,
    ResolveInput,
    RevisionObjectsInput,
    RevisionRecord,
    RevisionSpec,
    RolloutPolicy,
    StatusUpdate,
    StepStatus,
)
from decisionmodel.rollout.render_params import apikey_checksum
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.rollout.spec_mapping import rollout_policy
from kube.client import CONTROLLER_FIELD_MANAGER, ROLLOUT_FIELD_MANAGER, Kube
from kube.errors import Conflict
from localenv.cluster import POD_NETWORK, LocalCluster
from localenv.env import Simulators

REGISTRY = "http://127.0.0.1:5000"
CRD_FILE = "deploy/crd/decisionmodels.decisionmodel.io.yaml"
API_KEY_VALUE = "sk-test-7f3a9c1e5b"


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crd(local_cluster: LocalCluster) -> None:
    local_cluster.kubectl("apply", "-f", CRD_FILE)
    local_cluster.kubectl(
        "wait", "--for", "condition=established", "--timeout=60s",
        "crd/decisionmodels.decisionmodel.io",
    )  # fmt: skip


@pytest.fixture(scope="module")
def settings(local_cluster: LocalCluster) -> RolloutSettings:
    return RolloutSettings(
        kubeconfig=str(local_cluster.kubeconfig),
        ollaya_registry=REGISTRY,
        allowed_registries=["127.0.0.1:5000"],
        allow_insecure_registries=True,
        poll_interval_seconds=0.2,
    )


@pytest.fixture(scope="module")
def kube(settings: RolloutSettings) -> Iterator[Kube]:
    k = Kube.from_config(settings.kubeconfig)
    yield k
    k.api_client.close()


@pytest.fixture(scope="module")
def laya_digest(simulators: Simulators) -> str:
    body = httpx.get(f"{REGISTRY}/v2/library/laya/manifests/en").raise_for_status().content
    return hashlib.sha256(body).hexdigest()


@pytest.fixture
def dm(local_cluster: LocalCluster, crd: None) -> DMRef:
    """A DecisionModel in a fresh namespace, owner of everything the test creates."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    local_cluster.kubectl("create", "namespace", ns)
    local_cluster.apply(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "router", "namespace": ns},
            "spec": {"model": "laya:en"},
        }
    )
    obj = local_cluster.kubectl_json("get", "dm", "router", "-n", ns)
    return DMRef(
        namespace=ns,
        name="router",
        uid=obj["metadata"]["uid"],
        generation=obj["metadata"]["generation"],
    )


@pytest.fixture
def heartbeats() -> list[Any]:
    return []


@pytest.fixture
def env(heartbeats: list[Any]) -> ActivityEnvironment:
    e = ActivityEnvironment()
    e.on_heartbeat = lambda *details: heartbeats.append(details)
    return e


def _rev() -> str:
    return uuid.uuid4().hex[:16]


def objects_input(
    dm: DMRef,
    digest: str,
    *,
    model: str = "laya:en",
    pinned: bool = False,
    replicas: int = 1,
    api_key: KeyRef | None = None,
    revision: str | None = None,
) -> RevisionObjectsInput:
    rev = revision or _rev()
    return RevisionObjectsInput(
        dm=dm,
        record=RevisionRecord(hash=rev, model=model, digest=digest),
        revision=RevisionSpec(model=model, digest=digest if pinned else None, digest_pinned=pinned),
        replicas=replicas,
        cache=CachePolicy(size="1Gi"),
        api_key=api_key,
        caching_timeout_seconds=120,
    )


def _names(cluster: LocalCluster, kind: str, ns: str) -> list[str]:
    items = cluster.kubectl_json("get", kind, "-n", ns)["items"]
    return sorted(i["metadata"]["name"] for i in items)


def _live_policy(cluster: LocalCluster, dm: DMRef) -> RolloutPolicy:
    """The policy of the live DecisionModel: promote refuses any other (PolicyMismatch)."""
    return rollout_policy(DecisionModel.from_k8s(_dm_obj(cluster, dm)))


def _dm_obj(cluster: LocalCluster, dm: DMRef) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.kubectl_json("get", "dm", dm.name, "-n", dm.namespace)
    return obj


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


# --- prefetch -------------------------------------------------------------------------------


async def test_prefetch_succeeds_once_and_is_idempotent(
    local_cluster: LocalCluster,
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
    heartbeats: list[Any],
) -> None:
    acts = PrefetchActivities(kube, settings)
    inp = objects_input(dm, laya_digest)
    rev = inp.record.hash
    result = await env.run(acts.prefetch, inp)
    assert (result.job, result.pvc, result.attempts) == (
        f"router-pf-{rev}",
        f"router-store-{rev}",
        1,
    )
    assert heartbeats and all(h[0]["job"] == result.job for h in heartbeats)

    job = local_cluster.kubectl_json("get", "job", result.job, "-n", dm.namespace)
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["uid"], owner["controller"]) == (dm.uid, True)
    container = job["spec"]["template"]["spec"]["containers"][0]
    env_vars = {e["name"]: e.get("value") for e in container["env"]}
    # Host-less name: the Job pulls from the operator's registry, where the digest came from.
    assert env_vars["OLLAYA_REGISTRY"] == REGISTRY
    assert env_vars["STORE_MANIFEST"] == "/models/manifests/127.0.0.1_5000/library/laya/en"
    assert container["image"] == "ghcr.io/ollaya-dev/ollaya:0.10.0"

    again = await env.run(acts.prefetch, inp)
    assert again == result
    assert _names(local_cluster, "jobs", dm.namespace) == [result.job]
    assert _names(local_cluster, "pvc", dm.namespace) == [result.pvc]
    job_again = local_cluster.kubectl_json("get", "job", result.job, "-n", dm.namespace)
    assert job_again["metadata"]["uid"] == job["metadata"]["uid"]
    assert job_again["status"]["succeeded"] == 1


async def test_prefetch_unknown_tag_is_model_not_found_and_not_rerun(
    local_cluster: LocalCluster,
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    env: ActivityEnvironment,
    simulators: Simulators,
) -> None:
    acts = PrefetchActivities(kube, settings)
    inp = objects_input(dm, "0" * 64, model="laya:nope")
    with pytest.raises(ApplicationError) as err:
        await env.run(acts.prefetch, inp)
    assert err.value.type == "ModelNotFound"
    assert err.value.non_retryable
    assert "laya:nope not found in registry" in err.value.message

    # A retry reports the same classification from the failed Job; it does not pull again.
    with pytest.raises(ApplicationError) as again:
        await env.run(acts.prefetch, inp)
    assert again.value.type == "ModelNotFound"
    job = local_cluster.kubectl_json(
        "get", "job", f"router-pf-{inp.record.hash}", "-n", dm.namespace
    )
    assert job["status"]["failed"] == 1
    assert len(_names(local_cluster, "pods", dm.namespace)) == 1


@pytest.mark.parametrize(
    ("pinned", "expected_text"),
    [(True, "DigestMismatch: expected " + "ab" * 32), (False, "tag moved: ")],
)
async def test_prefetch_wrong_digest_is_digest_mismatch(
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
    pinned: bool,
    expected_text: str,
) -> None:
    acts = PrefetchActivities(kube, settings)
    inp = objects_input(dm, "ab" * 32, pinned=pinned)
    with pytest.raises(ApplicationError) as err:
        await env.run(acts.prefetch, inp)
    assert err.value.type == "DigestMismatch"
    assert err.value.non_retryable
    assert expected_text in err.value.message
    assert laya_digest in err.value.message  # what the registry really serves


# --- start ----------------------------------------------------------------------------------


async def test_start_runs_pods_with_ips_and_only_a_key_checksum(
    local_cluster: LocalCluster,
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
    heartbeats: list[Any],
) -> None:
    local_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "router-key",
                "namespace": dm.namespace,
                "labels": {"decisionmodel.io/api-key": "true"},
            },
            "stringData": {"key": API_KEY_VALUE},
        }
    )
    inp = objects_input(dm, laya_digest, replicas=2, api_key=KeyRef(name="router-key", key="key"))
    await env.run(PrefetchActivities(kube, settings).prefetch, inp)
    result = await env.run(StartActivities(kube, settings).start, inp)
    assert result.deployment == f"router-{inp.record.hash}"
    assert any("started" in h[0] for h in heartbeats)

    deployment = local_cluster.kubectl_json(
        "get", "deployment", result.deployment, "-n", dm.namespace
    )
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    secret_uid = local_cluster.kubectl_json("get", "secret", "router-key", "-n", dm.namespace)[
        "metadata"
    ]["uid"]
    # An HMAC keyed by the Secret's uid, never a bare hash of the key (issue 12).
    assert annotations[ANNOTATION_APIKEY_CHECKSUM] == apikey_checksum(
        API_KEY_VALUE.encode(), secret_uid
    )
    assert hashlib.sha256(API_KEY_VALUE.encode()).hexdigest() not in json.dumps(deployment)
    assert API_KEY_VALUE not in json.dumps(deployment)
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == dm.uid

    pods = local_cluster.kubectl_json(
        "get", "pods", "-n", dm.namespace, "-l", f"decisionmodel.io/revision={inp.record.hash}"
    )["items"]
    assert len(pods) == 2
    network = ipaddress.ip_network(POD_NETWORK)
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        assert ipaddress.ip_address(pod["status"]["podIP"]) in network
        ready = _conditions(pod)
        assert ready["ContainersReady"]["status"] == "True"
        assert ready["Ready"]["status"] == "False"  # the model-ready gate is not set yet

    # Idempotent: adopts the Deployment, no second one.
    assert (await env.run(StartActivities(kube, settings).start, inp)) == result
    assert _names(local_cluster, "deployments", dm.namespace) == [result.deployment]


async def test_prefetch_and_start_wake_on_events_not_a_poll(
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
) -> None:
    """With a poll interval longer than the bound given here, the Job's completion and the
    Pods' start still end the waits: the watch wakes them (issue 14)."""
    slow = settings.model_copy(update={"poll_interval_seconds": 60.0})
    inp = objects_input(dm, laya_digest, replicas=2)
    prefetched = await asyncio.wait_for(env.run(PrefetchActivities(kube, slow).prefetch, inp), 45)
    assert prefetched.attempts == 1
    started = await asyncio.wait_for(env.run(StartActivities(kube, slow).start, inp), 45)
    assert started.deployment == f"router-{inp.record.hash}"


# --- promote and delete_revision ------------------------------------------------------------


async def test_promote_refuses_a_foreign_service(
    local_cluster: LocalCluster,
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
) -> None:
    local_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": dm.name, "namespace": dm.namespace},
            "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 80}]},
        }
    )
    candidate = RevisionRecord(hash=_rev(), model="laya:en", digest=laya_digest)
    with pytest.raises(ApplicationError) as err:
        await env.run(
            PromoteActivities(kube, settings).promote,
            PromoteInput(
                dm=dm, candidate=candidate, replicas=1, policy=_live_policy(local_cluster, dm)
            ),
        )
    assert err.value.type == "ResourceConflict"
    assert err.value.non_retryable
    service = local_cluster.kubectl_json("get", "service", dm.name, "-n", dm.namespace)
    assert service["spec"]["selector"] == {"app": "theirs"}
    assert "stableRevision" not in _dm_obj(local_cluster, dm).get("status", {})


async def test_promote_switches_the_service_and_delete_keeps_the_selected(
    local_cluster: LocalCluster,
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
) -> None:
    ns = dm.namespace
    first = objects_input(dm, laya_digest)
    second = objects_input(dm, laya_digest, replicas=2)
    a, b = first.record, second.record
    for inp in (first, second):
        await env.run(PrefetchActivities(kube, settings).prefetch, inp)
    await env.run(StartActivities(kube, settings).start, first)
    promote = PromoteActivities(kube, settings).promote

    # First rollout: no Service yet, no stable, nothing to delete afterwards.
    policy = _live_policy(local_cluster, dm)  # what dispatch puts in the input
    done = await env.run(promote, PromoteInput(dm=dm, candidate=a, replicas=1, policy=policy))
    assert done.previous is None
    service = local_cluster.kubectl_json("get", "service", dm.name, "-n", ns)
    assert service["spec"]["selector"] == {
        "decisionmodel.io/name": "router",
        "decisionmodel.io/revision": a.hash,
    }
    assert service["metadata"]["ownerReferences"][0]["uid"] == dm.uid
    assert "router-" + a.hash not in _names(local_cluster, "pdb", ns)  # one replica: no PDB

    # Second: record, PDB (2 replicas), switch; the previous is what the Service selected.
    # The rollout asks promote to write its phase (Promoting) and its Event itself.
    status_of_step = StepStatus(enter=StatusUpdate(dm=dm, phase=Phase.PROMOTING), report=True)
    inp = PromoteInput(
        dm=dm, candidate=b, replicas=2, stable=a, policy=policy, status=status_of_step
    )
    done = await env.run(promote, inp)
    assert done.previous == a.hash
    service = local_cluster.kubectl_json("get", "service", dm.name, "-n", ns)
    assert service["spec"]["selector"]["decisionmodel.io/revision"] == b.hash
    assert _names(local_cluster, "pdb", ns) == [f"router-{b.hash}"]
    status = _dm_obj(local_cluster, dm)["status"]
    assert status["phase"] == "Ready"
    assert status["stableRevision"]["hash"] == b.hash
    assert status["previousRevision"] == {
        "hash": a.hash,
        "engine": "ollaya",
        "model": "laya:en",
        "digest": laya_digest,
        "device": "cpu",
    }
    assert "candidateRevision" not in status
    promoted = _conditions(_dm_obj(local_cluster, dm))["Promoted"]
    assert (promoted["status"], promoted["reason"]) == ("True", "Promoted")

    assert _events(local_cluster, dm, "Promoted")
    # Twice: the same state, the same answer, the promotion time kept; and never Promoting
    # again once recorded (a retried attempt finds the candidate already the stable).
    again = await env.run(promote, inp)
    assert again == done
    status_again = _dm_obj(local_cluster, dm)["status"]
    assert status_again["lastPromotionTime"] == status["lastPromotionTime"]
    assert status_again["phase"] == "Ready"
    assert status_again["phaseTransitionTime"] == status["phaseTransitionTime"]
    assert status_again["previousRevision"] == status["previousRevision"]

    delete = DeleteRevisionActivities(kube, settings).delete_revision
    kept = await env.run(delete, DeleteRevisionInput(dm=dm, revision=b.hash, reason="test"))
    assert (kept.deleted, kept.kept_selected) == ([], True)
    assert f"router-store-{b.hash}" in _names(local_cluster, "pvc", ns)

    gone = await env.run(delete, DeleteRevisionInput(dm=dm, revision=a.hash, reason="test"))
    assert not gone.kept_selected
    assert gone.deleted == [
        f"Deployment/router-{a.hash}",
        f"Job/router-pf-{a.hash}",
        f"PersistentVolumeClaim/router-store-{a.hash}",
    ]

    def only_b_left() -> bool:
        assert _names(local_cluster, "deployments", ns) == []
        assert _names(local_cluster, "jobs", ns) == [f"router-pf-{b.hash}"]
        assert _names(local_cluster, "pvc", ns) == [f"router-store-{b.hash}"]
        pods = local_cluster.kubectl_json("get", "pods", "-n", ns)["items"]
        assert all(
            p["metadata"]["labels"].get("decisionmodel.io/prefetch-revision") == b.hash
            for p in pods
        )
        return True

    assert_eventually(only_b_left, 30, what="revision A's objects gone")
    # Deleting again is a no-op.
    assert (await env.run(delete, DeleteRevisionInput(dm=dm, revision=a.hash))).deleted == []


# --- record_status --------------------------------------------------------------------------


async def test_record_status_coexists_with_the_controller(
    local_cluster: LocalCluster,
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
) -> None:
    controller_status = {
        "observedGeneration": dm.generation,
        "endpoint": f"http://router.{dm.namespace}.svc:11435/v1/systemone",
        "replicas": {"desired": 1, "modelReady": 0},
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "NoStableRevision",
                "message": "",
                "lastTransitionTime": "2030-01-01T00:00:00Z",
                "observedGeneration": dm.generation,
            }
        ],
    }
    await Kube.run(kube.apply_dm_status, dm, controller_status, CONTROLLER_FIELD_MANAGER)

    record = RevisionRecord(hash=_rev(), model="laya:en", digest=laya_digest)
    acts = StatusActivities(kube, settings)
    await env.run(
        acts.record_status,
        StatusUpdate(
            dm=dm,
            phase=Phase.CACHING,
            candidate=record,
            conditions=[ConditionUpdate(type="Resolved", status="True", reason="DigestResolved")],
            event_reason="Resolved",
            event_message=f"laya:en → {record.hash}",
        ),
    )
    obj = _dm_obj(local_cluster, dm)
    status = obj["status"]
    assert status["observedGeneration"] == dm.generation
    assert status["endpoint"] == controller_status["endpoint"]
    assert status["replicas"] == {"desired": 1, "modelReady": 0}
    assert (status["phase"], status["candidateRevision"]["hash"]) == ("Caching", record.hash)
    conditions = _conditions(obj)
    assert conditions["Ready"]["reason"] == "NoStableRevision"
    assert conditions["Resolved"]["observedGeneration"] == dm.generation
    shown = local_cluster.kubectl_json(
        "get", "dm", dm.name, "-n", dm.namespace, "--show-managed-fields"
    )
    managers = {
        m["manager"]: json.dumps(m.get("fieldsV1", {}))
        for m in shown["metadata"]["managedFields"]
        if m.get("subresource") == "status"
    }
    assert '"f:phase"' in managers[ROLLOUT_FIELD_MANAGER]
    assert '"f:phase"' not in managers[CONTROLLER_FIELD_MANAGER]
    assert '"f:replicas"' not in managers[ROLLOUT_FIELD_MANAGER]

    # The rollout's applies are conditional on what it read: a stale read is refused (409)
    # and rebuilt, never written back over a newer value.
    stale = obj["metadata"]["resourceVersion"]
    # The controller's next apply (only its fields) leaves the rollout's alone…
    controller_status["replicas"] = {"desired": 1, "modelReady": 1}
    await Kube.run(kube.apply_dm_status, dm, controller_status, CONTROLLER_FIELD_MANAGER)
    status = _dm_obj(local_cluster, dm)["status"]
    assert (status["phase"], status["candidateRevision"]["hash"]) == ("Caching", record.hash)
    assert status["replicas"]["modelReady"] == 1
    with pytest.raises(Conflict) as refused:
        await Kube.run(kube.apply_dm_status, dm, {"phase": "Ready"}, resource_version=stale)
    assert refused.value.status == 409

    # …and the rollout clearing its candidate and recording a failure leaves the controller's.
    await env.run(
        acts.record_status,
        StatusUpdate(
            dm=dm,
            phase=Phase.FAILED,
            clear_candidate=True,
            failed=record,
            failed_reason="ModelNotFound",
            failed_message="laya:en not found",
        ),
    )
    obj = _dm_obj(local_cluster, dm)
    status = obj["status"]
    assert "candidateRevision" not in status
    assert status["failedRevision"]["reason"] == "ModelNotFound"
    assert status["replicas"] == {"desired": 1, "modelReady": 1}
    assert status["endpoint"] == controller_status["endpoint"]
    conditions = _conditions(obj)
    assert conditions["Ready"]["lastTransitionTime"] == "2030-01-01T00:00:00Z"
    assert conditions["Resolved"]["status"] == "True"  # an earlier rollout write persists

    events = local_cluster.kubectl_json("get", "events.v1.events.k8s.io", "-n", dm.namespace)[
        "items"
    ]
    resolved = [e for e in events if e.get("reason") == "Resolved"]
    assert len(resolved) == 1
    assert resolved[0]["regarding"]["uid"] == dm.uid


# --- a step's own status writes (issue 14: no record_status activity per phase change) -------


def _events(cluster: LocalCluster, dm: DMRef, reason: str) -> list[dict[str, Any]]:
    items = cluster.kubectl_json("get", "events.v1.events.k8s.io", "-n", dm.namespace)["items"]
    return [e for e in items if e.get("reason") == reason and e["regarding"]["uid"] == dm.uid]


async def test_a_step_writes_its_phase_when_it_starts_and_its_outcome_when_it_ends(
    local_cluster: LocalCluster,
    kube: Kube,
    settings: RolloutSettings,
    dm: DMRef,
    laya_digest: str,
    env: ActivityEnvironment,
) -> None:
    resolve = ResolveActivities(settings, kube=kube).resolve
    revision = RevisionSpec(model="laya:en", digest=laya_digest)
    # Without StepStatus (a rollout from before the change): the step writes nothing.
    await env.run(resolve, ResolveInput(dm=dm, revision=revision))
    assert "phase" not in _dm_obj(local_cluster, dm).get("status", {})
    assert _events(local_cluster, dm, "Resolved") == []

    enter = StatusUpdate(dm=dm, phase=Phase.RESOLVING)
    asked = ResolveInput(dm=dm, revision=revision, status=StepStatus(enter=enter, report=True))
    result = await env.run(resolve, asked)
    obj = _dm_obj(local_cluster, dm)
    assert obj["status"]["phase"] == "Resolving"
    assert obj["status"]["candidateRevision"]["hash"] == result.record.hash
    resolved = _conditions(obj)["Resolved"]
    assert (resolved["status"], resolved["reason"]) == ("True", "DigestResolved")
    assert len(_events(local_cluster, dm, "Resolved")) == 1

    # The DecisionModel gone: the step ends for good with DecisionModelGone.
    local_cluster.kubectl("delete", "dm", dm.name, "-n", dm.namespace)
    with pytest.raises(ApplicationError) as err:
        await env.run(resolve, asked)
    assert (err.value.type, err.value.non_retryable) == ("DecisionModelGone", True)


async def test_the_shared_store_of_a_revision_from_before_per_revision_stores_goes_with_it(
    local_cluster: LocalCluster, kube: Kube, settings: RolloutSettings, dm: DMRef, env: Any
) -> None:
    """Seed 000 "Migration": a stable promoted before per-revision stores mounts the shared
    ``<dm>-store``; when that revision is deleted (after the next promotion) the shared store
    goes with it. A revision that does not mount it leaves it alone."""
    ns = dm.namespace
    owner = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "name": dm.name,
        "uid": dm.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    labels = {"decisionmodel.io/name": dm.name}

    def deployment(rev: str, claim: str) -> dict[str, Any]:
        pod_labels = {**labels, "decisionmodel.io/revision": rev}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"router-{rev}", "namespace": ns, "labels": pod_labels,
                         "ownerReferences": [owner]},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": pod_labels},
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        "containers": [{"name": "ollaya", "image": "ollaya/ollaya:0.10.0"}],
                        "volumes": [{"name": "models", "persistentVolumeClaim": {
                            "claimName": claim, "readOnly": True}}],
                    },
                },
            },
        }  # fmt: skip

    shared = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "router-store", "namespace": ns, "labels": labels,
                     "ownerReferences": [owner]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }  # fmt: skip
    new, old = _rev(), _rev()
    local_cluster.apply(
        [shared, deployment(new, f"router-store-{new}"), deployment(old, "router-store")]
    )
    delete = DeleteRevisionActivities(kube, settings).delete_revision
    kept = await env.run(delete, DeleteRevisionInput(dm=dm, revision=new, reason="test"))
    assert "PersistentVolumeClaim/router-store" not in kept.deleted
    gone = await env.run(delete, DeleteRevisionInput(dm=dm, revision=old, reason="test"))
    assert gone.deleted == [f"Deployment/router-{old}", "PersistentVolumeClaim/router-store"]

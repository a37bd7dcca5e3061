"""Prefetch Jobs in the local cluster end the way the real Job would (issue 2, deliverable 6).

Every Job here is the one the product renders (``render_prefetch_job`` with its store from
``render_store_pvc``), applied with kubectl; only the owner reference is swapped for a
placeholder ConfigMap so garbage collection keeps the objects (no DecisionModel exists). The
real Job controller reads the Pod outcomes the fake kubelet writes: exit 0 completes the Job,
3/4/5 fail it at once through the rendered podFailurePolicy, 1 is retried under backoffLimit.

All scenarios are started together by one module fixture and each test waits for its own Job,
so the Job controller's 10 s retry backoff is paid once, not once per test.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.helpers import assert_eventually

from decisionmodel.engine.names import parse_model_name
from decisionmodel.engine.params import OwnerRef, PrefetchParams, StoreParams, default_image
from decisionmodel.engine.render import render_prefetch_job, render_store_pvc
from decisionmodel.engine.render.labels import prefetch_job_name, store_pvc_name
from decisionmodel.engine.render.prefetch_job import (
    BACKOFF_LIMIT,
    CONTAINER_NAME,
    EXIT_DIGEST_MISMATCH,
    EXIT_MODEL_NOT_FOUND,
    EXIT_TAG_MOVED,
    REASON_DIGEST_MISMATCH,
    REASON_MODEL_NOT_FOUND,
    REASON_PULL_FAILED,
    REASON_TAG_MOVED,
)
from localenv.cluster import LocalCluster
from localenv.env import Simulators
from simulators.volumes import volume_dir

REVISION = "0a1b2c3d4e5f6a7b"
# The Job controller's first pod-failure backoff: 10 s (DefaultJobPodFailureBackOff).
JOB_BACKOFF_SECONDS = 10.0
WAIT_SECONDS = 30.0
WAIT_RETRIED_SECONDS = 45.0


@dataclass(frozen=True)
class Scenario:
    dm: str
    model: str
    expected_digest: str
    store_manifest_path: str

    @property
    def job(self) -> str:
        return prefetch_job_name(self.dm, REVISION)

    @property
    def claim(self) -> str:
        return store_pvc_name(self.dm, REVISION)


@dataclass(frozen=True)
class PrefetchRuns:
    namespace: str
    scenarios: dict[str, Scenario]
    registry_digests: dict[str, str]
    sim_state: Path


def _registry(sim: Simulators) -> httpx.Client:
    return httpx.Client(base_url=sim.registry_url, trust_env=False, timeout=10)


def _put_model(reg: httpx.Client, repo: str, tag: str) -> str:
    response = reg.put(f"/_sim/models/library/{repo}/{tag}", json={})
    response.raise_for_status()
    digest: str = response.json()["digest"]
    return digest


def _owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    # The rendered reference names a DecisionModel that does not exist here; a reference to a
    # missing owner would let the garbage collector delete the Job mid-test.
    obj["metadata"]["ownerReferences"] = [owner]
    return obj


def _objects(
    namespace: str, dm: str, model: str, digest: str, pinned: bool, owner: dict[str, Any]
) -> tuple[Scenario, list[dict[str, Any]]]:
    ref = parse_model_name(model, default_registry=Simulators.registry_url)
    owner_ref = OwnerRef(name=dm, uid=str(uuid.uuid4()))
    store = StoreParams(owner=owner_ref, namespace=namespace, revision=REVISION, store_size="1Gi")
    params = PrefetchParams(
        owner=owner_ref,
        namespace=namespace,
        revision=REVISION,
        model=model,
        digest=digest,
        digest_pinned=pinned,
        image=default_image(),
        store_claim_name=store_pvc_name(dm, REVISION),
        registry_url=Simulators.registry_url,
        store_manifest_path=ref.store_manifest_path,
    )
    scenario = Scenario(dm, model, digest, ref.store_manifest_path)
    pvc = _owned_by(render_store_pvc(store), owner)
    job = _owned_by(render_prefetch_job(params), owner)
    return scenario, [pvc, job]


@pytest.fixture(scope="module")
def runs(local_cluster: LocalCluster, simulators: Simulators) -> Iterator[PrefetchRuns]:
    """Sets up the registry for every scenario and applies all Jobs at once."""
    suffix = uuid.uuid4().hex[:8]
    namespace = f"pf-{suffix}"
    repo = f"pf-{suffix}"
    local_cluster.kubectl("create", "namespace", namespace)
    local_cluster.kubectl("create", "configmap", "owner", "-n", namespace)
    cm = local_cluster.kubectl_json("get", "configmap", "owner", "-n", namespace)
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": cm["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    with _registry(simulators) as reg:
        digests = {tag: _put_model(reg, repo, tag) for tag in ("ok", "pinned", "moved", "flaky")}
        # The tag moves between dmrollout's resolve (1st read, here) and the Job's pull (2nd).
        reg.put(f"/_sim/faults/library/{repo}/moved", json={"tag_moved": True}).raise_for_status()
        resolved = reg.get(f"/v2/library/{repo}/manifests/moved")
        resolved.raise_for_status()
        moved_resolved = hashlib.sha256(resolved.content).hexdigest()
        assert moved_resolved == digests["moved"]
        # Transient: the registry answers 503 once, then serves the tag.
        reg.put(
            f"/_sim/faults/library/{repo}/flaky", json={"status": 503, "count": 1}
        ).raise_for_status()
    not_the_manifest = hashlib.sha256(b"some other manifest").hexdigest()
    plans = {
        "ok": (f"{repo}:ok", digests["ok"], True),
        "missing": (f"{repo}:ghost", hashlib.sha256(b"ghost").hexdigest(), False),
        "pinned": (f"{repo}:pinned", not_the_manifest, True),
        "moved": (f"{repo}:moved", moved_resolved, False),
        "flaky": (f"{repo}:flaky", digests["flaky"], False),
    }
    scenarios: dict[str, Scenario] = {}
    objects: list[dict[str, Any]] = []
    for name, (model, digest, pinned) in plans.items():
        scenario, objs = _objects(namespace, name, model, digest, pinned, owner)
        scenarios[name] = scenario
        objects.extend(objs)
    local_cluster.apply(objects)
    yield PrefetchRuns(namespace, scenarios, digests, simulators.state_dir)
    with _registry(simulators) as reg:
        reg.delete(f"/_sim/faults/library/{repo}/moved")
        reg.delete(f"/_sim/faults/library/{repo}/flaky")
    local_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


# -- reading the cluster -------------------------------------------------------------------


def _job(cluster: LocalCluster, runs: PrefetchRuns, scenario: Scenario) -> dict[str, Any]:
    job: dict[str, Any] = cluster.kubectl_json("get", "job", scenario.job, "-n", runs.namespace)
    return job


def _finished(
    cluster: LocalCluster, runs: PrefetchRuns, scenario: Scenario, timeout: float = WAIT_SECONDS
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Waits for the Job's terminal condition; returns (type, condition, job)."""

    def check() -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        job = _job(cluster, runs, scenario)
        for c in job.get("status", {}).get("conditions", []):
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return str(c["type"]), c, job
        return None

    result = assert_eventually(check, timeout, what=f"job {scenario.job} finished")
    assert result is not None
    return result


def _pods(cluster: LocalCluster, runs: PrefetchRuns, scenario: Scenario) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.kubectl_json(
        "get", "pods", "-n", runs.namespace, "-l", f"batch.kubernetes.io/job-name={scenario.job}"
    )["items"]
    return sorted(items, key=lambda p: str(p["metadata"]["creationTimestamp"]))


def _terminated(pod: dict[str, Any]) -> dict[str, Any]:
    status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == CONTAINER_NAME)
    terminated: dict[str, Any] = status["state"]["terminated"]
    return terminated


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _assert_failed_at_once(
    cluster: LocalCluster, runs: PrefetchRuns, scenario: Scenario, exit_code: int, reason: str
) -> str:
    kind, condition, job = _finished(cluster, runs, scenario)
    assert kind == "Failed", job["status"]
    # The rendered podFailurePolicy's FailJob rule, not backoffLimit exhaustion.
    assert condition["reason"] == "PodFailurePolicy", condition
    assert job["status"].get("failed") == 1 and not job["status"].get("succeeded"), job["status"]
    pods = _pods(cluster, runs, scenario)
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    assert pods[0]["status"]["phase"] == "Failed"
    terminated = _terminated(pods[0])
    assert terminated["exitCode"] == exit_code, terminated
    message: str = terminated["message"]
    # The first line of /dev/termination-log: "<Reason>: <message>" (render/prefetch_job.py).
    assert message.startswith(f"{reason}: "), message
    return message


# -- the scenarios -------------------------------------------------------------------------


def test_prefetch_succeeds_and_stores_the_manifest(
    local_cluster: LocalCluster, runs: PrefetchRuns
) -> None:
    scenario = runs.scenarios["ok"]
    kind, _, job = _finished(local_cluster, runs, scenario)
    assert kind == "Complete", job["status"]
    assert job["status"].get("succeeded") == 1 and not job["status"].get("failed"), job["status"]
    (pod,) = _pods(local_cluster, runs, scenario)
    assert pod["status"]["phase"] == "Succeeded"
    assert _terminated(pod)["exitCode"] == 0
    # The store is the PVC's volume, at the path the renderer put in STORE_MANIFEST.
    assert scenario.store_manifest_path == (
        f"manifests/127.0.0.1_5000/library/{scenario.model.replace(':', '/')}"
    )
    store = volume_dir(runs.sim_state, runs.namespace, scenario.claim)
    manifest = (store / scenario.store_manifest_path).read_bytes()
    assert hashlib.sha256(manifest).hexdigest() == scenario.expected_digest
    assert scenario.expected_digest == runs.registry_digests["ok"]
    # Every blob the manifest names was pulled next to it.
    doc = json.loads(manifest)
    for desc in [doc["config"], *doc["layers"]]:
        blob = (store / "blobs" / desc["digest"].replace(":", "-")).read_bytes()
        assert "sha256:" + hashlib.sha256(blob).hexdigest() == desc["digest"]


def test_unknown_tag_fails_at_once_with_model_not_found(
    local_cluster: LocalCluster, runs: PrefetchRuns
) -> None:
    scenario = runs.scenarios["missing"]
    message = _assert_failed_at_once(
        local_cluster, runs, scenario, EXIT_MODEL_NOT_FOUND, REASON_MODEL_NOT_FOUND
    )
    assert scenario.model in message and "not found in registry" in message
    store = volume_dir(runs.sim_state, runs.namespace, scenario.claim)
    assert not (store / scenario.store_manifest_path).exists()


def test_pinned_digest_mismatch_fails_with_exit_4(
    local_cluster: LocalCluster, runs: PrefetchRuns
) -> None:
    scenario = runs.scenarios["pinned"]
    message = _assert_failed_at_once(
        local_cluster, runs, scenario, EXIT_DIGEST_MISMATCH, REASON_DIGEST_MISMATCH
    )
    got = runs.registry_digests["pinned"]
    assert message == f"{REASON_DIGEST_MISMATCH}: expected {scenario.expected_digest} got {got}"


def test_tag_moved_after_resolve_fails_with_exit_5(
    local_cluster: LocalCluster, runs: PrefetchRuns
) -> None:
    scenario = runs.scenarios["moved"]
    message = _assert_failed_at_once(
        local_cluster, runs, scenario, EXIT_TAG_MOVED, REASON_TAG_MOVED
    )
    # The Job stored the moved manifest: its digest differs from the one resolved earlier.
    store = volume_dir(runs.sim_state, runs.namespace, scenario.claim)
    moved = hashlib.sha256((store / scenario.store_manifest_path).read_bytes()).hexdigest()
    assert moved != scenario.expected_digest
    assert message == (
        f"{REASON_TAG_MOVED}: {scenario.model} now has digest {moved}, "
        f"resolved {scenario.expected_digest}"
    )


def test_transient_registry_error_is_retried_by_the_job_controller(
    local_cluster: LocalCluster, runs: PrefetchRuns
) -> None:
    scenario = runs.scenarios["flaky"]
    kind, _, job = _finished(local_cluster, runs, scenario, WAIT_RETRIED_SECONDS)
    assert kind == "Complete", job["status"]
    assert job["spec"]["backoffLimit"] == BACKOFF_LIMIT
    assert job["status"].get("failed") == 1 and job["status"].get("succeeded") == 1
    first, second = _pods(local_cluster, runs, scenario)
    failed = _terminated(first)
    assert failed["exitCode"] == 1, failed
    assert failed["message"].startswith(f"{REASON_PULL_FAILED}: "), failed
    assert "503" in failed["message"], failed
    assert second["status"]["phase"] == "Succeeded"
    # The replacement came from the Job controller's backoff, not from an immediate restart.
    gap = _time(second["metadata"]["creationTimestamp"]) - _time(failed["finishedAt"])
    assert gap.total_seconds() >= JOB_BACKOFF_SECONDS - 1, gap
    store = volume_dir(runs.sim_state, runs.namespace, scenario.claim)
    manifest = (store / scenario.store_manifest_path).read_bytes()
    assert hashlib.sha256(manifest).hexdigest() == scenario.expected_digest

"""Seed 001's "Condition reasons you may see" table, row by row, on a live controller.

Every row of the reference operator's table names a reason and the phase / conditions it lands
on. Each case below produces that reason on the local cluster (the smallest scenario that does:
fault annotations the runtime simulator honours, registry faults, a foreign or missing object)
and asserts exactly what the table's "Phase / condition" column says: the phase, and each
condition it lists with its status and, for Ready / ModelReady / Degraded / Resolved, the row's
reason; for the Pod readiness-gate rows (DigestMismatch, DeviceMismatch, NotPinned) the Pod's
``decisionmodel.io/model-ready`` condition is False with that reason. Where the table says the
phase is unchanged or the stable keeps serving, the case asserts that too, and a row that has a
stable revision asserts the stable is still the one it set up.

This file is the contract of issue 22, point 2: the table is the specification, one
parametrized case per row (ids are the reasons).

The controller of these tests (conftest.py) runs with ``--allowed-registries <the registry
simulator> --allow-insecure-registries`` and without ``--allow-image-override``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from harness.helpers import eventually
from harness.rollout_harness import (
    SIM_PREFIX,
    RolloutHarness,
    golden_jsonl,
    put_model,
)

from localenv.env import REGISTRY_URL

GATE = "decisionmodel.io/model-ready"
READY_WITHIN = 90  # a first rollout of laya:en to phase Ready
EVALUATION_CASES = "cases.jsonl"


@dataclass
class Subject:
    """What a setup made: the stable revision (None without one), the Pod whose readiness
    gate a row is about, and what to undo afterwards."""

    stable: str | None = None
    pod: str | None = None
    undo: list[Callable[[], object]] = field(default_factory=list)


Setup = Callable[[RolloutHarness, str], Awaitable[Subject]]


@dataclass(frozen=True)
class Expect:
    """The table's "Phase / condition" column. ``conditions`` maps a type to (status, reason);
    reason None checks the status only. ``gate`` is the reason of the Pod's readiness gate."""

    phase: str | None = None
    conditions: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    gate: str | None = None


@dataclass(frozen=True)
class Row:
    reason: str
    setup: Setup
    expect: Expect
    within: float = 60.0  # seconds from the end of the setup


# --- helpers -----------------------------------------------------------------------------------


def pod_conditions(h: RolloutHarness, pod: str) -> dict[str, dict[str, Any]]:
    """The Pod's conditions by type: its readiness gate and the Ready the kubelet derives."""
    obj = h.get("pod", pod) or {}
    return {c["type"]: dict(c) for c in (obj.get("status") or {}).get("conditions") or []}


async def serving(h: RolloutHarness, name: str, spec: dict[str, Any] | None = None) -> str:
    """A DecisionModel (laya:en unless ``spec`` says otherwise) Ready with every replica
    model-ready; its stable revision."""
    full = {"model": "laya:en", **(spec or {})}
    h.create_dm(name, full)
    replicas = int(full.get("replicas", 1))

    def ready() -> bool:
        status = h.status(name)
        return (
            status.get("phase") == "Ready"
            and (status.get("replicas") or {}).get("modelReady") == replicas
        )

    await eventually(ready, READY_WITHIN + 30 * (replicas - 1), what=f"{name} Ready")
    return str(h.status(name)["stableRevision"]["hash"])


def live_pods(h: RolloutHarness, name: str, revision: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in h.pods(name, revision)
        if not p["metadata"].get("deletionTimestamp")
    )


def annotate(h: RolloutHarness, kind: str, obj: str, key: str, value: str) -> None:
    h.kubectl("annotate", kind, obj, "--overwrite", f"{SIM_PREFIX}{key}={value}")


def own_model(tag: str = "v1") -> str:
    """A model of this case's own in the registry (its repo name), so a registry fault or a
    deletion touches no other test."""
    repo = f"rt-{uuid.uuid4().hex[:8]}"
    put_model(repo, tag, revision=repo)
    return repo


def evaluation(configmap: str, **extra: Any) -> dict[str, Any]:
    return {
        "datasetRef": {"configMapRef": {"name": configmap, "key": EVALUATION_CASES}},
        "minAccuracy": "0.80",
        **extra,
    }


def golden_configmap(h: RolloutHarness, name: str, n: int) -> None:
    h.golden_configmap(name, golden_jsonl(n))


def lose_store(h: RolloutHarness, name: str, revision: str) -> None:
    """The stable's store PVC deleted out of band, with the Pods that mount it (the runbook's
    way past pvc-protection), so the PVC goes and the store is lost."""
    h.kubectl("delete", "pvc", f"{name}-store-{revision}", "--wait=false")
    selector = f"decisionmodel.io/name={name},decisionmodel.io/revision={revision}"
    h.kubectl("delete", "pod", "-l", selector, "--wait=false")


# --- setups, one per row -----------------------------------------------------------------------


async def no_model_ready_pods(h: RolloutHarness, name: str) -> Subject:
    stable = await serving(h, name)
    (pod,) = live_pods(h, name, stable)
    annotate(h, "pod", pod, "lose-model", "true")
    return Subject(stable=stable)


async def replicas_not_model_ready(h: RolloutHarness, name: str) -> Subject:
    # ReadWriteMany, so that the two replicas raise no CacheNotShareable of their own.
    stable = await serving(h, name, {"replicas": 2, "cache": {"accessModes": ["ReadWriteMany"]}})
    annotate(h, "pod", live_pods(h, name, stable)[0], "lose-model", "true")
    return Subject(stable=stable)


def pod_fault(key: str, value: str) -> Setup:
    """A serving stable whose one Pod then reports the fault (simulators/pod_faults.py)."""

    async def setup(h: RolloutHarness, name: str) -> Subject:
        stable = await serving(h, name)
        (pod,) = live_pods(h, name, stable)
        annotate(h, "pod", pod, key, value)
        return Subject(stable=stable, pod=pod)

    return setup


async def cache_not_shareable(h: RolloutHarness, name: str) -> Subject:
    h.create_dm(name, {"model": "laya:en", "replicas": 2})  # the default store: ReadWriteOnce
    return Subject()


async def cache_spec_immutable(h: RolloutHarness, name: str) -> Subject:
    stable = await serving(h, name)
    # Not model-affecting (no new revision): applied to the existing PVC, whose access modes
    # are immutable.
    h.update_spec(name, {"cache": {"accessModes": ["ReadWriteMany"]}})
    return Subject(stable=stable)


def first_rollout(spec: dict[str, Any]) -> Setup:
    async def setup(h: RolloutHarness, name: str) -> Subject:
        h.create_dm(name, spec)
        return Subject()

    return setup


async def secret_not_allowed(h: RolloutHarness, name: str) -> Subject:
    h.api_key_secret(f"{name}-key", "k-reason-table")
    stable = await serving(
        h, name, {"auth": {"apiKeySecretRef": {"name": f"{name}-key", "key": "token"}}}
    )
    h.kubectl("label", "secret", f"{name}-key", "decisionmodel.io/api-key-")
    return Subject(stable=stable)


async def model_not_found(h: RolloutHarness, name: str) -> Subject:
    h.create_dm(name, {"model": f"laya:nowhere-{uuid.uuid4().hex[:8]}"})
    return Subject()


async def dataset_invalid(h: RolloutHarness, name: str) -> Subject:
    # No stable to fall back to: Failed (the table's other branch, RolledBack, is the
    # EvaluationFailed row's).
    good = golden_jsonl(3).splitlines()
    h.golden_configmap(f"{name}-golden", "\n".join([good[0], "{not json", good[1]]) + "\n")
    h.create_dm(name, {"model": "laya:en", "rollout": {"evaluation": evaluation(f"{name}-golden")}})
    return Subject()


async def evaluation_failed(h: RolloutHarness, name: str) -> Subject:
    # A stable serves: RolledBack.
    stable = await serving(h, name)
    tag = f"weak-{uuid.uuid4().hex[:6]}"
    put_model("laya", tag, accuracy=0.30, revision=tag)
    golden_configmap(h, f"{name}-golden", 20)
    h.update_spec(
        name, {"model": f"laya:{tag}", "rollout": {"evaluation": evaluation(f"{name}-golden")}}
    )
    return Subject(stable=stable)


async def evaluation_timeout(h: RolloutHarness, name: str) -> Subject:
    # The shortest deadline the API allows (1m) and a model answering in 3 s, one forward pass
    # at a time: 40 cases need 2 minutes. A fault on the Namespace is in place before the Pod's
    # first request. No stable: Failed.
    annotate(h, "namespace", h.namespace, "latency-ms", "3000")
    subject = Subject()
    subject.undo.append(
        lambda: h.cluster.kubectl(
            "annotate", "namespace", h.namespace, f"{SIM_PREFIX}latency-ms-", check=False
        )
    )
    golden_configmap(h, f"{name}-golden", 40)
    rollout = {"evaluation": evaluation(f"{name}-golden"), "timeouts": {"evaluating": "1m"}}
    h.create_dm(name, {"model": "laya:en", "rollout": rollout})
    return subject


async def resource_conflict(h: RolloutHarness, name: str) -> Subject:
    # The Service under the DecisionModel's name stops being its own (no controller owner):
    # the operator must neither adopt nor change it.
    stable = await serving(h, name)
    h.kubectl(
        "patch", "service", name, "--type=json",
        "-p", json.dumps([{"op": "remove", "path": "/metadata/ownerReferences"}]),
    )  # fmt: skip
    subject = Subject(stable=stable)
    subject.undo.append(lambda: h.kubectl("delete", "service", name, "--wait=false"))
    return subject


async def store_lost(h: RolloutHarness, name: str) -> Subject:
    repo = own_model()
    stable = await serving(h, name, {"model": f"{repo}:v1"})
    # The recovery's pull waits 8 s for the manifest: StoreLost stays visible that long.
    with httpx.Client(trust_env=False) as c:
        c.put(
            f"{REGISTRY_URL}/_sim/faults/library/{repo}/v1", json={"delay_seconds": 8, "count": 1}
        ).raise_for_status()
    lose_store(h, name, stable)
    return Subject(stable=stable)


async def store_prefetch_failed(h: RolloutHarness, name: str) -> Subject:
    repo = own_model()
    stable = await serving(h, name, {"model": f"{repo}:v1"})
    # The model is gone from the registry: the recovery prefetch fails for good (ModelNotFound).
    with httpx.Client(trust_env=False) as c:
        c.delete(f"{REGISTRY_URL}/_sim/models/library/{repo}/v1").raise_for_status()
    lose_store(h, name, stable)
    return Subject(stable=stable)


async def store_terminating(h: RolloutHarness, name: str) -> Subject:
    stable = await serving(h, name)
    # Still mounted by the stable Pods: held by pvc-protection.
    h.kubectl("delete", "pvc", f"{name}-store-{stable}", "--wait=false")
    return Subject(stable=stable)


# --- the table ---------------------------------------------------------------------------------

T, F = "True", "False"

ROWS = [
    Row(
        "NoModelReadyPods",
        no_model_ready_pods,
        Expect(
            "Degraded",
            {
                "Ready": (F, "NoModelReadyPods"),
                "ModelReady": (F, "NoModelReadyPods"),
                "Degraded": (T, "NoModelReadyPods"),
            },
        ),
    ),
    Row(
        "ReplicasNotModelReady",
        replicas_not_model_ready,
        Expect(
            "Degraded",
            {
                "Ready": (T, "ReplicasNotModelReady"),
                "ModelReady": (F, "ReplicasNotModelReady"),
                "Degraded": (T, "ReplicasNotModelReady"),
            },
        ),
    ),
    Row("DigestMismatch", pod_fault("digest", "e" * 64), Expect(gate="DigestMismatch")),
    Row("DeviceMismatch", pod_fault("device", "cuda:0"), Expect(gate="DeviceMismatch")),
    Row("NotPinned", pod_fault("never-pin", "true"), Expect(gate="NotPinned")),
    Row(
        "CacheNotShareable",
        cache_not_shareable,
        Expect("Ready", {"Degraded": (T, "CacheNotShareable")}),  # phase unchanged: serving
        within=READY_WITHIN + 30,
    ),
    Row(
        "CacheSpecImmutable",
        cache_spec_immutable,
        Expect("Ready", {"Degraded": (T, "CacheSpecImmutable")}),  # phase unchanged
    ),
    Row(
        "RegistryNotAllowed",
        first_rollout({"model": "registry.example.com/acme/triage:v3"}),
        Expect("Failed", {"Ready": (F, "RegistryNotAllowed")}),
    ),
    Row(
        "ImageOverrideNotAllowed",
        first_rollout({"model": "laya:en", "image": "registry.example.com/acme/ollaya:custom"}),
        Expect("Failed", {"Ready": (F, "ImageOverrideNotAllowed")}),
    ),
    Row(
        "SecretNotAllowed",
        secret_not_allowed,
        Expect("Degraded", {"Ready": (F, "SecretNotAllowed")}),
    ),
    Row(
        "InvalidModelName",
        first_rollout({"model": "a/b/c/laya:v1"}),  # four segments: passes the CRD, not the parse
        Expect("Failed", {"Ready": (F, "InvalidModelName")}),
    ),
    Row(
        "ModelNotFound",
        model_not_found,
        Expect("Failed", {"Resolved": (F, "ModelNotFound")}),
        within=90,
    ),
    Row(
        "DatasetInvalid",
        dataset_invalid,
        Expect("Failed", {"Degraded": (T, "DatasetInvalid")}),
        within=READY_WITHIN,
    ),
    Row(
        "EvaluationFailed",
        evaluation_failed,
        Expect("RolledBack", {"Degraded": (T, "EvaluationFailed")}),
        within=READY_WITHIN,
    ),
    Row(
        "EvaluationTimeout",
        evaluation_timeout,
        Expect("Failed", {"Degraded": (T, "EvaluationTimeout")}),
        within=60 + READY_WITHIN,  # the 1m deadline after the candidate started
    ),
    Row(
        "ResourceConflict",
        resource_conflict,
        Expect(None, {"Ready": (F, "ResourceConflict"), "Degraded": (T, "ResourceConflict")}),
    ),
    Row("StoreLost", store_lost, Expect(None, {"Degraded": (T, "StoreLost")})),
    Row(
        "StorePrefetchFailed",
        store_prefetch_failed,
        Expect(None, {"Degraded": (T, "StorePrefetchFailed")}),
        within=90,
    ),
    Row(
        "StoreTerminating",
        store_terminating,
        # The stable keeps serving.
        Expect(None, {"Degraded": (T, "StoreTerminating"), "Ready": (T, None)}),
    ),
]


def observe(h: RolloutHarness, name: str, subject: Subject, expect: Expect) -> str:
    """What the DecisionModel (and the Pod) show, as one line, from one read of each; asserts
    it is what the row expects."""
    status = h.status(name)
    seen = {c["type"]: (c.get("status"), c.get("reason")) for c in status.get("conditions") or []}
    line = f"phase={status.get('phase')} " + " ".join(
        f"{t}={s}/{r}" for t, (s, r) in sorted(seen.items())
    )
    pod: dict[str, dict[str, Any]] = {}
    if subject.pod is not None:
        pod = pod_conditions(h, subject.pod)
        gate, ready = pod.get(GATE, {}), pod.get("Ready", {})
        line += (
            f" pod {subject.pod}: {GATE}={gate.get('status')}/{gate.get('reason')}"
            f" Ready={ready.get('status')}"
        )
    if expect.phase is not None:
        assert status.get("phase") == expect.phase, line
    for type_, (want_status, want_reason) in expect.conditions.items():
        got_status, got_reason = seen.get(type_, (None, None))
        assert got_status == want_status, f"{type_}: {line}"
        assert want_reason is None or got_reason == want_reason, f"{type_}: {line}"
    if expect.gate is not None:
        gate = pod.get(GATE, {})
        assert (gate.get("status"), gate.get("reason")) == ("False", expect.gate), line
        # The gate keeps the Pod out of the Service: the Pod is not Ready.
        assert pod.get("Ready", {}).get("status") == "False", line
    if subject.stable is not None:
        assert (status.get("stableRevision") or {}).get("hash") == subject.stable, line
    return line


@pytest.mark.parametrize("row", [pytest.param(r, id=r.reason) for r in ROWS])
async def test_the_reason_lands_where_the_table_says(ctl: RolloutHarness, row: Row) -> None:
    name = f"rt-{row.reason.lower()}"
    subject = await row.setup(ctl, name)
    try:
        line = await eventually(
            lambda: observe(ctl, name, subject, row.expect), row.within, what=row.reason
        )
        print(f"{row.reason}: {line}")
    finally:
        for undo in subject.undo:
            undo()
        ctl.kubectl("delete", "dm", name, "--wait=false")

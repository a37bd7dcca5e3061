"""Conditions the reference shows (seed 001), seen through kubectl on a live controller: Ready
without a stable (NoStableRevision), Resolved=False on ModelNotFound, Degraded=True for a
rejected candidate, an Event when a Pod serves the wrong digest. Issue 11, point 9; issue 22:
a failed first rollout's reason on Ready and Degraded, health after RolledBack."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from harness.helpers import eventually
from harness.rollout_harness import (
    REGISTRY_URL,
    SIM_PREFIX,
    RolloutHarness,
    golden_jsonl,
    put_model,
)


def condition(h: RolloutHarness, name: str, type_: str) -> dict[str, Any] | None:
    for c in h.status(name).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


def has(h: RolloutHarness, name: str, type_: str, status: str, reason: str) -> bool:
    found = condition(h, name, type_)
    return found is not None and (found["status"], found["reason"]) == (status, reason)


def weak_model_gate(h: RolloutHarness, configmap: str) -> dict[str, Any]:
    """laya:weak (accuracy 0.30) in the registry, a golden set, and a gate it fails."""
    put_model("laya", "weak", accuracy=0.30, revision="weak")
    h.golden_configmap(configmap, golden_jsonl(20))
    return {
        "datasetRef": {"configMapRef": {"name": configmap, "key": "cases.jsonl"}},
        "minAccuracy": "0.80",
    }


async def test_ready_is_false_with_no_stable_revision_yet(ctl: RolloutHarness) -> None:
    repo = f"ns-{uuid.uuid4().hex[:8]}"
    put_model(repo, "v1", revision=repo)
    fault = f"{REGISTRY_URL}/_sim/faults/library/{repo}/v1"
    with httpx.Client(trust_env=False) as c:
        c.put(fault, json={"delay_seconds": 5.0, "count": 1}).raise_for_status()
    ctl.create_dm("first", {"model": f"{repo}:v1"})
    await eventually(
        lambda: has(ctl, "first", "Ready", "False", "NoStableRevision"), 60, what="NoStable"
    )
    await eventually(lambda: has(ctl, "first", "Ready", "True", "Serving"), 120, what="Serving")


async def test_model_not_found_sets_resolved_false(ctl: RolloutHarness) -> None:
    tag = f"nowhere-{uuid.uuid4().hex[:8]}"  # published below: no other test may share it
    ctl.create_dm("nomodel", {"model": f"laya:{tag}"})
    await eventually(
        lambda: has(ctl, "nomodel", "Resolved", "False", "ModelNotFound"), 90, what="Resolved"
    )
    assert ctl.status("nomodel")["phase"] == "Failed"
    # Seed 001's table: the reason is on Ready and Degraded, where alerts read it (issue 22).
    await eventually(
        lambda: has(ctl, "nomodel", "Ready", "False", "ModelNotFound"), 60, what="Ready reason"
    )
    assert has(ctl, "nomodel", "Degraded", "True", "ModelNotFound")
    assert condition(ctl, "nomodel", "Stalled") is None  # re-resolved by itself: not stalled
    ready = condition(ctl, "nomodel", "Ready")
    assert ready is not None and "the tag is resolved again at" in ready["message"], ready
    # The tag is published: re-resolved by itself (first after 30 s), no annotation.
    put_model("laya", tag, revision="published-late")
    await eventually(lambda: has(ctl, "nomodel", "Ready", "True", "Serving"), 150, what="Serving")


async def test_a_first_rollout_failing_its_gates_shows_the_reason_on_ready_and_degraded(
    ctl: RolloutHarness,
) -> None:
    evaluation = weak_model_gate(ctl, "golden-first")
    ctl.create_dm("weakfirst", {"model": "laya:weak", "rollout": {"evaluation": evaluation}})
    await eventually(
        lambda: has(ctl, "weakfirst", "Degraded", "True", "EvaluationFailed"), 120, what="Degraded"
    )
    assert ctl.status("weakfirst")["phase"] == "Failed"
    assert has(ctl, "weakfirst", "Ready", "False", "EvaluationFailed")
    # A retry runs again: the failure's Degraded goes while it does.
    ctl.update_spec("weakfirst", {"model": "laya:en"})
    await eventually(lambda: has(ctl, "weakfirst", "Ready", "True", "Serving"), 120, what="Serving")
    degraded = condition(ctl, "weakfirst", "Degraded")
    assert degraded is not None and degraded["status"] == "False", degraded


async def test_a_rejected_candidate_sets_degraded_with_its_reason(ctl: RolloutHarness) -> None:
    evaluation = weak_model_gate(ctl, "golden")
    ctl.create_dm("gated", {"model": "laya:en", "rollout": {"evaluation": evaluation}})
    await eventually(lambda: ctl.status("gated").get("phase") == "Ready", 120, what="Ready")
    # Current: the spec serves (the controller's reconcile after the promotion's write says so).
    await eventually(lambda: condition(ctl, "gated", "Reconciling") is None, 30, what="current")
    ctl.update_spec("gated", {"model": "laya:weak"})
    # kstatus-aware tools see the new generation in progress while it rolls out...
    await eventually(
        lambda: (condition(ctl, "gated", "Reconciling") or {}).get("status") == "True",
        60,
        what="Reconciling",
    )
    reconciling = condition(ctl, "gated", "Reconciling")
    assert reconciling is not None and "generation" in reconciling["message"], reconciling
    await eventually(
        lambda: has(ctl, "gated", "Degraded", "True", "EvaluationFailed"), 120, what="Degraded"
    )
    assert ctl.status("gated")["phase"] == "RolledBack"
    assert has(ctl, "gated", "Ready", "True", "CandidateRejected")
    # kstatus-aware tools (Helm 4 --wait, Flux, Argo CD) read it as stalled, not progressing.
    await eventually(
        lambda: has(ctl, "gated", "Stalled", "True", "EvaluationFailed"), 60, what="Stalled"
    )
    assert condition(ctl, "gated", "Reconciling") is None  # ...and failed, not in progress

    # Health is never hidden by that history (issue 22): the stable losing its only Pod's
    # model shows as Degraded with the health reason; failedRevision stays recorded; once it is
    # whole again the phase is RolledBack again.
    stable = ctl.status("gated")["stableRevision"]["hash"]
    pod = ctl.pods("gated", stable)[0]["metadata"]["name"]
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}lose-model=true")
    await eventually(
        lambda: ctl.status("gated").get("phase") == "Degraded", 120, what="Degraded after loss"
    )
    degraded = condition(ctl, "gated", "Degraded")
    assert degraded is not None and degraded["status"] == "True"
    assert degraded["reason"] in ("NoModelReadyPods", "ReplicasNotModelReady"), degraded
    assert ctl.status("gated")["failedRevision"]["reason"] == "EvaluationFailed"
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}lose-model-")
    await eventually(
        lambda: has(ctl, "gated", "Degraded", "True", "EvaluationFailed"), 120, what="whole again"
    )
    assert ctl.status("gated")["phase"] == "RolledBack"


async def test_a_pod_serving_another_digest_raises_an_event(ctl: RolloutHarness) -> None:
    ctl.create_dm("wrongdigest", {"model": "laya:en"})
    await eventually(lambda: ctl.status("wrongdigest").get("phase") == "Ready", 90, what="Ready")
    stable = ctl.status("wrongdigest")["stableRevision"]["hash"]
    pod = ctl.pods("wrongdigest", stable)[0]["metadata"]["name"]
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}digest={'e' * 64}")

    def mismatch_event() -> bool:
        events = json.loads(ctl.kubectl("get", "events", "-o", "json"))["items"]
        return any(
            e.get("reason") == "DigestMismatch" and pod in (e.get("note") or e.get("message", ""))
            for e in events
        )

    await eventually(mismatch_event, 60, what="DigestMismatch Event")
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}digest-")


async def test_serving_pods_get_the_measured_requests_and_keep_them(ctl: RolloutHarness) -> None:
    """Issue 11, point 6: never BestEffort; the defaults are recorded on the revision."""
    ctl.create_dm("sized", {"model": "laya:en"})
    await eventually(lambda: ctl.status("sized").get("phase") == "Ready", 90, what="Ready")
    stable = ctl.status("sized")["stableRevision"]
    assert stable["resources"]["requests"] == {"cpu": "1", "memory": "3456Mi"}
    deployment = json.loads(
        ctl.kubectl("get", "deployment", f"sized-{stable['hash']}", "-o", "json")
    )
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "3456Mi"}
    pod = ctl.pods("sized", stable["hash"])[0]
    assert pod["status"].get("qosClass") == "Burstable"


async def test_an_autoscaler_scales_the_decision_model_through_its_scale_subresource(
    ctl: RolloutHarness,
) -> None:
    """Issue 11, point 11: HPA/KEDA target the DecisionModel (scale subresource with the stable
    Pods' selector); the controller applies the new spec.replicas in place."""
    ctl.create_dm("scaled", {"model": "laya:en", "cache": {"accessModes": ["ReadWriteMany"]}})
    await eventually(lambda: ctl.status("scaled").get("phase") == "Ready", 90, what="Ready")
    stable = ctl.status("scaled")["stableRevision"]["hash"]
    path = f"/apis/decisionmodel.io/v1alpha1/namespaces/{ctl.namespace}/decisionmodels/scaled/scale"

    def scale() -> Any:
        return json.loads(ctl.kubectl("get", "--raw", path))

    # Phase Ready is the rollout's write; replicas and selector are the controller's, written
    # by the reconcile that write triggers, so the two land a moment apart.
    await eventually(
        lambda: scale()["status"].get("replicas") == 1, 30, what="scale status.replicas 1"
    )
    assert scale()["spec"]["replicas"] == 1
    assert f"decisionmodel.io/revision={stable}" in scale()["status"]["selector"]
    ctl.kubectl("scale", "dm", "scaled", "--replicas=2")

    def two_ready() -> bool:
        status = ctl.status("scaled")
        return (status.get("replicas") or {}).get("modelReady") == 2

    await eventually(two_ready, 90, what="scaled to 2 in place")
    assert ctl.status("scaled")["stableRevision"]["hash"] == stable

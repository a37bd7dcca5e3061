"""The registry and Pod activities against the real control plane and the simulators.

resolve (digest = sha256 of the manifest bytes, the registry's refusals), warmup_inspect (gates
True and Pods Ready; NotPinned keeps the gate False and the activity waiting, DeviceMismatch on
every Pod fails it after bounded rounds), the labelled-Secret guard, and evaluate (exact
accuracy against the simulated model, gates, baseline, resume from heartbeat details,
QUEUE_FULL, malformed and missing datasets).
Serving objects are rendered with ``decisionmodel.engine.render`` and applied with kubectl; the fake
kubelet runs the prefetch Job (writing the store the runtime simulator reads) and turns Pods
Ready once their gate is True.

The pure parts (resolve's guards, a pinned digest, record_for's known hashes, the heartbeat
details' JSON round trip) are unit tests: tests/unit/activities/.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import urllib.request
import uuid
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import httpx
import pytest
from harness.helpers import assert_eventually, async_assert_eventually
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.evaluate import EvaluateActivities, EvaluationHeartbeat
from activities.resolve import ResolveActivities
from activities.warmup_inspect import WarmupActivities
from decisionmodel.api.crd import CRD_NAME, render_crd_yaml
from decisionmodel.engine.params import (
    OwnerRef,
    PrefetchParams,
    SecretKeyRef,
    ServingParams,
    StoreParams,
)
from decisionmodel.engine.render import (
    render_prefetch_job,
    render_serving_deployment,
    render_store_pvc,
)
from decisionmodel.engine.render.labels import selector_labels, store_pvc_name
from decisionmodel.engine.runtime_client import RuntimeClient
from decisionmodel.errors import ProbeError, QueueFull
from decisionmodel.evaluation import EvaluationProgress, parse_dataset, render4
from decisionmodel.rollout import step_status
from decisionmodel.rollout.contracts import (
    DMRef,
    EvaluateInput,
    EvaluationPolicy,
    KeyRef,
    ResolveInput,
    ResolveResult,
    RevisionSpec,
    WarmupInput,
)
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.pod_gate import condition_true, gate_condition
from kube.rollout_status import write_status
from localenv.cluster import LocalCluster
from localenv.env import Simulators
from simulators.answers import (
    count_correct_pairs,
    count_failed_cases,
    expected_accuracy,
    make_golden_set,
    true_answer,
)

REGISTRY = "http://127.0.0.1:5000"
RUN = uuid.uuid4().hex[:6]
# Written into every dataset case; it must never appear in a heartbeat, outcome or error.
MARKER = f"golden-content-{RUN}"
API_KEY_VALUE = f"sk-{RUN}-never-leaves"
SIM = "sim.dmrollout.dev/"
CAND_ACC, CAND_CONF = 0.9, 0.8
STABLE_ACC, STABLE_CONF = 0.97, 0.85
CASES = 30

SETTINGS = RolloutSettings(
    allowed_registries=["127.0.0.1:5000"],
    allow_insecure_registries=True,
    ollaya_registry=REGISTRY,
    poll_interval_seconds=0.2,
)


# --- plumbing -----------------------------------------------------------------------------------


def _sim_put_model(tag: str, profile: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{REGISTRY}/_sim/models/library/laya/{tag}",
        data=json.dumps(profile).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        answer: dict[str, Any] = json.loads(r.read())
    return answer


def _sim_fault(tag: str, fault: dict[str, Any] | None) -> None:
    url = f"{REGISTRY}/_sim/faults/library/laya/{tag}"
    data = json.dumps(fault).encode() if fault is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method="PUT" if fault else "DELETE",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()


def _manifest_bytes(tag: str) -> bytes:
    with urllib.request.urlopen(f"{REGISTRY}/v2/library/laya/manifests/{tag}", timeout=10) as r:
        body: bytes = r.read()
    return body


async def _run(env: ActivityEnvironment, fn: Any, inp: Any) -> Any:
    return await env.run(fn, inp)


def _env(beats: list[Any] | None = None) -> ActivityEnvironment:
    env = ActivityEnvironment()
    if beats is not None:
        env.on_heartbeat = lambda *details: beats.append(details[0] if details else None)
    return env


def _app_error(excinfo: pytest.ExceptionInfo[BaseException]) -> ApplicationError:
    err = excinfo.value
    assert isinstance(err, ApplicationError), repr(err)
    return err


def _mark(state: Any) -> Any:
    if isinstance(state, str):
        return f"{MARKER} {state}"
    if isinstance(state, dict):
        return {**state, "text": f"{MARKER} {state['text']}"}
    return [{**state[0], "text": f"{MARKER} {state[0]['text']}"}, *state[1:]]


def golden(n: int, seed: int) -> list[dict[str, Any]]:
    """make_golden_set with the marker in every state (expected answers recomputed)."""
    cases = make_golden_set(n, seed)
    for case in cases:
        case["state"] = _mark(case["state"])
        case["expected"] = {
            qid: true_answer(case["state"], qid, q) for qid, q in case["questions"].items()
        }
    return cases


def jsonl(cases: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(c) + "\n" for c in cases)


def _fmt4(value: Fraction) -> str:
    """Rounded half-even to 4 places, computed apart from the code under test."""
    scaled = round(value * 10_000)
    return f"{scaled // 10_000}.{scaled % 10_000:04d}"


def expected_figure(correct: int, total: int) -> str:
    return _fmt4(Fraction(correct, total))


@dataclasses.dataclass
class Namespace:
    cluster: LocalCluster
    name: str
    dm: DMRef

    @property
    def owner(self) -> OwnerRef:
        return OwnerRef(name=self.dm.name, uid=self.dm.uid)

    def pods(self, rev: str) -> list[dict[str, Any]]:
        sel = ",".join(f"{k}={v}" for k, v in selector_labels(self.dm.name, rev).items())
        items: list[dict[str, Any]] = self.cluster.kubectl_json(
            "get", "pods", "-n", self.name, "-l", sel
        )["items"]
        return sorted(items, key=lambda p: str(p["metadata"]["name"]))

    def secret(self, name: str, data: dict[str, str], labels: dict[str, str]) -> None:
        self.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": self.name, "labels": labels},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
            }
        )

    def config_map(self, name: str, data: dict[str, str]) -> None:
        self.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.name},
                "data": data,
            }
        )


def new_namespace(cluster: LocalCluster, prefix: str, spec: dict[str, Any]) -> Namespace:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    cluster.apply(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "triage", "namespace": name},
            "spec": spec,
        }
    )
    dm = cluster.kubectl_json("get", "dm", "triage", "-n", name)
    return Namespace(cluster, name, DMRef(namespace=name, name="triage", uid=dm["metadata"]["uid"]))


def serving_objects(
    ns: Namespace,
    resolved: ResolveResult,
    replicas: int,
    api_key: SecretKeyRef | None,
) -> list[dict[str, Any]]:
    record = resolved.record
    common: dict[str, Any] = {"owner": ns.owner, "namespace": ns.name, "revision": record.hash}
    model: dict[str, Any] = {
        **common,
        "model": record.model,
        "digest": record.digest,
        "device": record.device,
        "image": record.image,
        "store_claim_name": store_pvc_name(ns.dm.name, record.hash),
        "registry_url": REGISTRY,
    }
    return [
        render_store_pvc(StoreParams(**common)),
        render_prefetch_job(
            PrefetchParams(
                **model,
                digest_pinned=False,
                store_manifest_path=resolved.store_manifest_path,
                caching_timeout_seconds=300,
            )
        ),
        render_serving_deployment(
            ServingParams(**model, replicas=replicas, api_key_secret_ref=api_key)
        ),
    ]


def wait_serving(ns: Namespace, resolved: ResolveResult, replicas: int) -> list[dict[str, Any]]:
    rev = resolved.record.hash
    job = f"{ns.dm.name}-pf-{rev}"

    def job_complete() -> bool:
        j = ns.cluster.kubectl_json("get", "job", job, "-n", ns.name)
        conditions = {c["type"]: c["status"] for c in j.get("status", {}).get("conditions", [])}
        assert conditions.get("Failed") != "True", j["status"]
        return conditions.get("Complete") == "True"

    assert_eventually(job_complete, 60, what=f"prefetch Job {job} complete")

    def running() -> list[dict[str, Any]]:
        pods = [p for p in ns.pods(rev) if not p["metadata"].get("deletionTimestamp")]
        assert len(pods) == replicas, [p["metadata"]["name"] for p in pods]
        for p in pods:
            assert p["status"].get("podIP"), p["metadata"]["name"]
            assert condition_true(p, "ContainersReady"), p["status"]
        return pods

    pods: list[dict[str, Any]] = assert_eventually(running, 60, what=f"Pods of {rev} running")
    return pods


async def resolve(model: str, device: str = "cpu") -> ResolveResult:
    acts = ResolveActivities(SETTINGS)
    inp = ResolveInput(
        dm=DMRef(namespace="n", name="triage", uid="u"),
        revision=RevisionSpec(model=model, device=device),
    )
    result: ResolveResult = await _run(_env(), acts.resolve, inp)
    return result


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(local_cluster: LocalCluster, simulators: Simulators) -> LocalCluster:
    local_cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=dmrollout-test",
        "-f", "-", input=render_crd_yaml(),
    )  # fmt: skip
    local_cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    assert_eventually(
        lambda: local_cluster.kubectl("get", "dm", "-A", check=False).returncode == 0,
        30,
        what="the dm resource is served",
    )
    return local_cluster


class CountingKube(Kube):
    """Counts gate writes, so a test can see that an unchanged gate is not re-written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate_writes: list[tuple[str, str]] = []

    def patch_pod_condition(self, namespace: str, pod: str, condition: dict[str, Any]) -> None:
        self.gate_writes.append((pod, str(condition.get("reason"))))
        super().patch_pod_condition(namespace, pod, condition)


@pytest.fixture(scope="module")
def kube(cluster: LocalCluster) -> CountingKube:
    return CountingKube.from_config(str(cluster.kubeconfig))  # type: ignore[return-value]


@dataclasses.dataclass
class Serving:
    ns: Namespace
    candidate: ResolveResult
    stable: ResolveResult
    api_key: KeyRef


@pytest.fixture(scope="module")
def serving(cluster: LocalCluster) -> Iterator[Serving]:
    """One DM namespace with two cpu revisions of simulated models of known accuracy: a
    candidate (2 replicas) and a stable (1), both behind a labelled API-key Secret."""
    cand_tag, stable_tag = f"cand-{RUN}", f"stable-{RUN}"
    _sim_put_model(cand_tag, {"accuracy": CAND_ACC, "confidence": CAND_CONF})
    _sim_put_model(stable_tag, {"accuracy": STABLE_ACC, "confidence": STABLE_CONF})
    ns = new_namespace(cluster, "act", {"model": f"laya:{cand_tag}"})
    ns.secret("ollaya-key", {"token": API_KEY_VALUE}, {"decisionmodel.io/api-key": "true"})
    key = SecretKeyRef(name="ollaya-key", key="token")
    candidate = asyncio.run(resolve(f"laya:{cand_tag}"))
    stable = asyncio.run(resolve(f"laya:{stable_tag}"))
    cluster.apply(serving_objects(ns, candidate, 2, key) + serving_objects(ns, stable, 1, key))
    wait_serving(ns, candidate, 2)
    wait_serving(ns, stable, 1)
    yield Serving(ns, candidate, stable, KeyRef(name="ollaya-key", key="token"))
    cluster.kubectl("delete", "namespace", ns.name, "--wait=false", check=False)


def warmup_input(s: Serving, which: ResolveResult, replicas: int) -> WarmupInput:
    return WarmupInput(
        dm=s.ns.dm,
        record=which.record,
        model=which.record.model,
        replicas=replicas,
        api_key=s.api_key,
        warmup_timeout_seconds=30,
    )


@pytest.fixture
async def warmed(serving: Serving, kube: CountingKube) -> Serving:
    """Both revisions model-ready (idempotent: a no-op once the gates are True)."""
    acts = WarmupActivities(kube, SETTINGS)
    await asyncio.wait_for(
        _run(_env(), acts.warmup_inspect, warmup_input(serving, serving.candidate, 2)), 30
    )
    await asyncio.wait_for(
        _run(_env(), acts.warmup_inspect, warmup_input(serving, serving.stable, 1)), 30
    )
    return serving


# --- resolve ------------------------------------------------------------------------------------


async def test_resolve_digest_is_sha256_of_the_manifest_bytes(cluster: LocalCluster) -> None:
    tag = f"res-{RUN}"
    put = _sim_put_model(tag, {"accuracy": 0.9})
    manifest = _manifest_bytes(tag)
    digest = hashlib.sha256(manifest).hexdigest()
    assert put["digest"].removeprefix("sha256:") == digest

    result = await resolve(f"laya:{tag}")

    assert result.resolved_from_registry is True
    assert result.record.digest == digest
    assert result.canonical == f"http://127.0.0.1:5000/library/laya:{tag}"
    assert result.store_manifest_path == f"manifests/127.0.0.1_5000/library/laya/{tag}"
    assert result.record.image == "ghcr.io/ollaya-dev/ollaya:0.10.0"
    assert result.record.runtime_version == "0.10.0"
    # The hash, recomputed by hand from the documented canonical form.
    canonical = (
        '{"engine":"ollaya","model":"laya:' + tag + '","digest":"' + digest + '",'
        '"device":"cpu","image":"ghcr.io/ollaya-dev/ollaya:0.10.0","resources":{}}'
    )
    assert result.record.hash == hashlib.sha256(canonical.encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    ("model", "changes", "settings", "reason", "permanent"),
    [
        (f"laya:missing-{RUN}", {}, SETTINGS, "ModelNotFound", True),
        (f"laya:garbled-{RUN}", {}, SETTINGS, "RegistryError", False),
    ],
    ids=["not-found", "registry-error"],
)
async def test_resolve_refusals_are_typed(
    cluster: LocalCluster,
    model: str,
    changes: dict[str, Any],
    settings: RolloutSettings,
    reason: str,
    permanent: bool,
) -> None:
    if reason == "RegistryError":
        tag = model.split(":", 1)[1]
        _sim_put_model(tag, {})
        _sim_fault(tag, {"status": 200, "body": "not json"})
    acts = ResolveActivities(settings)
    inp = ResolveInput(
        dm=DMRef(namespace="n", name="triage", uid="u"),
        revision=RevisionSpec(model=model, **changes),
    )
    with pytest.raises(ApplicationError) as excinfo:
        await _run(_env(), acts.resolve, inp)
    err = _app_error(excinfo)
    assert err.type == reason, err
    assert err.non_retryable is permanent


# --- warmup_inspect -----------------------------------------------------------------------------


async def test_warmup_inspect_sets_gates_and_pods_become_ready(
    serving: Serving, kube: CountingKube
) -> None:
    # A poll interval longer than the bound: the gates set and the Pods turning Ready wake the
    # rounds through the watch, not a poll (issue 14).
    slow = SETTINGS.model_copy(update={"poll_interval_seconds": 60.0})
    acts = WarmupActivities(kube, slow)
    beats: list[Any] = []
    inp = warmup_input(serving, serving.candidate, 2)

    result = await asyncio.wait_for(_run(_env(beats), acts.warmup_inspect, inp), 30)

    assert result.model_ready == 2
    assert result.precision == "F32"
    pods = serving.ns.pods(serving.candidate.record.hash)
    for pod in pods:
        gate = gate_condition(pod)
        assert gate is not None and gate["status"] == "True", pod["status"]
        assert gate["reason"] == "ModelReady"
        assert condition_true(pod, "Ready")
    assert beats[-1]["ready"] == 2 and beats[-1]["desired"] == 2
    assert beats[-1]["reasons"] == {"ModelReady": 2}
    assert API_KEY_VALUE not in json.dumps(beats)

    # Run again (a retried attempt): nothing to do, nothing re-written, same answer.
    kube.gate_writes.clear()
    again = await asyncio.wait_for(_run(_env(), acts.warmup_inspect, inp), 10)
    assert again.model_ready == 2 and again.precision == "F32"
    assert kube.gate_writes == []
    for before, after in zip(pods, serving.ns.pods(serving.candidate.record.hash), strict=True):
        assert gate_condition(before) == gate_condition(after)


async def test_api_key_needs_a_labelled_secret_with_the_key(
    serving: Serving, kube: CountingKube
) -> None:
    ns = serving.ns
    ns.secret("plain-key", {"token": API_KEY_VALUE}, {})
    ns.secret("keyless", {"other": API_KEY_VALUE}, {"decisionmodel.io/api-key": "true"})
    acts = WarmupActivities(kube, SETTINGS)
    base = warmup_input(serving, serving.candidate, 2)
    for ref, reason in (
        (KeyRef(name="plain-key", key="token"), "SecretNotAllowed"),
        (KeyRef(name="keyless", key="token"), "APIKeyInvalid"),
        (KeyRef(name=f"absent-{RUN}", key="token"), "APIKeyInvalid"),
    ):
        with pytest.raises(ApplicationError) as excinfo:
            await _run(_env(), acts.warmup_inspect, base.model_copy(update={"api_key": ref}))
        err = _app_error(excinfo)
        assert err.type == reason, err
        assert err.non_retryable is False  # fixing the Secret is enough; retried
        assert API_KEY_VALUE not in str(err)
    # The runtime really enforces the key the labelled Secret holds.
    ip = ns.pods(serving.candidate.record.hash)[0]["status"]["podIP"]
    async with RuntimeClient.for_pod(ip) as anonymous:
        with pytest.raises(ProbeError) as refused:
            await anonymous.inspect("laya:x")
        assert refused.value.status == 401


async def test_device_mismatch_and_not_pinned_keep_the_gate_false(
    cluster: LocalCluster, kube: CountingKube
) -> None:
    ns = new_namespace(cluster, "actf", {"model": "laya:en", "device": "cuda"})
    try:
        cuda = await resolve("laya:en", device="cuda")
        cpu = await resolve("laya:en")
        cluster.apply(serving_objects(ns, cuda, 1, None) + serving_objects(ns, cpu, 1, None))
        cuda_pod = wait_serving(ns, cuda, 1)[0]
        cpu_pod = wait_serving(ns, cpu, 1)[0]
        assert cuda_pod["spec"]["nodeName"] == "kwok-gpu-0"
        # A silent CPU fallback on the GPU Pod; a runtime that never pins on the CPU Pod.
        cluster.kubectl("annotate", "pod", "-n", ns.name, cuda_pod["metadata"]["name"],
                        f"{SIM}device=cpu")  # fmt: skip
        cluster.kubectl("annotate", "pod", "-n", ns.name, cpu_pod["metadata"]["name"],
                        f"{SIM}never-pin=true")  # fmt: skip

        async def simulator_sees(ip: str, check: Any) -> None:
            async def seen() -> bool:
                async with RuntimeClient.for_pod(ip, default_registry=REGISTRY) as client:
                    await client.warmup("laya:en")
                    return bool(check(await client.inspect("laya:en")))

            deadline = asyncio.get_running_loop().time() + 15
            while not await seen():
                assert asyncio.get_running_loop().time() < deadline, "annotation not seen"
                await asyncio.sleep(0.2)

        await simulator_sees(cuda_pod["status"]["podIP"], lambda e: e.device == "cpu")
        await simulator_sees(cpu_pod["status"]["podIP"], lambda e: e.expires_at is not None)

        counted: list[tuple[str, str, str]] = []
        acts = WarmupActivities(
            kube, SETTINGS, on_probe_transition=lambda *labels: counted.append(labels)
        )
        for resolved, reason in ((cuda, "DeviceMismatch"), (cpu, "NotPinned")):
            beats: list[Any] = []
            kube.gate_writes.clear()
            inp = WarmupInput(dm=ns.dm, record=resolved.record, model="laya:en", replicas=1)
            if reason == "DeviceMismatch":
                # Waiting cannot fix it (issue 22): after a bounded number of rounds with every
                # Pod on the wrong device the step fails with the reason, for good.
                with pytest.raises(ApplicationError) as failed:
                    await asyncio.wait_for(_run(_env(beats), acts.warmup_inspect, inp), 30)
                assert failed.value.type == reason and failed.value.non_retryable
                assert "every candidate Pod (1) reported DeviceMismatch" in str(failed.value)
            else:
                # NotPinned may pass: the workflow's starting deadline ends the activity.
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(_run(_env(beats), acts.warmup_inspect, inp), 5)
            pod = ns.pods(resolved.record.hash)[0]
            gate = gate_condition(pod)
            assert gate is not None and gate["status"] == "False", pod["status"]
            assert gate["reason"] == reason
            assert not condition_true(pod, "Ready")
            assert beats[-1]["ready"] == 0 and beats[-1]["reasons"] == {reason: 1}
            assert beats[-1]["message"]
            # Several probe rounds, one write: the gate is re-written only when it changes.
            assert kube.gate_writes == [(pod["metadata"]["name"], reason)]
            # decisionmodel_probe_results_total counts the candidate's transition (issue 11).
            result = {"DeviceMismatch": "device_mismatch", "NotPinned": "not_pinned"}[reason]
            assert counted[-1] == (ns.dm.namespace, ns.dm.name, result)

        # NotPinned is transient: once the runtime pins, the same activity finishes.
        cluster.kubectl("annotate", "pod", "-n", ns.name, cpu_pod["metadata"]["name"],
                        f"{SIM}never-pin-")  # fmt: skip
        inp = WarmupInput(dm=ns.dm, record=cpu.record, model="laya:en", replicas=1)
        result = await asyncio.wait_for(_run(_env(), acts.warmup_inspect, inp), 20)
        assert result.model_ready == 1
        gate = gate_condition(ns.pods(cpu.record.hash)[0])
        assert gate is not None and gate["reason"] == "ModelReady"
    finally:
        cluster.kubectl("delete", "namespace", ns.name, "--wait=false", check=False)


# --- evaluate -----------------------------------------------------------------------------------


def evaluate_input(
    s: Serving,
    dataset: KeyRef,
    min_accuracy: str = "0.5",
    stable: bool = False,
    **gates: Any,
) -> EvaluateInput:
    policy = EvaluationPolicy(dataset=dataset, min_accuracy=min_accuracy, **gates)
    live_policy(s.ns, policy)
    return EvaluateInput(
        dm=s.ns.dm,
        candidate=s.candidate.record,
        model=s.candidate.record.model,
        stable=s.stable.record if stable else None,
        policy=policy,
        api_key=s.api_key,
    )


def live_policy(ns: Namespace, policy: EvaluationPolicy) -> None:
    """The DecisionModel's spec carries the gates the input does, as dispatch would have put
    them there: evaluate refuses a policy that is not the live spec's (PolicyMismatch)."""
    ref = {"name": policy.dataset.name, "key": policy.dataset.key}
    secret = policy.dataset.kind == "Secret"
    wire = {
        # Exactly one source: the other one (an earlier test's) is removed.
        "datasetRef": {
            "secretRef": ref if secret else None,
            "configMapRef": None if secret else ref,
        },
        "minAccuracy": policy.min_accuracy,
        "maxAccuracyDrop": policy.max_accuracy_drop,
        "maxECE": policy.max_ece,
        "maxECEIncrease": policy.max_ece_increase,
        "maxNegativeFlipRate": policy.max_negative_flip_rate,
        "maxCases": policy.max_cases,
        "confidence": policy.confidence,
        "sequential": policy.sequential,
    }
    # A merge patch: a gate left out (None, JSON null) is removed from an earlier test's spec.
    patch = {"spec": {"rollout": {"evaluation": wire}}}
    ns.cluster.kubectl(
        "-n", ns.name, "patch", "dm", ns.dm.name, "--type", "merge", "-p", json.dumps(patch)
    )


def assert_no_content(*things: Any) -> None:
    text = json.dumps(
        [t.model_dump(mode="json") if hasattr(t, "model_dump") else t for t in things]
    )
    assert MARKER not in text
    assert API_KEY_VALUE not in text


async def test_evaluate_accuracy_equals_the_simulated_models(
    warmed: Serving, kube: CountingKube
) -> None:
    cases = golden(CASES, seed=1)
    raw = jsonl(cases)
    warmed.ns.secret("golden", {"cases.jsonl": raw}, {"decisionmodel.io/eval-dataset": "true"})
    correct, total = count_correct_pairs(cases, CAND_ACC, CAND_CONF)
    assert correct / total == expected_accuracy(cases, CAND_ACC, CAND_CONF)
    beats: list[Any] = []
    acts = EvaluateActivities(kube, SETTINGS)
    inp = evaluate_input(warmed, KeyRef(kind="Secret", name="golden", key="cases.jsonl"))

    outcome = await _run(_env(beats), acts.evaluate, inp)

    assert outcome.result == "Passed" and outcome.reason == "EvaluationPassed"
    assert outcome.accuracy == expected_figure(correct, total)
    assert outcome.cases == CASES
    assert outcome.failed_cases == count_failed_cases(cases, CAND_ACC, CAND_CONF) > 0
    assert outcome.dataset_digest == hashlib.sha256(raw.encode()).hexdigest()
    assert outcome.baseline_accuracy is None
    assert 0 <= float(outcome.ece) <= 1 and 0 <= float(outcome.brier) <= 1
    # The report's aggregates travel in the result: they give back the same ECE and count
    # every pair once, in the bins and in the confusion cells.
    assert outcome.aggregates is not None and outcome.baseline_aggregates is None
    assert render4(outcome.aggregates.ece()) == outcome.ece
    assert sum(b.count for b in outcome.aggregates.bins) == total
    assert sum(c.count for c in outcome.aggregates.confusion) == total
    last = EvaluationHeartbeat.model_validate(beats[-1])
    assert last.phase == "candidate" and last.cases_total == CASES
    assert last.candidate is not None and last.candidate.next_case_index == CASES
    assert last.candidate.pairs == total and last.candidate.correct == correct
    assert_no_content(outcome, beats)


async def test_evaluate_gates_fail_as_a_result_and_use_the_stable_as_baseline(
    warmed: Serving, kube: CountingKube
) -> None:
    cases = golden(CASES, seed=2)
    warmed.ns.config_map("golden-cm", {"cases.jsonl": jsonl(cases)})
    ref = KeyRef(kind="ConfigMap", name="golden-cm", key="cases.jsonl")
    cand_correct, total = count_correct_pairs(cases, CAND_ACC, CAND_CONF)
    base_correct, _ = count_correct_pairs(cases, STABLE_ACC, STABLE_CONF)
    accuracy = expected_figure(cand_correct, total)
    baseline = expected_figure(base_correct, total)
    drop = Fraction(base_correct - cand_correct, total)
    assert drop > Fraction(1, 100), "the stable must be measurably better for this test"
    acts = EvaluateActivities(kube, SETTINGS)

    # minAccuracy one notch above what the candidate scores: Failed, not an exception.
    above = _fmt4(Fraction(cand_correct, total) + Fraction(1, 10_000))
    failed = await _run(_env(), acts.evaluate, evaluate_input(warmed, ref, min_accuracy=above))
    assert failed.result == "Failed" and failed.reason == "EvaluationFailed"
    assert f"accuracy {accuracy} < minAccuracy {above}" in failed.message
    # minAccuracy equal to the score passes (strict gates).
    equal = await _run(_env(), acts.evaluate, evaluate_input(warmed, ref, min_accuracy=accuracy))
    assert equal.result == "Passed"

    # A relative gate with a stable: the baseline runs on the stable's Pod, with its own phase.
    beats: list[Any] = []
    dropped = await _run(
        _env(beats),
        acts.evaluate,
        evaluate_input(warmed, ref, stable=True, max_accuracy_drop="0.01"),
    )
    assert dropped.baseline_accuracy == baseline and dropped.accuracy == accuracy
    assert dropped.baseline_brier is not None and dropped.baseline_aggregates is not None
    assert dropped.result == "Failed" and "maxAccuracyDrop 0.01" in dropped.message
    phases = [b["phase"] for b in beats]
    assert "candidate" in phases and phases[-1] == "baseline"
    assert beats[-1]["baseline"]["next_case_index"] == CASES
    tolerant = await _run(
        _env(), acts.evaluate, evaluate_input(warmed, ref, stable=True, max_accuracy_drop="0.5")
    )
    assert tolerant.result == "Passed" and tolerant.baseline_accuracy == baseline
    # No relative gate: the stable is not evaluated at all.
    absolute = await _run(_env(), acts.evaluate, evaluate_input(warmed, ref, stable=True))
    assert absolute.baseline_accuracy is None and absolute.baseline_ece is None
    assert_no_content(failed, dropped, tolerant, beats)


async def test_evaluate_sequential_stops_early_and_continues_its_ledger(
    warmed: Serving, kube: CountingKube
) -> None:
    """Issue 35 item 4: a candidate clearly above its gate stops early; at its gate the test
    is undecided, a second evaluation on the same dataset counts nothing again, and cases
    appended continue the same test (status.evaluationLedger carries it between them)."""
    acts = EvaluateActivities(kube, SETTINGS)
    many = golden(200, seed=11)
    warmed.ns.config_map("golden-seq", {"cases.jsonl": jsonl(many)})
    ref = KeyRef(kind="ConfigMap", name="golden-seq", key="cases.jsonl")
    inp = evaluate_input(warmed, ref, min_accuracy="0.3", confidence="0.95", sequential=True)
    early = await _run(_env(), acts.evaluate, inp)
    await write_status(kube, step_status.evaluated(warmed.ns.dm, inp.policy, early))
    assert early.result == "Passed" and early.decision is not None
    test = early.decision.sequential
    assert test is not None and test.stopped_early and test.evaluations == 1
    assert early.cases == test.cases == test.this_evaluation < 200 == test.dataset_cases
    assert "stopped after" in early.message

    cases = golden(80, seed=12)
    correct, total = count_correct_pairs(cases[:40], CAND_ACC, CAND_CONF)
    at_gate = expected_figure(correct, total)
    warmed.ns.config_map("golden-seq", {"cases.jsonl": jsonl(cases[:40])})
    inp = evaluate_input(warmed, ref, min_accuracy=at_gate, confidence="0.95", sequential=True)
    seen = []
    for _ in range(2):
        outcome = await _run(_env(), acts.evaluate, inp)
        await write_status(kube, step_status.evaluated(warmed.ns.dm, inp.policy, outcome))
        assert outcome.decision is not None and outcome.decision.sequential is not None
        seen.append((outcome.cases, outcome.decision.sequential))
    (first_cases, first), (again_cases, again) = seen
    assert first.verdict == "Inconclusive" and first.cases == first_cases == 40
    assert first.restarted == "minAccuracy changed from 0.3: a new test"
    # The same dataset again: no case is counted twice, the evidence stands where it was.
    assert again_cases == 0 and again.cases == 40 and again.evaluations == 2
    assert again.pass_evidence == first.pass_evidence and again.verdict == "Inconclusive"

    warmed.ns.config_map("golden-seq", {"cases.jsonl": jsonl(cases)})
    more = await _run(_env(), acts.evaluate, inp)
    assert more.decision is not None and more.decision.sequential is not None
    continued = more.decision.sequential
    assert continued.evaluations == 3 and continued.restarted is None
    assert continued.cases == 40 + continued.this_evaluation == 40 + more.cases
    await write_status(kube, step_status.evaluated(warmed.ns.dm, inp.policy, more))
    dm = warmed.ns.cluster.kubectl_json("-n", warmed.ns.name, "get", "dm", warmed.ns.dm.name)
    [entry] = dm["status"]["evaluationLedger"]
    assert entry["revision"] == warmed.candidate.record.hash and entry["evaluations"] == 3
    assert dm["status"]["evaluation"]["decision"]["sequential"]["cases"] == continued.cases
    assert_no_content(early, more)


async def test_evaluate_sequential_judges_the_paired_gates_in_rounds(
    warmed: Serving, kube: CountingKube
) -> None:
    """Issue 35 item 4: with maxAccuracyDrop and maxNegativeFlipRate a sequential evaluation
    runs the candidate and the stable on the same rounds of cases, judges every gate by its
    own test, and stops once they decide: tolerant gates pass after the first round, a
    negative-flip ceiling far below the candidate's fails it there; the ledger keeps each
    gate's test, against the stable it compared with."""
    acts = EvaluateActivities(kube, SETTINGS)
    warmed.ns.config_map("golden-paired", {"cases.jsonl": jsonl(golden(300, seed=21))})
    ref = KeyRef(kind="ConfigMap", name="golden-paired", key="cases.jsonl")
    gates = {"confidence": "0.95", "sequential": True}
    tolerant = evaluate_input(
        warmed, ref, "0.3", True, max_accuracy_drop="0.5", max_negative_flip_rate="0.6", **gates
    )
    passed = await _run(_env(), acts.evaluate, tolerant)
    assert passed.result == "Passed" and passed.decision is not None
    assert [(g.gate, g.verdict) for g in passed.decision.gates] == [
        ("minAccuracy", "Passed"),
        ("maxAccuracyDrop", "Passed"),
        ("maxNegativeFlipRate", "Passed"),
    ]
    test = passed.decision.sequential
    assert test is not None and test.cases == passed.cases == 100 and test.stopped_early
    assert test.baseline == warmed.stable.record.hash
    # Each gate stopped reading at its verdict, within the cases both revisions answered.
    assert {g.gate for g in test.gates} == {"maxAccuracyDrop", "maxNegativeFlipRate"}
    assert all(g.verdict == "Passed" and 0 < g.cases <= 100 for g in test.gates)
    assert passed.baseline_aggregates is not None

    strict = evaluate_input(warmed, ref, "0.3", True, max_negative_flip_rate="0.01", **gates)
    failed = await _run(_env(), acts.evaluate, strict)
    assert failed.result == "Failed" and failed.decision is not None
    assert failed.decision.first_failed() is not None
    assert failed.decision.first_failed().gate == "maxNegativeFlipRate"  # type: ignore[union-attr]
    assert failed.cases == 100 and "maxNegativeFlipRate" in failed.message
    assert_no_content(passed, failed)


async def test_evaluate_resumes_from_the_heartbeat_details(
    warmed: Serving, kube: CountingKube
) -> None:
    cases = golden(CASES, seed=3)
    raw = jsonl(cases)
    warmed.ns.config_map("golden-resume", {"cases.jsonl": raw})
    ref = KeyRef(kind="ConfigMap", name="golden-resume", key="cases.jsonl")
    digest = hashlib.sha256(raw.encode()).hexdigest()
    done = 20
    pairs_done = 3 * done  # one question of each kind per case
    # A progress that claims the first 20 cases were all answered right with confidence 1:
    # figures that no real pass over these cases produces, so they show the cases were skipped.
    claimed = EvaluationProgress(
        dataset_digest=digest,
        next_case_index=done,
        pairs=pairs_done,
        correct=pairs_done,
        bin_counts=[0] * 9 + [pairs_done],
        bin_correct=[0] * 9 + [pairs_done],
        bin_confidence_sums=[0.0] * 9 + [float(pairs_done)],
        brier_sum=0.0,
    )
    previous = EvaluationHeartbeat(
        phase="candidate",
        dataset_digest=digest,
        cases_total=CASES,
        candidate_revision=warmed.candidate.record.hash,
        candidate=claimed,
    )
    rest_correct, rest_pairs = count_correct_pairs(cases[done:], CAND_ACC, CAND_CONF)
    acts = EvaluateActivities(kube, SETTINGS)
    beats: list[Any] = []
    env = _env(beats)
    env.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=[previous.details()])

    outcome = await _run(env, acts.evaluate, evaluate_input(warmed, ref))

    assert outcome.cases == CASES
    assert outcome.accuracy == expected_figure(pairs_done + rest_correct, pairs_done + rest_pairs)
    indexes = [b["candidate"]["next_case_index"] for b in beats if b.get("candidate")]
    assert min(indexes) == done and indexes[-1] == CASES  # never restarted at case 1

    # Progress of another dataset (the ConfigMap changed between attempts) is not reused.
    stale = previous.model_copy(
        update={"dataset_digest": "0" * 64, "candidate": claimed.model_copy(
            update={"dataset_digest": "0" * 64})}
    )  # fmt: skip
    env = _env()
    env.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=[stale.details()])
    fresh = await _run(env, acts.evaluate, evaluate_input(warmed, ref))
    full_correct, full_pairs = count_correct_pairs(cases, CAND_ACC, CAND_CONF)
    assert fresh.accuracy == expected_figure(full_correct, full_pairs)


async def test_evaluate_retries_queue_full(warmed: Serving, kube: CountingKube) -> None:
    cases = golden(10, seed=4)
    warmed.ns.config_map("golden-qf", {"cases.jsonl": jsonl(cases)})
    ref = KeyRef(kind="ConfigMap", name="golden-qf", key="cases.jsonl")
    # The Pod the activity evaluates on: the first model-ready one by name.
    pod = warmed.ns.pods(warmed.candidate.record.hash)[0]
    ip = pod["status"]["podIP"]
    warmed.ns.cluster.kubectl("annotate", "pod", "-n", warmed.ns.name, "--overwrite",
                              pod["metadata"]["name"], f"{SIM}queue-full-burst=3")  # fmt: skip
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    # Wait until the simulator applies the burst: the first rejection uses one of the three.
    first = parse_dataset(jsonl(cases).encode())[0]

    async def rejected() -> bool:
        async with RuntimeClient.for_pod(
            ip, api_key=API_KEY_VALUE, default_registry=REGISTRY, queue_full_attempts=1
        ) as probe:
            try:
                await probe.decide(warmed.candidate.record.model, first.state, first.questions)
            except QueueFull:
                return True
        return False

    deadline = asyncio.get_running_loop().time() + 15
    while not await rejected():
        assert asyncio.get_running_loop().time() < deadline, "burst annotation not seen"
        await asyncio.sleep(0.2)

    def factory(pod_ip: str, **options: Any) -> RuntimeClient:
        return RuntimeClient.for_pod(pod_ip, sleep=no_wait, **options)

    acts = EvaluateActivities(kube, SETTINGS, runtime_client_factory=factory)
    outcome = await _run(_env(), acts.evaluate, evaluate_input(warmed, ref))

    assert waits == [1.0, 1.0]  # the two remaining QUEUE_FULL answers, after Retry-After: 1
    correct, total = count_correct_pairs(cases, CAND_ACC, CAND_CONF)
    assert outcome.result == "Passed"
    assert outcome.failed_cases == count_failed_cases(cases, CAND_ACC, CAND_CONF)
    assert outcome.accuracy == expected_figure(correct, total)


class CountingTransport(httpx.AsyncHTTPTransport):
    """Records (Pod IP, status) of every decision the evaluation sends."""

    def __init__(self, seen: list[tuple[str, int]]) -> None:
        super().__init__()
        self.seen = seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.url.path == "/v1/systemone":
            self.seen.append((request.url.host, response.status_code))
        return response


async def test_evaluate_spreads_cases_over_every_replica_and_retries_queue_full(
    warmed: Serving, kube: CountingKube
) -> None:
    """Every model-ready candidate Pod gets cases, two in flight each; a Pod whose runtime
    allows one request in flight (OLLAYA_MAX_QUEUE 1, here the max-queue fault) answers the
    second 503 QUEUE_FULL, which is waited out and retried: never a wrong answer."""
    cases = golden(24, seed=8)
    warmed.ns.config_map("golden-spread", {"cases.jsonl": jsonl(cases)})
    ref = KeyRef(kind="ConfigMap", name="golden-spread", key="cases.jsonl")
    pods = warmed.ns.pods(warmed.candidate.record.hash)
    ips = {p["status"]["podIP"] for p in pods}
    assert len(ips) == 2
    faults = [f"{SIM}max-queue=1", f"{SIM}latency-ms=20"]
    for p in pods:
        warmed.ns.cluster.kubectl("annotate", "pod", "-n", warmed.ns.name, "--overwrite",
                                  p["metadata"]["name"], *faults)  # fmt: skip
    first = parse_dataset(jsonl(cases).encode())[0]
    model = warmed.candidate.record.model

    async def both_refuse_a_second_request() -> bool:
        """The simulator applies the faults (through its Pod cache) on both Pods."""
        for ip in ips:
            async with RuntimeClient.for_pod(
                ip, api_key=API_KEY_VALUE, default_registry=REGISTRY, queue_full_attempts=1
            ) as probe:
                two = [probe.decide(model, first.state, first.questions) for _ in range(2)]
                answers = await asyncio.gather(*two, return_exceptions=True)
                if not any(isinstance(a, QueueFull) for a in answers):
                    return False
        return True

    seen: list[tuple[str, int]] = []

    def factory(pod_ip: str, **options: Any) -> RuntimeClient:
        # Retry-After (1 s) capped at 50 ms to keep the test short; bounded attempts.
        return RuntimeClient.for_pod(
            pod_ip, transport=CountingTransport(seen), max_retry_after=0.05, **options
        )

    try:
        await async_assert_eventually(both_refuse_a_second_request, 15, what="max-queue seen")
        settings = SETTINGS.model_copy(update={"queue_full_attempts": 200})
        acts = EvaluateActivities(kube, settings, runtime_client_factory=factory)
        outcome = await _run(_env(), acts.evaluate, evaluate_input(warmed, ref))
    finally:
        for p in pods:
            warmed.ns.cluster.kubectl("annotate", "pod", "-n", warmed.ns.name, "--overwrite",
                                      p["metadata"]["name"], f"{SIM}max-queue-",
                                      f"{SIM}latency-ms-")  # fmt: skip

    answered = [ip for ip, status in seen if status == 200]
    refused = [ip for ip, status in seen if status == 503]
    assert {ip for ip in answered} == ips  # cases landed on every candidate replica
    assert len(answered) == len(cases)  # each case answered once
    assert refused, "no QUEUE_FULL: the Pods never had two requests in flight"
    correct, total = count_correct_pairs(cases, CAND_ACC, CAND_CONF)
    assert outcome.cases == len(cases)
    assert outcome.accuracy == expected_figure(correct, total)
    assert outcome.failed_cases == count_failed_cases(cases, CAND_ACC, CAND_CONF)


async def test_evaluate_malformed_line_is_dataset_invalid(
    serving: Serving, kube: CountingKube
) -> None:
    lines = jsonl(golden(4, seed=5)).splitlines()
    lines[2] = '{"state": "' + MARKER + '", "questions": {'  # line 3: cut short
    serving.ns.config_map("golden-bad", {"cases.jsonl": "\n".join(lines) + "\n"})
    beats: list[Any] = []
    acts = EvaluateActivities(kube, SETTINGS)
    inp = evaluate_input(serving, KeyRef(kind="ConfigMap", name="golden-bad", key="cases.jsonl"))
    with pytest.raises(ApplicationError) as excinfo:
        await _run(_env(beats), acts.evaluate, inp)
    err = _app_error(excinfo)
    assert err.type == "DatasetInvalid" and err.non_retryable is True
    assert "line 3" in str(err)
    assert MARKER not in str(err)
    assert_no_content(beats)


async def test_evaluate_holds_on_a_missing_or_unlabelled_dataset(
    serving: Serving, kube: CountingKube
) -> None:
    ns = serving.ns
    raw = jsonl(golden(3, seed=6))
    ns.secret("golden-unlabelled", {"cases.jsonl": raw}, {})
    ns.config_map("golden-other-key", {"other.jsonl": raw})
    acts = EvaluateActivities(kube, SETTINGS)
    for ref, reason in (
        (KeyRef(kind="ConfigMap", name=f"absent-{RUN}", key="cases.jsonl"), "DatasetNotFound"),
        (KeyRef(kind="ConfigMap", name="golden-other-key", key="cases.jsonl"), "DatasetNotFound"),
        (KeyRef(kind="Secret", name=f"absent-{RUN}", key="cases.jsonl"), "DatasetNotFound"),
        (KeyRef(kind="Secret", name="golden-unlabelled", key="cases.jsonl"), "SecretNotAllowed"),
    ):
        beats: list[Any] = []
        with pytest.raises(ApplicationError) as excinfo:
            await _run(_env(beats), acts.evaluate, evaluate_input(serving, ref))
        err = _app_error(excinfo)
        assert err.type == reason, err
        assert err.non_retryable is False  # held in Evaluating until the phase times out
        assert ref.name in str(err) and MARKER not in str(err)
        assert beats and beats[-1]["waiting_reason"] == reason
        assert_no_content(beats)


async def test_evaluate_accepts_the_legacy_label_with_a_warning(
    warmed: Serving, kube: CountingKube
) -> None:
    ns = warmed.ns
    cases = golden(3, seed=7)
    ns.secret("golden-legacy", {"cases.jsonl": jsonl(cases)}, {"decisionmodel.io/api-key": "true"})
    acts = EvaluateActivities(kube, SETTINGS)
    ref = KeyRef(kind="Secret", name="golden-legacy", key="cases.jsonl")
    outcome = await _run(_env(), acts.evaluate, evaluate_input(warmed, ref, min_accuracy="0"))
    assert outcome.cases == 3

    def warned() -> bool:
        events = ns.cluster.kubectl_json("get", "events.events.k8s.io", "-n", ns.name)["items"]
        return any(e.get("reason") == "DeprecatedSecretLabel" for e in events)

    assert_eventually(warned, 10, what="a DeprecatedSecretLabel Event")

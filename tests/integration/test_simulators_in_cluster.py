"""The runtime and registry simulators over real HTTP, the runtime at Pod IPs (issue 2 (d)).

The serving Pods come from the Deployments the product renders (``render_serving_deployment``),
on stores filled by the rendered prefetch Jobs, so ``/api/decide`` finds the model the Job
pulled. One runtime-simulator process answers on every Pod IP of the namespace-local Pod
network and behaves as the Pod a request was sent to: its env (API key from a Secret, device),
its node (the GPU node), its store volume (read-only) and its ``sim.dmrollout.dev/*`` fault
annotations, which the tests toggle on the live Pod with ``kubectl annotate``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.helpers import assert_eventually

from decisionmodel.engine.names import parse_model_name
from decisionmodel.engine.params import (
    Device,
    OwnerRef,
    PrefetchParams,
    SecretKeyRef,
    ServingParams,
    StoreParams,
    default_image,
)
from decisionmodel.engine.render import (
    render_prefetch_job,
    render_serving_deployment,
    render_store_pvc,
)
from decisionmodel.engine.render.labels import (
    HTTP_PORT,
    prefetch_job_name,
    selector_labels,
    store_pvc_name,
)
from localenv.cluster import LocalCluster
from localenv.env import Simulators
from simulators.answers import answer_case
from simulators.volumes import volume_dir

REVISION = "5e4d3c2b1a0f9e8d"
SIM = "sim.dmrollout.dev/"
ACCURACY = 0.75
CONFIDENCE = 0.8
MODEL_SIZE = 123456789
# The runtime simulator re-reads Pod annotations through a ~1 s cache.
FAULT_WAIT = 10.0
SETUP_WAIT = 45.0


@dataclass(frozen=True)
class ServingPod:
    name: str
    ip: str

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{HTTP_PORT}"


@dataclass(frozen=True)
class Runtime:
    namespace: str
    model: str
    digest: str
    api_key: str
    cpu: ServingPod
    gpu: ServingPod
    cpu_store: Path
    store_manifest_path: str


def _owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    # No DecisionModel exists here: a placeholder owner keeps garbage collection away.
    obj["metadata"]["ownerReferences"] = [owner]
    return obj


def _revision_objects(
    namespace: str,
    dm: str,
    model: str,
    digest: str,
    device: Device,
    owner: dict[str, Any],
    api_key: SecretKeyRef | None,
) -> list[dict[str, Any]]:
    """Store, prefetch Job and serving Deployment of one revision, as the product renders them."""
    owner_ref = OwnerRef(name=dm, uid=str(uuid.uuid4()))
    claim = store_pvc_name(dm, REVISION)
    common: dict[str, Any] = {
        "owner": owner_ref,
        "namespace": namespace,
        "revision": REVISION,
        "model": model,
        "digest": digest,
        "device": device,
        "store_claim_name": claim,
        "registry_url": Simulators.registry_url,
    }
    store = StoreParams(owner=owner_ref, namespace=namespace, revision=REVISION, store_size="1Gi")
    prefetch = PrefetchParams(
        **common,
        image=default_image(),
        digest_pinned=False,
        store_manifest_path=parse_model_name(
            model, default_registry=Simulators.registry_url
        ).store_manifest_path,
    )
    serving = ServingParams(
        **common, image=default_image(device=device), api_key_secret_ref=api_key
    )
    return [
        _owned_by(render_store_pvc(store), owner),
        _owned_by(render_prefetch_job(prefetch), owner),
        _owned_by(render_serving_deployment(serving), owner),
    ]


def _job_complete(cluster: LocalCluster, namespace: str, job: str) -> bool:
    status = cluster.kubectl_json("get", "job", job, "-n", namespace).get("status", {})
    failed = [c for c in status.get("conditions", []) if c["type"] == "Failed"]
    assert not failed, failed
    return any(
        c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", [])
    )


def _running_pod(cluster: LocalCluster, namespace: str, dm: str) -> ServingPod:
    selector = ",".join(f"{k}={v}" for k, v in selector_labels(dm, REVISION).items())
    pods = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    status = pods[0]["status"]
    assert status.get("phase") == "Running" and status.get("podIP"), status
    return ServingPod(pods[0]["metadata"]["name"], status["podIP"])


@pytest.fixture(scope="module")
def runtime(local_cluster: LocalCluster, simulators: Simulators) -> Iterator[Runtime]:
    suffix = uuid.uuid4().hex[:8]
    namespace = f"rt-{suffix}"
    repo = f"rt-{suffix}"
    model = f"{repo}:v1"
    api_key = secrets.token_urlsafe(24)
    with httpx.Client(base_url=simulators.registry_url, trust_env=False, timeout=10) as reg:
        put = reg.put(
            f"/_sim/models/library/{repo}/v1",
            json={"accuracy": ACCURACY, "confidence": CONFIDENCE, "size": MODEL_SIZE},
        )
        put.raise_for_status()
        digest: str = put.json()["digest"]
    local_cluster.kubectl("create", "namespace", namespace)
    local_cluster.kubectl("create", "configmap", "owner", "-n", namespace)
    local_cluster.kubectl(
        "create", "secret", "generic", "ollaya-key", "-n", namespace,
        f"--from-literal=apikey={api_key}",
    )  # fmt: skip
    cm = local_cluster.kubectl_json("get", "configmap", "owner", "-n", namespace)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": cm["metadata"]["uid"]}
    key_ref = SecretKeyRef(name="ollaya-key", key="apikey")
    local_cluster.apply(
        [
            *_revision_objects(namespace, "cpu", model, digest, "cpu", owner, key_ref),
            *_revision_objects(namespace, "gpu", model, digest, "cuda", owner, None),
        ]
    )
    for job in (prefetch_job_name("cpu", REVISION), prefetch_job_name("gpu", REVISION)):
        assert_eventually(
            partial(_job_complete, local_cluster, namespace, job), SETUP_WAIT, what=job
        )
    cpu = assert_eventually(lambda: _running_pod(local_cluster, namespace, "cpu"), SETUP_WAIT)
    gpu = assert_eventually(lambda: _running_pod(local_cluster, namespace, "gpu"), SETUP_WAIT)
    yield Runtime(
        namespace=namespace,
        model=model,
        digest=digest,
        api_key=api_key,
        cpu=cpu,
        gpu=gpu,
        cpu_store=volume_dir(simulators.state_dir, namespace, store_pvc_name("cpu", REVISION)),
        store_manifest_path=parse_model_name(
            model, default_registry=simulators.registry_url
        ).store_manifest_path,
    )
    local_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


# -- clients and helpers -------------------------------------------------------------------


def _client(pod: ServingPod, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=pod.url, headers=headers, trust_env=False, timeout=15)


@pytest.fixture
def cpu(runtime: Runtime) -> Iterator[httpx.Client]:
    with _client(runtime.cpu, runtime.api_key) as client:
        yield client


@pytest.fixture
def gpu(runtime: Runtime) -> Iterator[httpx.Client]:
    with _client(runtime.gpu) as client:
        yield client


def _annotate(
    cluster: LocalCluster, runtime: Runtime, pod: ServingPod, key: str, value: str | None
) -> None:
    change = f"{SIM}{key}-" if value is None else f"{SIM}{key}={value}"
    cluster.kubectl("annotate", "pod", pod.name, "-n", runtime.namespace, change, "--overwrite")


def _load(client: httpx.Client, model: str, keep_alive: Any = -1) -> httpx.Response:
    return client.post("/api/decide", json={"model": model, "keep_alive": keep_alive})


def _loaded(client: httpx.Client, model: str) -> dict[str, Any]:
    response = _load(client, model)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _unload(client: httpx.Client, model: str) -> None:
    response = _load(client, model, keep_alive=0)
    assert response.status_code == 200, response.text
    assert response.json()["done_reason"] == "unload"


def _ps(client: httpx.Client) -> list[dict[str, Any]]:
    response = client.get("/api/ps")
    assert response.status_code == 200, response.text
    models: list[dict[str, Any]] = response.json()["models"]
    return models


def _ps_one(client: httpx.Client) -> dict[str, Any]:
    models = _ps(client)
    assert len(models) == 1, models
    return models[0]


QUESTIONS: dict[str, Any] = {
    "team": {"type": "choice", "question": "Which team?", "criteria": ["billing", "tech"]},
    "refund": {
        "type": "noul",
        "question": "Asks for money back?",
        "criteria": {"true": "asks for a refund", "false": "does not"},
    },
    "urgency": {"type": "score", "question": "How urgent?", "criteria": ["low", "mid", "high"]},
}


def _decision(model: str, state: Any = "my invoice is wrong") -> dict[str, Any]:
    return {"model": model, "state": state, "questions": QUESTIONS}


# -- runtime: endpoints --------------------------------------------------------------------


def test_root_and_version_with_api_key_from_the_secret(runtime: Runtime) -> None:
    with _client(runtime.cpu) as anonymous:
        root = anonymous.get("/")
        assert root.status_code == 200 and root.text == "Ollaya is running"
        assert root.headers["content-type"].startswith("text/plain")
        head = anonymous.head("/")
        assert head.status_code == 200 and head.content == b""
        denied = anonymous.get("/api/version")
        assert denied.status_code == 401
        assert denied.json()["code"] == "UNAUTHORIZED"
        assert denied.headers["www-authenticate"] == "Bearer"
        wrong = anonymous.get("/api/version", headers={"Authorization": "Bearer not-the-key"})
        assert wrong.status_code == 401
        # The scheme is case-insensitive, the token exact.
        ok = anonymous.get("/api/version", headers={"Authorization": f"bearer {runtime.api_key}"})
        assert ok.status_code == 200 and ok.json() == {"version": "0.10.0"}
    # The cuda Deployment has no API key: no auth there.
    with _client(runtime.gpu) as gpu:
        assert gpu.get("/api/version").json() == {"version": "0.10.0"}


def test_load_ps_and_unload(runtime: Runtime, cpu: httpx.Client) -> None:
    _unload(cpu, runtime.model)
    assert _ps(cpu) == []
    body = _loaded(cpu, runtime.model)
    assert body["done_reason"] == "load" and body["done"] is True and body["answers"] == {}
    assert body["model"] == runtime.model
    assert isinstance(body["load_duration"], int) and body["load_duration"] > 0
    entry = _ps_one(cpu)
    # The digest is sha256 of the manifest the prefetch Job stored in this Pod's volume.
    stored = (runtime.cpu_store / runtime.store_manifest_path).read_bytes()
    assert entry["digest"] == hashlib.sha256(stored).hexdigest() == runtime.digest
    assert entry["name"] == entry["model"] == runtime.model
    assert entry["device"] == "cpu" and entry["size_vram"] == 0
    assert entry["size"] == MODEL_SIZE and entry["context_length"] == 512
    assert entry["expires_at"] is None  # keep_alive -1 pins
    assert entry["details"] == {
        "format": "onnx",
        "family": "laya",
        "parameter_size": "421M",
        "quantization_level": "F32",
    }
    # Loading again is a no-op; keep_alive 0 unloads.
    assert _loaded(cpu, runtime.model)["load_duration"] == 0
    _unload(cpu, runtime.model)
    assert _ps(cpu) == []
    missing = _load(cpu, "not-there:v1")
    assert missing.status_code == 404 and missing.json()["code"] == "MODEL_NOT_FOUND"


def test_cuda_pod_on_the_gpu_node_and_silent_cpu_fallback(
    local_cluster: LocalCluster, runtime: Runtime, gpu: httpx.Client
) -> None:
    assert runtime.gpu.ip.startswith("100.72.2."), runtime.gpu  # kwok-gpu-0's podCIDR
    assert runtime.cpu.ip.startswith("100.72.1."), runtime.cpu
    _loaded(gpu, runtime.model)
    entry = _ps_one(gpu)
    assert entry["device"] == "cuda:0" and entry["size_vram"] == MODEL_SIZE
    assert entry["digest"] == runtime.digest
    _annotate(local_cluster, runtime, runtime.gpu, "device", "cpu")
    try:
        assert_eventually(
            lambda: _ps_one(gpu)["device"] == "cpu", FAULT_WAIT, what="device cpu reported"
        )
        assert _ps_one(gpu)["size_vram"] == 0
    finally:
        _annotate(local_cluster, runtime, runtime.gpu, "device", None)
    assert_eventually(lambda: _ps_one(gpu)["device"] == "cuda:0", FAULT_WAIT, what="cuda again")


def _check_answers(answers: dict[str, Any]) -> None:
    """The contract's shapes, with values worked out by hand for confidence 0.8."""
    team = answers["team"]
    assert team["type"] == "choice" and team["choice"] in ("billing", "tech")
    other = "tech" if team["choice"] == "billing" else "billing"
    assert team["probabilities"] == {team["choice"]: 0.8, other: 0.2}
    assert team["confidence"] == 0.6  # (K*p_max - 1)/(K - 1) = (2*0.8 - 1)/1
    refund = answers["refund"]
    assert refund["type"] == "noul" and refund["noul"] in (0.8, 0.2) and "confidence" not in refund
    urgency = answers["urgency"]
    assert urgency["type"] == "score"
    assert urgency["legend"] == {"0": "low", "1": "mid", "2": "high"}
    # Chosen level 0.8; the rest on its neighbours: (0.8, 0.2, 0) → 0.2, (0.1, 0.8, 0.1) → 1.0,
    # (0, 0.2, 0.8) → 1.8.
    by_level = {
        "0": ({"0": 0.8, "1": 0.2, "2": 0.0}, 0.2),
        "1": ({"0": 0.1, "1": 0.8, "2": 0.1}, 1.0),
        "2": ({"0": 0.0, "1": 0.2, "2": 0.8}, 1.8),
    }
    chosen = max(urgency["probabilities"], key=urgency["probabilities"].get)
    assert (urgency["probabilities"], urgency["score"]) == by_level[chosen]
    assert urgency["confidence"] == 0.7  # (3*0.8 - 1)/2


def test_decisions_choice_noul_score_and_alias(runtime: Runtime, cpu: httpx.Client) -> None:
    request = _decision(runtime.model, {"ticket": "T-1", "text": "charged twice, refund please"})
    response = cpu.post("/v1/systemone", json=request)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == runtime.model
    _check_answers(body["answers"])
    # Deterministic in (model profile, case): what simulators.answers computes offline.
    case = {"state": request["state"], "questions": QUESTIONS}
    assert body["answers"] == answer_case(case, ACCURACY, CONFIDENCE)
    assert body["usage"]["output_tokens"] == 0 and body["usage"]["input_tokens"] >= 1
    assert isinstance(body["total_duration"], int) and "done_reason" not in body
    alias = cpu.post("/v1/decisions", json=request)
    assert alias.status_code == 200 and alias.json()["answers"] == body["answers"]
    # /api/decide with a state decides too.
    decide = cpu.post("/api/decide", json=request)
    assert decide.status_code == 200 and decide.json()["answers"] == body["answers"]
    assert decide.json()["done_reason"] == "stop"


def test_numeric_state_is_422(runtime: Runtime, cpu: httpx.Client) -> None:
    response = cpu.post("/v1/systemone", json=_decision(runtime.model, 42))
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "VALIDATION_ERROR"
    assert [d["loc"] for d in body["detail"]] == [["body", "state"]]


def test_pull_fails_on_the_read_only_store(
    simulators: Simulators, runtime: Runtime, cpu: httpx.Client
) -> None:
    stored = (runtime.cpu_store / runtime.store_manifest_path).read_bytes()
    streamed = cpu.post("/api/pull", json={"model": runtime.model})
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in streamed.text.splitlines()]
    assert lines[0] == {"status": "pulling manifest"}
    assert lines[-1]["code"] == "STORAGE_ERROR" and "read-only" in lines[-1]["error"]
    whole = cpu.post("/api/pull", json={"model": runtime.model, "stream": False})
    assert whole.status_code == 500 and whole.json()["code"] == "STORAGE_ERROR"
    # Before the stream starts: 404 for an unknown tag, 502 when the registry fails.
    unknown = cpu.post("/api/pull", json={"model": f"{runtime.model}-gone"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "MODEL_NOT_FOUND"
    repo, tag = runtime.model.split(":")
    with httpx.Client(base_url=simulators.registry_url, trust_env=False) as reg:
        reg.put(
            f"/_sim/faults/library/{repo}/{tag}", json={"status": 503, "count": 1}
        ).raise_for_status()
    failing = cpu.post("/api/pull", json={"model": runtime.model})
    assert failing.status_code == 502 and failing.json()["code"] == "REGISTRY_ERROR"
    assert (runtime.cpu_store / runtime.store_manifest_path).read_bytes() == stored


# -- runtime: fault annotations on a live Pod ----------------------------------------------


def test_fault_digest(local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client) -> None:
    _loaded(cpu, runtime.model)
    wrong = "ab" * 32
    _annotate(local_cluster, runtime, runtime.cpu, "digest", wrong)
    try:
        assert_eventually(lambda: _ps_one(cpu)["digest"] == wrong, FAULT_WAIT, what="digest")
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "digest", None)
    assert_eventually(lambda: _ps_one(cpu)["digest"] == runtime.digest, FAULT_WAIT)


def test_fault_never_pin(local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client) -> None:
    _loaded(cpu, runtime.model)  # keep_alive -1
    assert _ps_one(cpu)["expires_at"] is None
    _annotate(local_cluster, runtime, runtime.cpu, "never-pin", "true")
    try:
        expires = assert_eventually(
            lambda: _ps_one(cpu)["expires_at"], FAULT_WAIT, what="expires_at set"
        )
        # OLLAYA_KEEP_ALIVE is -1 in the rendered Pod, so the fault falls back to 5m.
        left = datetime.fromisoformat(expires.replace("Z", "+00:00")) - datetime.now(UTC)
        assert timedelta(minutes=4) < left <= timedelta(minutes=5), left
        assert _loaded(cpu, runtime.model)["done_reason"] == "load"
        assert _ps_one(cpu)["expires_at"] is not None  # even after keep_alive -1
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "never-pin", None)
    assert_eventually(lambda: _ps_one(cpu)["expires_at"] is None, FAULT_WAIT, what="pinned")


def test_fault_load_delay(local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client) -> None:
    def reload() -> int:
        _unload(cpu, runtime.model)
        load_ns: int = _loaded(cpu, runtime.model)["load_duration"]
        return load_ns

    _annotate(local_cluster, runtime, runtime.cpu, "load-delay-seconds", "0.8")
    try:
        assert_eventually(lambda: reload() >= 800_000_000, FAULT_WAIT, what="slow load")
        started = time.monotonic()
        reload()
        assert time.monotonic() - started >= 0.8
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "load-delay-seconds", None)
    assert_eventually(lambda: reload() < 800_000_000, FAULT_WAIT, what="fast load")


def test_fault_latency(local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client) -> None:
    _loaded(cpu, runtime.model)
    request = _decision(runtime.model)

    def decide() -> float:
        started = time.monotonic()
        response = cpu.post("/v1/systemone", json=request)
        assert response.status_code == 200, response.text
        return time.monotonic() - started

    _annotate(local_cluster, runtime, runtime.cpu, "latency-ms", "400")
    try:
        assert_eventually(lambda: decide() >= 0.4, FAULT_WAIT, what="slow decisions")
        # One forward pass at a time per model: two concurrent decisions take twice as long.
        started = time.monotonic()
        with (
            _client(runtime.cpu, runtime.api_key) as a,
            _client(runtime.cpu, runtime.api_key) as b,
            ThreadPoolExecutor(2) as pool,
        ):
            codes = list(pool.map(lambda c: c.post("/v1/systemone", json=request), (a, b)))
        assert [r.status_code for r in codes] == [200, 200]
        assert time.monotonic() - started >= 0.8
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "latency-ms", None)
    assert_eventually(lambda: decide() < 0.4, FAULT_WAIT, what="fast decisions")


def test_fault_queue_full_burst_and_max_queue(
    local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client
) -> None:
    request = _decision(runtime.model)
    _loaded(cpu, runtime.model)

    def rejected(response: httpx.Response) -> bool:
        if response.status_code == 200:
            return False
        assert response.status_code == 503, response.text
        assert response.json()["code"] == "QUEUE_FULL" and response.headers["retry-after"] == "1"
        return True

    _annotate(local_cluster, runtime, runtime.cpu, "queue-full-burst", "2")
    try:
        # Requests before the annotation is seen pass; then exactly two are turned away.
        assert_eventually(
            lambda: rejected(cpu.post("/v1/systemone", json=request)), FAULT_WAIT, what="burst"
        )
        assert rejected(cpu.post("/v1/systemone", json=request))
        assert not rejected(cpu.post("/v1/systemone", json=request))
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "queue-full-burst", None)
    _annotate(local_cluster, runtime, runtime.cpu, "max-queue", "0")
    try:
        assert_eventually(
            lambda: rejected(cpu.post("/v1/systemone", json=request)), FAULT_WAIT, what="queue 0"
        )
        assert rejected(cpu.post("/v1/decisions", json=request))
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "max-queue", None)
    assert_eventually(
        lambda: not rejected(cpu.post("/v1/systemone", json=request)), FAULT_WAIT, what="admitted"
    )


def test_fault_unauthorized(
    local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client
) -> None:
    _annotate(local_cluster, runtime, runtime.cpu, "unauthorized", "true")
    try:
        # The right key from the Secret, refused all the same.
        assert_eventually(
            lambda: cpu.get("/api/version").status_code == 401, FAULT_WAIT, what="401"
        )
        assert cpu.get("/api/ps").json()["code"] == "UNAUTHORIZED"
        assert cpu.get("/").status_code == 200  # liveness stays open
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "unauthorized", None)
    assert_eventually(lambda: cpu.get("/api/version").status_code == 200, FAULT_WAIT)


def test_fault_lose_model(local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client) -> None:
    _loaded(cpu, runtime.model)
    _annotate(local_cluster, runtime, runtime.cpu, "lose-model", "true")
    try:
        assert_eventually(lambda: _ps(cpu) == [], FAULT_WAIT, what="model lost")
        lost = cpu.post("/v1/systemone", json=_decision(runtime.model))
        assert lost.status_code == 404 and lost.json()["code"] == "MODEL_NOT_FOUND"
        reload = _load(cpu, runtime.model)
        assert reload.status_code == 404 and reload.json()["code"] == "MODEL_NOT_FOUND"
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "lose-model", None)
    # A mask, not an eviction: the loaded model comes back.
    back = assert_eventually(lambda: _ps(cpu), FAULT_WAIT, what="model back")
    assert [m["digest"] for m in back] == [runtime.digest]


def test_fault_load_fails(local_cluster: LocalCluster, runtime: Runtime, cpu: httpx.Client) -> None:
    _unload(cpu, runtime.model)
    _annotate(local_cluster, runtime, runtime.cpu, "load-fails", "true")
    try:

        def failed() -> bool:
            response = _load(cpu, runtime.model)
            if response.status_code == 200:
                _unload(cpu, runtime.model)
                return False
            assert response.status_code == 500 and response.json()["code"] == "MODEL_LOAD_FAILED"
            return True

        assert_eventually(failed, FAULT_WAIT, what="load fails")
        implicit = cpu.post("/v1/systemone", json=_decision(runtime.model))
        assert implicit.status_code == 500 and implicit.json()["code"] == "MODEL_LOAD_FAILED"
        assert _ps(cpu) == []
    finally:
        _annotate(local_cluster, runtime, runtime.cpu, "load-fails", None)
    assert_eventually(lambda: _load(cpu, runtime.model).status_code == 200, FAULT_WAIT)
    assert _ps_one(cpu)["digest"] == runtime.digest


# -- the registry simulator ----------------------------------------------------------------


@pytest.fixture
def registry(simulators: Simulators) -> Iterator[tuple[httpx.Client, str]]:
    """A client of the registry simulator and a fresh repository ``library/<repo>:v1``."""
    repo = f"rg-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=simulators.registry_url, trust_env=False, timeout=10) as reg:
        reg.put(f"/_sim/models/library/{repo}/v1", json={"accuracy": 0.5}).raise_for_status()
        yield reg, repo
        reg.delete("/_sim/faults", params={"model": f"library/{repo}:v1"})
        reg.delete(f"/_sim/models/library/{repo}/v1")


def test_registry_manifest_blobs_and_404(registry: tuple[httpx.Client, str]) -> None:
    reg, repo = registry
    assert reg.get("/v2/").json() == {}
    manifest = reg.get(f"/v2/library/{repo}/manifests/v1")
    assert manifest.status_code == 200
    assert manifest.headers["content-type"] == (
        "application/vnd.docker.distribution.manifest.v2+json"
    )
    digest = hashlib.sha256(manifest.content).hexdigest()
    assert manifest.headers["docker-content-digest"] == f"sha256:{digest}"
    assert reg.get(f"/_sim/models/library/{repo}/v1").json()["digest"] == digest
    head = reg.head(f"/v2/library/{repo}/manifests/v1")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["docker-content-digest"] == f"sha256:{digest}"
    doc = manifest.json()
    assert doc["schemaVersion"] == 2
    for desc in [doc["config"], *doc["layers"]]:
        blob = reg.get(f"/v2/library/{repo}/blobs/{desc['digest']}")
        assert blob.status_code == 200 and len(blob.content) == desc["size"]
        assert f"sha256:{hashlib.sha256(blob.content).hexdigest()}" == desc["digest"]
    unknown = reg.get(f"/v2/library/{repo}/manifests/v2")
    assert unknown.status_code == 404 and unknown.json()["code"] == "MANIFEST_UNKNOWN"
    no_blob = reg.get(f"/v2/library/{repo}/blobs/sha256:{'0' * 64}")
    assert no_blob.status_code == 404 and no_blob.json()["code"] == "BLOB_UNKNOWN"


def test_registry_weights_host(simulators: Simulators) -> None:
    repo = f"rg-{uuid.uuid4().hex[:8]}"
    weights = f"{simulators.registry_url}/_weights"
    with httpx.Client(base_url=simulators.registry_url, trust_env=False) as reg:
        reg.put(f"/_sim/models/library/{repo}/v1", json={"weights_url": weights})
        try:
            (layer,) = reg.get(f"/v2/library/{repo}/manifests/v1").json()["layers"]
            hex_digest = layer["digest"].removeprefix("sha256:")
            assert layer["urls"] == [f"{weights}/{hex_digest}"]
            blob = reg.get(layer["urls"][0])
            assert hashlib.sha256(blob.content).hexdigest() == hex_digest
        finally:
            reg.delete(f"/_sim/models/library/{repo}/v1")


def test_registry_faults(registry: tuple[httpx.Client, str]) -> None:
    reg, repo = registry
    path = f"/v2/library/{repo}/manifests/v1"
    faults = f"/_sim/faults/library/{repo}/v1"
    original = reg.get(path).content
    # 429 with Retry-After, once.
    reg.put(faults, json={"status": 429, "count": 1, "retry_after": 2}).raise_for_status()
    limited = reg.get(path)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert limited.json()["code"] == "TOOMANYREQUESTS"
    assert reg.get(path).content == original
    # 5xx for the next two reads, then served again.
    reg.put(faults, json={"status": 503, "count": 2}).raise_for_status()
    assert [reg.get(path).status_code for _ in range(3)] == [503, 503, 200]
    # Blob downloads can fail on their own.
    reg.put(faults, json={"status": 500, "count": 1, "target": "blob"}).raise_for_status()
    config = json.loads(original)["config"]["digest"]
    assert reg.get(f"/v2/library/{repo}/blobs/{config}").status_code == 500
    assert reg.get(f"/v2/library/{repo}/blobs/{config}").status_code == 200
    # Slow.
    reg.put(faults, json={"delay_seconds": 0.5, "count": 1}).raise_for_status()
    started = time.monotonic()
    assert reg.get(path).content == original
    assert time.monotonic() - started >= 0.5
    # Garbage: the status and body verbatim.
    reg.put(faults, json={"status": 200, "body": "not json", "count": 1}).raise_for_status()
    garbage = reg.get(path)
    assert garbage.status_code == 200 and garbage.content == b"not json"
    # The tag moves between two reads; the moved manifest's blobs are served too.
    reg.put(faults, json={"tag_moved": True}).raise_for_status()
    first, second = reg.get(path), reg.get(path)
    assert first.content == original and second.content != original
    moved = hashlib.sha256(second.content).hexdigest()
    assert second.headers["docker-content-digest"] == f"sha256:{moved}"
    for desc in [second.json()["config"], *second.json()["layers"]]:
        blob = reg.get(f"/v2/library/{repo}/blobs/{desc['digest']}")
        assert f"sha256:{hashlib.sha256(blob.content).hexdigest()}" == desc["digest"]
    listed = reg.get("/_sim/faults").json()["faults"]
    assert {"model": f"library/{repo}:v1", "tag_moved": True}.items() <= listed[-1].items()
    reg.delete(faults).raise_for_status()
    assert reg.get(path).content == original


def test_registry_request_log_hides_credentials(registry: tuple[httpx.Client, str]) -> None:
    reg, repo = registry
    path = f"/v2/library/{repo}/manifests/v1"
    reg.get(path, headers={"Authorization": "Bearer s3cret"}).raise_for_status()
    reg.head(path).raise_for_status()
    logged = [r for r in reg.get("/_sim/requests").json()["requests"] if r["path"] == path]
    assert [(r["method"], r["authorization"]) for r in logged] == [("GET", True), ("HEAD", False)]
    assert "s3cret" not in json.dumps(logged)
    assert {m["name"] for m in reg.get("/_sim/models").json()["models"]} >= {f"library/{repo}:v1"}
    assert reg.delete(f"/_sim/models/library/{repo}/v1").status_code == 200
    assert reg.get(path).status_code == 404

"""RuntimeClient and the gate verdict against the runtime simulator (run inside the test netns).

Each test puts its Pod at its own 127.0.0.x address; faults are the simulator's Pod annotations
(`sim.dmrollout.dev/*`, simulators.pod_faults).
"""

from __future__ import annotations

import httpx
import pytest
from runtime_harness import API_KEY, LAYA, RuntimeSim

from decisionmodel.engine.runtime_client import GateVerdict, RuntimeClient, verdict
from decisionmodel.errors import ProbeError, QueueFull
from decisionmodel.vocabulary import Reason

QUESTIONS = {"dept": {"type": "choice", "criteria": ["billing", "technical", "other"]}}


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def client(runtime: RuntimeSim, ip: str, **options: object) -> RuntimeClient:
    options.setdefault("api_key", API_KEY)
    return RuntimeClient(runtime.base_url(ip), **options)  # type: ignore[arg-type]


async def gate(runtime: RuntimeSim, ip: str, device: str = "cpu", **options: object) -> GateVerdict:
    """Warmup then inspect, as the readiness gate does, and the verdict for LAYA."""
    async with client(runtime, ip, **options) as rt:
        try:
            await rt.warmup("laya:en", timeout=10)
            seen = await rt.inspect("laya:en")
        except ProbeError as err:
            return verdict(LAYA.digest, device, None, err)
    return verdict(LAYA.digest, device, seen, None)


async def test_warmup_and_inspect_give_model_ready(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.2")
    async with client(runtime, "127.0.0.2") as rt:
        warmed = await rt.warmup("laya:en", timeout=10)
        seen = await rt.inspect("laya:en")
        assert await rt.version() == "0.10.0"
    assert warmed.done_reason == "load"
    assert seen is not None
    assert (seen.digest, seen.device, seen.pinned) == (LAYA.digest, "cpu", True)
    result = verdict(LAYA.digest, "cpu", seen, None)
    assert result.ready is True
    assert result.reason is Reason.MODEL_READY
    assert result.precision == "F32"


async def test_cuda_pod_on_a_gpu_node_is_ready(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.3", env={"OLLAYA_DEVICE": "cuda"}, node_has_gpu=True)
    result = await gate(runtime, "127.0.0.3", device="cuda")
    assert (result.ready, result.reason) == (True, Reason.MODEL_READY)


async def test_silent_cpu_fallback_is_device_mismatch(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.4", env={"OLLAYA_DEVICE": "cuda"}, annotations={"device": "cpu"})
    result = await gate(runtime, "127.0.0.4", device="cuda")
    assert (result.ready, result.reason) == (False, Reason.DEVICE_MISMATCH)


async def test_bare_cuda_device_is_not_class_cuda(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.5", annotations={"device": "cuda"})
    result = await gate(runtime, "127.0.0.5", device="cuda")
    assert result.reason is Reason.DEVICE_MISMATCH


async def test_wrong_digest_is_digest_mismatch(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.6", annotations={"digest": "e" * 64, "device": "metal"})
    result = await gate(runtime, "127.0.0.6")
    # Digest first, although the device is wrong too.
    assert (result.ready, result.reason) == (False, Reason.DIGEST_MISMATCH)


async def test_never_pinned_is_not_pinned(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.7", annotations={"never-pin": "true"})
    result = await gate(runtime, "127.0.0.7")
    assert (result.ready, result.reason) == (False, Reason.NOT_PINNED)


async def test_unauthorized_is_probe_error(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.8", annotations={"unauthorized": "true"})
    result = await gate(runtime, "127.0.0.8")
    assert (result.ready, result.reason) == (False, Reason.PROBE_ERROR)
    assert "401" in result.message
    assert API_KEY not in result.message


async def test_wrong_key_is_a_401_probe_error(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.9")
    async with client(runtime, "127.0.0.9", api_key="not-the-key") as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.inspect("laya:en")
    assert (caught.value.status, caught.value.code) == (401, "UNAUTHORIZED")
    assert "not-the-key" not in str(caught.value)


async def test_lost_model_is_probe_error(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.10")
    async with client(runtime, "127.0.0.10") as rt:
        await rt.warmup("laya:en", timeout=10)
        runtime.add_pod("127.0.0.10", annotations={"lose-model": "true"})
        seen = await rt.inspect("laya:en")
    assert seen is None
    result = verdict(LAYA.digest, "cpu", seen, None)
    assert (result.ready, result.reason) == (False, Reason.PROBE_ERROR)


async def test_cuda_on_a_cpu_node_fails_the_load(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.11", env={"OLLAYA_DEVICE": "cuda"})
    async with client(runtime, "127.0.0.11") as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.warmup("laya:en", timeout=10)
    assert (caught.value.status, caught.value.code) == (500, "MODEL_LOAD_FAILED")


async def test_model_missing_from_the_store(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.12", artifact=None)
    async with client(runtime, "127.0.0.12") as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.warmup("laya:en", timeout=10)
    assert (caught.value.status, caught.value.code) == (404, "MODEL_NOT_FOUND")


async def test_queue_full_burst_is_retried(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.13", annotations={"queue-full-burst": "2"})
    sleeps = Sleeps()
    async with client(runtime, "127.0.0.13", sleep=sleeps) as rt:
        answer = await rt.decide("laya:en", "I was charged twice", QUESTIONS)
    assert set(answer["answers"]) == {"dept"}
    assert answer["answers"]["dept"]["choice"] in {"billing", "technical", "other"}
    # The simulator answers 503 QUEUE_FULL with Retry-After: 1, twice.
    assert sleeps.calls == [1.0, 1.0]


async def test_queue_full_past_the_budget_is_queue_full(runtime: RuntimeSim) -> None:
    runtime.add_pod("127.0.0.14", annotations={"queue-full-burst": "5"})
    sleeps = Sleeps()
    async with client(runtime, "127.0.0.14", sleep=sleeps, queue_full_attempts=3) as rt:
        with pytest.raises(QueueFull):
            await rt.decide("laya:en", "x", QUESTIONS)
        # The burst has 2 rejections left; the next call's third attempt is answered.
        answer = await rt.decide("laya:en", "x", QUESTIONS)
    assert "dept" in answer["answers"]
    assert sleeps.calls == [1.0, 1.0, 1.0, 1.0]


async def test_runtime_client_ignores_proxy_env(
    runtime: RuntimeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a proxy in the environment that accepts nothing, an env-trusting client fails, the
    runtime client still reaches the Pod directly (and so never hands a proxy the API key)."""
    runtime.add_pod("127.0.0.15")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # discard port: nothing listens
    async with httpx.AsyncClient(trust_env=True) as env_client:
        with pytest.raises(httpx.ConnectError):
            await env_client.get(f"{runtime.base_url('127.0.0.15')}/")
    result = await gate(runtime, "127.0.0.15")
    assert result.reason is Reason.MODEL_READY

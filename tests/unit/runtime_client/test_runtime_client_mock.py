"""RuntimeClient against httpx.MockTransport: requests sent, answers mapped to typed errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from decisionmodel.engine.runtime_client import (
    RuntimeClient,
    RuntimeTimeouts,
    WarmupResult,
    runtime_base_url,
)
from decisionmodel.errors import ProbeError, QueueFull, RuntimeRequestRejected

KEY = "s3cr3t-api-key-value"
DIGEST = "c" * 64
BASE = "http://10.1.2.3:11435"
PS_ENTRY = {
    "name": "laya:en",
    "model": "laya:en",
    "size": 845897529,
    "digest": DIGEST,
    "details": {"format": "onnx", "family": "laya", "quantization_level": "F32"},
    "expires_at": None,
    "size_vram": 0,
    "context_length": 512,
    "device": "cpu",
}

Handler = Callable[[httpx.Request], httpx.Response]


class Runtime:
    """Scripted answers (the last repeats) and a record of requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def client(
    handler: Handler, *, api_key: str | None = KEY, sleep: Sleeps | None = None, **options: Any
) -> RuntimeClient:
    return RuntimeClient(
        BASE,
        api_key=api_key,
        transport=httpx.MockTransport(handler),
        sleep=sleep or Sleeps(),
        **options,
    )


def error(status: int, code: str, text: str = "", **headers: str) -> httpx.Response:
    return httpx.Response(
        status, json={"error": text or code.lower(), "code": code}, headers=headers
    )


def assert_no_key(err: BaseException) -> None:
    assert KEY not in str(err)
    assert KEY not in repr(err)


# --- warmup ---------------------------------------------------------------------------------


async def test_warmup_loads_and_pins_with_the_api_key() -> None:
    runtime = Runtime(
        httpx.Response(
            200,
            json={"model": "laya:en", "answers": {}, "done_reason": "load", "load_duration": 1234},
        )
    )
    async with client(runtime) as rt:
        result = await rt.warmup("laya:en", timeout=60)
    assert result == WarmupResult(model="laya:en", done_reason="load", load_duration_ns=1234)
    (request,) = runtime.requests
    assert (request.method, str(request.url)) == ("POST", f"{BASE}/api/decide")
    assert json.loads(request.content) == {"model": "laya:en", "keep_alive": -1}
    assert request.headers["Authorization"] == f"Bearer {KEY}"


async def test_no_authorization_header_without_a_key() -> None:
    runtime = Runtime(httpx.Response(200, json={"version": "0.10.0"}))
    async with client(runtime, api_key=None) as rt:
        assert await rt.version() == "0.10.0"
    assert "Authorization" not in runtime.requests[0].headers


@pytest.mark.parametrize("done_reason", ["unload", "stop", None])
async def test_warmup_needs_done_reason_load(done_reason: str | None) -> None:
    runtime = Runtime(httpx.Response(200, json={"model": "laya:en", "done_reason": done_reason}))
    async with client(runtime) as rt:
        with pytest.raises(ProbeError, match="expected done_reason 'load'"):
            await rt.warmup("laya:en")


async def test_warmup_model_not_found() -> None:
    runtime = Runtime(error(404, "MODEL_NOT_FOUND", "model 'laya:en' not found"))
    async with client(runtime) as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.warmup("laya:en")
    assert (caught.value.status, caught.value.code) == (404, "MODEL_NOT_FOUND")
    assert "OLLAYA_REGISTRY" in str(caught.value)
    assert caught.value.permanent is False


async def test_warmup_load_failure_quotes_the_runtime() -> None:
    runtime = Runtime(error(500, "MODEL_LOAD_FAILED", "CUDA requested but no GPU " + "x" * 500))
    async with client(runtime) as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.warmup("laya:en")
    message = str(caught.value)
    assert (caught.value.status, caught.value.code) == (500, "MODEL_LOAD_FAILED")
    assert "CUDA requested but no GPU" in message
    assert "x" * 201 not in message  # quoted text is cut at 200 characters
    assert "spec.device" in message


async def test_warmup_of_a_refused_name_is_rejected_for_good() -> None:
    # What the runtime answers a name it cannot parse (issue 11, point 12): no later round
    # would get another answer, so the step must not wait for its deadline.
    name = "http://127.0.0.1:5000/library/laya:en"
    refusal = error(400, "INVALID_MODEL_NAME", f"invalid model name {name!r}")
    async with client(Runtime(refusal)) as rt:
        with pytest.raises(RuntimeRequestRejected) as caught:
            await rt.warmup(name)
    assert (caught.value.status, caught.value.code) == (400, "INVALID_MODEL_NAME")
    assert caught.value.permanent is True
    message = str(caught.value)
    assert f"warmup of {name}" in message and "invalid model name" in message
    assert "spec.model" in message and "spec.runtimeVersion" in message
    assert_no_key(caught.value)


@pytest.mark.parametrize("status", [401, 404, 408, 429])
async def test_warmup_4xx_a_later_round_may_pass_stays_a_probe_error(status: int) -> None:
    async with client(Runtime(error(status, "SOMETHING"))) as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.warmup("laya:en")
    assert caught.value.status == status and caught.value.permanent is False


async def test_unauthorized_never_shows_the_key() -> None:
    runtime = Runtime(
        error(401, "UNAUTHORIZED", f"bad token {KEY}", **{"WWW-Authenticate": "Bearer"})
    )
    async with client(runtime) as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.warmup("laya:en")
        assert KEY not in repr(rt)
    assert (caught.value.status, caught.value.code) == (401, "UNAUTHORIZED")
    assert "spec.auth.apiKeySecretRef" in str(caught.value)
    assert_no_key(caught.value)


async def test_transport_errors_become_probe_errors() -> None:
    runtime = Runtime(httpx.ConnectError("connection refused"))
    async with client(runtime) as rt:
        with pytest.raises(ProbeError, match="ConnectError") as caught:
            await rt.inspect("laya:en")
    assert caught.value.status is None
    # The message says what to check, as it ends up on the Promoted condition.
    assert f"{BASE} cannot be reached" in str(caught.value)
    assert "reachable from the worker" in str(caught.value)
    assert_no_key(caught.value)


async def test_warmup_is_bounded_by_its_timeout() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json={"done_reason": "load"})

    rt = RuntimeClient(BASE, api_key=KEY, transport=httpx.MockTransport(slow))
    async with rt:
        with pytest.raises(ProbeError, match=r"did not answer within 0\.2 s"):
            await rt.warmup("laya:en", timeout=0.2)


# --- inspect --------------------------------------------------------------------------------


async def test_inspect_finds_the_model() -> None:
    other = {**PS_ENTRY, "name": "nli:latest", "model": "nli:latest", "digest": "d" * 64}
    runtime = Runtime(httpx.Response(200, json={"models": [other, PS_ENTRY]}))
    async with client(runtime) as rt:
        found = await rt.inspect("laya:en")
    assert found is not None
    assert (found.name, found.digest, found.device, found.pinned) == (
        "laya:en",
        DIGEST,
        "cpu",
        True,
    )
    assert found.details.quantization_level == "F32"
    (request,) = runtime.requests
    assert (request.method, str(request.url)) == ("GET", f"{BASE}/api/ps")
    assert request.headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    ("asked", "reported", "default_registry", "found"),
    [
        ("laya:en", "ollaya.dev/library/laya:en", "https://ollaya.dev", True),
        ("ollaya.dev/library/laya:en", "laya:en", "https://ollaya.dev", True),
        ("library/laya:en", "laya:en", "https://ollaya.dev", True),
        ("laya:en", "127.0.0.1:5000/library/laya:en", "https://ollaya.dev", False),
        ("laya:en", "http://127.0.0.1:5000/library/laya:en", "http://127.0.0.1:5000", True),
        ("laya:en", "laya:multilingual", "https://ollaya.dev", False),
        ("laya", "laya:latest", "https://ollaya.dev", True),
    ],
)
async def test_inspect_matches_qualified_names(
    asked: str, reported: str, default_registry: str, found: bool
) -> None:
    seen = {**PS_ENTRY, "name": reported, "model": reported}
    runtime = Runtime(httpx.Response(200, json={"models": [seen]}))
    async with client(runtime, default_registry=default_registry) as rt:
        assert (await rt.inspect(asked) is not None) is found


async def test_inspect_absent_model_is_none() -> None:
    runtime = Runtime(httpx.Response(200, json={"models": []}))
    async with client(runtime) as rt:
        assert await rt.inspect("laya:en") is None


async def test_inspect_normalises_a_prefixed_digest() -> None:
    seen = {**PS_ENTRY, "digest": "sha256:" + DIGEST, "expires_at": "2026-01-01T00:05:00Z"}
    runtime = Runtime(httpx.Response(200, json={"models": [seen]}))
    async with client(runtime) as rt:
        found = await rt.inspect("laya:en")
    assert found is not None
    assert found.digest == DIGEST
    assert found.pinned is False


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (httpx.Response(200, content=b"not json"), "did not answer {'models'"),
        (httpx.Response(200, json={"models": {}}), "did not answer {'models'"),
        (
            httpx.Response(200, json={"models": [{"name": "laya:en"}]}),
            "'laya:en' lacks or mistypes digest, expires_at, device",
        ),
        (httpx.Response(200, json={"models": ["laya:en"]}), "did not answer {'models'"),
        (httpx.Response(503, json={"error": "busy"}), "answered 503"),
    ],
)
async def test_inspect_bad_answers(answer: httpx.Response, fragment: str) -> None:
    async with client(Runtime(answer)) as rt:
        with pytest.raises(ProbeError) as caught:
            await rt.inspect("laya:en")
    assert fragment in str(caught.value)


async def test_a_malformed_entry_of_another_model_does_not_matter() -> None:
    broken = {"name": "nli:latest", "device": 3}
    runtime = Runtime(httpx.Response(200, json={"models": [broken, PS_ENTRY]}))
    async with client(runtime) as rt:
        found = await rt.inspect("laya:en")
        assert found is not None and found.digest == DIGEST
        with pytest.raises(ProbeError, match="'nli:latest' lacks or mistypes"):
            await rt.ps()


async def test_oversized_answers_are_cut() -> None:
    runtime = Runtime(httpx.Response(200, content=b"x" * 2048))
    async with client(runtime, max_body_bytes=1024) as rt:
        with pytest.raises(ProbeError, match="more than 1024 bytes"):
            await rt.ps()


# --- decide ---------------------------------------------------------------------------------

QUESTIONS = {"dept": {"type": "choice", "criteria": ["billing", "tech"]}}
ANSWER = {
    "model": "laya:en",
    "answers": {"dept": {"type": "choice", "choice": "billing", "confidence": 0.84}},
    "usage": {"input_tokens": 9, "output_tokens": 0},
}


async def test_decide_posts_the_case() -> None:
    runtime = Runtime(httpx.Response(200, json=ANSWER))
    async with client(runtime) as rt:
        assert await rt.decide("laya:en", "charged twice", QUESTIONS) == ANSWER
    (request,) = runtime.requests
    assert (request.method, str(request.url)) == ("POST", f"{BASE}/v1/systemone")
    assert json.loads(request.content) == {
        "model": "laya:en",
        "state": "charged twice",
        "questions": QUESTIONS,
    }


async def test_decide_retries_queue_full_after_retry_after() -> None:
    sleeps = Sleeps()
    runtime = Runtime(
        error(503, "QUEUE_FULL", **{"Retry-After": "1"}),
        error(503, "QUEUE_FULL", **{"Retry-After": "2"}),
        error(503, "QUEUE_FULL"),
        error(429, "RATE_LIMITED", **{"Retry-After": "600"}),
        httpx.Response(200, json=ANSWER),
    )
    async with client(runtime, sleep=sleeps, queue_full_attempts=5) as rt:
        assert await rt.decide("laya:en", {"text": "x"}, QUESTIONS) == ANSWER
    # As asked; as asked; absent → the runtime's 1 s; 600 capped at max_retry_after=10.
    assert sleeps.calls == [1.0, 2.0, 1.0, 10.0]
    assert len(runtime.requests) == 5


async def test_decide_queue_full_exhausted() -> None:
    sleeps = Sleeps()
    runtime = Runtime(error(503, "QUEUE_FULL", **{"Retry-After": "1"}))
    async with client(runtime, sleep=sleeps, queue_full_attempts=3) as rt:
        with pytest.raises(QueueFull) as caught:
            await rt.decide("laya:en", "x", QUESTIONS)
    assert len(runtime.requests) == 3
    assert sleeps.calls == [1.0, 1.0]
    assert caught.value.permanent is False
    assert caught.value.reason == "QueueFull"
    assert "3 attempts" in str(caught.value)


@pytest.mark.parametrize("status", [400, 404, 413, 422])
async def test_decide_rejections_are_permanent_and_do_not_echo_content(status: int) -> None:
    runtime = Runtime(error(status, "INVALID_REQUEST", "state 'CONFIDENTIAL-CASE' is a number"))
    async with client(runtime) as rt:
        with pytest.raises(RuntimeRequestRejected) as caught:
            await rt.decide("laya:en", "CONFIDENTIAL-CASE", QUESTIONS)
    assert caught.value.permanent is True
    assert (caught.value.status, caught.value.code) == (status, "INVALID_REQUEST")
    assert "CONFIDENTIAL-CASE" not in str(caught.value)
    assert len(runtime.requests) == 1


@pytest.mark.parametrize(
    "answer",
    [
        error(401, "UNAUTHORIZED"),
        error(500, "INTERNAL"),
        error(503, "LOADING"),
    ],
)
async def test_decide_transient_failures_are_probe_errors(answer: httpx.Response) -> None:
    runtime = Runtime(answer)
    async with client(runtime) as rt:
        with pytest.raises(ProbeError):
            await rt.decide("laya:en", "x", QUESTIONS)
    assert len(runtime.requests) == 1


# --- version, addressing, timeouts ----------------------------------------------------------


async def test_version() -> None:
    async with client(Runtime(httpx.Response(200, json={"version": "0.10.0"}))) as rt:
        assert await rt.version() == "0.10.0"
    async with client(Runtime(httpx.Response(200, json={"v": 1}))) as rt:
        with pytest.raises(ProbeError, match="version"):
            await rt.version()


@pytest.mark.parametrize(
    ("pod_ip", "url"),
    [
        ("10.244.1.7", "http://10.244.1.7:11435"),
        ("fd00::1", "http://[fd00::1]:11435"),
        ("FD00:0::1", "http://[fd00::1]:11435"),
    ],
)
def test_runtime_base_url(pod_ip: str, url: str) -> None:
    assert runtime_base_url(pod_ip) == url


@pytest.mark.parametrize("pod_ip", ["", "pod.example", "10.0.0.1:11435", "http://10.0.0.1"])
def test_runtime_base_url_needs_an_ip(pod_ip: str) -> None:
    with pytest.raises(ValueError):
        runtime_base_url(pod_ip)


async def test_for_pod_targets_the_pod_ip() -> None:
    runtime = Runtime(httpx.Response(200, json={"version": "0.10.0"}))
    rt = RuntimeClient.for_pod("10.244.1.7", transport=httpx.MockTransport(runtime))
    async with rt:
        await rt.version()
    assert str(runtime.requests[0].url) == "http://10.244.1.7:11435/api/version"


async def test_explicit_timeouts_reach_the_request() -> None:
    runtime = Runtime(httpx.Response(200, json={"models": []}))
    timeouts = RuntimeTimeouts(connect=2.0, inspect=7.0)
    async with client(runtime, timeouts=timeouts) as rt:
        await rt.ps()
    assert runtime.requests[0].extensions["timeout"] == {
        "connect": 2.0,
        "read": 7.0,
        "write": 7.0,
        "pool": 7.0,
    }


async def test_queue_full_holds_the_pods_other_requests_until_retry_after() -> None:
    """Back-pressure: evaluation keeps several requests in flight per Pod; while one of them
    waits out a QUEUE_FULL's Retry-After, the others are not sent (they would be refused too)."""
    released = asyncio.Event()
    sleeping: list[float] = []

    async def held_sleep(seconds: float) -> None:
        sleeping.append(seconds)
        await released.wait()

    runtime = Runtime(
        error(503, "QUEUE_FULL", **{"Retry-After": "1"}),
        httpx.Response(200, json=ANSWER),
    )
    async with client(runtime, sleep=held_sleep, queue_full_attempts=3) as rt:  # type: ignore[arg-type]
        first = asyncio.create_task(rt.decide("laya:en", "a", QUESTIONS))
        while not sleeping:
            await asyncio.sleep(0)
        second = asyncio.create_task(rt.decide("laya:en", "b", QUESTIONS))
        for _ in range(100):
            await asyncio.sleep(0)
        assert len(runtime.requests) == 1, "a request was sent during the Retry-After"
        assert not second.done()
        released.set()
        assert await first == ANSWER and await second == ANSWER
    assert sleeping == [1.0]  # one wait, as the runtime asked; the held request added none
    assert len(runtime.requests) == 3

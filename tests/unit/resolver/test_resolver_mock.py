"""Resolver logic against httpx.MockTransport: digest, retries, redirects, body cap, guard.

Time is fake (clock advanced by the injected sleep) and jitter is fixed at 0.5, so every wait
is computed by hand from RetryPolicy: wait(n) = min(max_backoff, 0.5 · 2^(n-1)) · (0.5 + 0.5/2)
= 0.375, 0.75, 1.5, 3.0, 6.0 (then 8.0 · 0.75 = 6.0 at the cap).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import httpx
import pytest

from decisionmodel.engine.names import ModelRef, parse_model_name
from decisionmodel.engine.resolver import (
    MANIFEST_MEDIA_TYPE,
    RegistryResolver,
    ResolvedModel,
    RetryPolicy,
    resolve_sync,
    retry_after_seconds,
)
from decisionmodel.errors import ModelNotFound, RegistryError, RegistryNotAllowed

MANIFEST = b'{"schemaVersion":2}'
# printf '{"schemaVersion":2}' | sha256sum
MANIFEST_DIGEST = "bafebd36189ad3688b7b3915ea55d461e0bfcfbdde11e54b0a123999fb6be50f"
LAYA = parse_model_name("laya:en")
LAYA_URL = "https://ollaya.dev/v2/library/laya/manifests/en"
NOW = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)

Handler = Callable[[httpx.Request], httpx.Response]


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Registry:
    """Answers requests from a script, one response per call (the last one repeats)."""

    def __init__(self, *responses: httpx.Response | Exception | Handler) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        index = min(len(self.requests), len(self.responses)) - 1
        answer = self.responses[index]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return answer(request)


def make_resolver(
    registry: Registry,
    fake: FakeTime,
    *,
    policy: RetryPolicy | None = None,
    allowed: tuple[str, ...] = ("ollaya.dev", "127.0.0.1:5000"),
    durations: list[float] | None = None,
    **options: object,
) -> RegistryResolver:
    return RegistryResolver(
        allowed_registries=allowed,
        allow_insecure=True,
        retry=policy,
        transport=httpx.MockTransport(registry),
        sleep=fake.sleep,
        rng=lambda: 0.5,
        clock=fake.clock,
        now=lambda: NOW,
        on_duration=durations.append if durations is not None else None,
        **options,  # type: ignore[arg-type]
    )


async def resolve(registry: Registry, ref: ModelRef = LAYA, **kwargs: object) -> ResolvedModel:
    fake = kwargs.pop("fake", None) or FakeTime()
    assert isinstance(fake, FakeTime)
    async with make_resolver(registry, fake, **kwargs) as resolver:  # type: ignore[arg-type]
        return await resolver.resolve(ref)


async def test_digest_is_sha256_of_the_manifest_bytes() -> None:
    registry = Registry(httpx.Response(200, content=MANIFEST))
    resolved = await resolve(registry)
    assert resolved == ResolvedModel(
        digest=MANIFEST_DIGEST,
        manifest_bytes_len=19,
        canonical="ollaya.dev/library/laya:en",
        url=LAYA_URL,
    )
    (request,) = registry.requests
    assert request.method == "GET"
    assert str(request.url) == LAYA_URL
    assert request.headers["Accept"] == MANIFEST_MEDIA_TYPE
    assert "Authorization" not in request.headers


async def test_digest_is_over_exact_bytes_not_reserialised_json() -> None:
    body = b'{ "schemaVersion" : 2,\n  "layers": [] }\n'
    resolved = await resolve(Registry(httpx.Response(200, content=body)))
    assert resolved.digest == hashlib.sha256(body).hexdigest()
    assert resolved.manifest_bytes_len == len(body)


async def test_digest_is_over_decoded_bytes_when_gzip_encoded() -> None:
    registry = Registry(
        httpx.Response(200, content=gzip.compress(MANIFEST), headers={"Content-Encoding": "gzip"})
    )
    assert (await resolve(registry)).digest == MANIFEST_DIGEST


async def test_not_found_is_permanent_and_not_retried() -> None:
    registry = Registry(httpx.Response(404, json={"errors": [{"code": "MANIFEST_UNKNOWN"}]}))
    with pytest.raises(ModelNotFound) as caught:
        await resolve(registry)
    assert caught.value.permanent is True
    assert "ollaya.dev/library/laya:en" in str(caught.value)
    assert len(registry.requests) == 1


async def test_5xx_and_429_are_retried_with_backoff_and_jitter() -> None:
    fake = FakeTime()
    durations: list[float] = []
    registry = Registry(
        httpx.Response(500),
        httpx.Response(503),
        httpx.Response(429),
        httpx.Response(200, content=MANIFEST),
    )
    resolved = await resolve(registry, fake=fake, durations=durations)
    assert resolved.digest == MANIFEST_DIGEST
    assert len(registry.requests) == 4
    assert fake.sleeps == [0.375, 0.75, 1.5]
    assert durations == [pytest.approx(2.625)]


async def test_backoff_is_capped() -> None:
    fake = FakeTime()
    policy = RetryPolicy(max_attempts=7, total_timeout=1000.0)
    registry = Registry(*[httpx.Response(502)] * 6, httpx.Response(200, content=MANIFEST))
    await resolve(registry, fake=fake, policy=policy)
    # 0.5·2^(n-1) capped at 8, times 0.75.
    assert fake.sleeps == [0.375, 0.75, 1.5, 3.0, 6.0, 6.0]


def test_jitter_spans_half_to_full_backoff() -> None:
    policy = RetryPolicy()
    assert policy.backoff(3, 0.0) == 1.0
    assert policy.backoff(3, 0.999) == pytest.approx(1.999)


async def test_transport_errors_are_retried() -> None:
    fake = FakeTime()
    registry = Registry(
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("read timed out"),
        httpx.Response(200, content=MANIFEST),
    )
    assert (await resolve(registry, fake=fake)).digest == MANIFEST_DIGEST
    assert fake.sleeps == [0.375, 0.75]


async def test_retry_after_seconds_is_honoured_and_capped() -> None:
    fake = FakeTime()
    registry = Registry(
        httpx.Response(429, headers={"Retry-After": "7"}),
        httpx.Response(503, headers={"Retry-After": "3600"}),
        httpx.Response(503, headers={"Retry-After": "soon"}),
        httpx.Response(200, content=MANIFEST),
    )
    policy = RetryPolicy(total_timeout=1000.0)
    await resolve(registry, fake=fake, policy=policy)
    # 7 as asked; 3600 capped at max_retry_after=30; unparsable → the backoff of failure 3.
    assert fake.sleeps == [7.0, 30.0, 1.5]


async def test_retry_after_http_date_is_honoured() -> None:
    fake = FakeTime()
    registry = Registry(
        httpx.Response(503, headers={"Retry-After": "Thu, 01 Jan 2026 00:00:12 GMT"}),
        httpx.Response(200, content=MANIFEST),
    )
    await resolve(registry, fake=fake)
    assert fake.sleeps == [12.0]


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("0", 0.0),
        (" 5 ", 5.0),
        ("Thu, 01 Jan 2026 00:01:00 GMT", 60.0),
        ("Wed, 31 Dec 2025 23:59:00 GMT", 0.0),
        ("-3", None),
        ("1.5", None),
        ("tomorrow", None),
    ],
)
def test_retry_after_parsing(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header, NOW) == seconds


async def test_gives_up_after_max_attempts() -> None:
    fake = FakeTime()
    durations: list[float] = []
    registry = Registry(httpx.Response(503))
    policy = RetryPolicy(max_attempts=3)
    with pytest.raises(RegistryError) as caught:
        await resolve(registry, fake=fake, policy=policy, durations=durations)
    assert len(registry.requests) == 3
    assert fake.sleeps == [0.375, 0.75]
    assert caught.value.permanent is False
    assert "3 attempts" in str(caught.value)
    assert "503" in str(caught.value)
    assert durations == [pytest.approx(1.125)]


async def test_gives_up_when_the_next_wait_passes_the_total_budget() -> None:
    fake = FakeTime()
    registry = Registry(httpx.Response(500))
    # After failure 1 the wait 0.375 fits in 1.0 s; after failure 2, 0.375 + 0.75 > 1.0.
    policy = RetryPolicy(max_attempts=10, total_timeout=1.0)
    with pytest.raises(RegistryError, match="1 s resolve budget"):
        await resolve(registry, fake=fake, policy=policy)
    assert len(registry.requests) == 2
    assert fake.sleeps == [0.375]


async def test_a_hanging_request_is_cut_at_the_total_budget() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, content=MANIFEST)

    resolver = RegistryResolver(
        transport=httpx.MockTransport(hang),
        retry=RetryPolicy(total_timeout=0.2),
    )
    async with resolver:
        with pytest.raises(RegistryError, match=r"no answer .* within the 0\.2 s"):
            await resolver.resolve(LAYA)


@pytest.mark.parametrize("status", [400, 401, 403, 405, 410])
async def test_other_4xx_is_a_registry_error_without_retry(status: int) -> None:
    registry = Registry(httpx.Response(status))
    with pytest.raises(RegistryError) as caught:
        await resolve(registry)
    assert caught.value.status == status
    assert f"unexpected status {status}" in str(caught.value)
    assert len(registry.requests) == 1


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"<html>not json</html>", "valid JSON"),
        (b"\xff\xfe", "valid JSON"),
        # Issue 12: a ValueError (int digit limit) and a RecursionError escaped untyped.
        (b'{"schemaVersion":' + b"9" * 5000 + b"}", "valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "valid JSON"),
        (b'{"schemaVersion":1}', "schemaVersion 1"),
        (b'{"schemaVersion":"2"}', "schemaVersion '2'"),
        (b'{"schemaVersion":true}', "schemaVersion True"),
        (b'{"schemaVersion":2.0}', "schemaVersion 2.0"),
        (b"[2]", "schemaVersion None"),
        (b"{}", "schemaVersion None"),
    ],
)
async def test_bad_manifests_are_registry_errors(body: bytes, fragment: str) -> None:
    registry = Registry(httpx.Response(200, content=body))
    with pytest.raises(RegistryError) as caught:
        await resolve(registry)
    assert fragment in str(caught.value)
    assert len(registry.requests) == 1


async def test_body_at_the_cap_is_accepted_and_past_it_refused() -> None:
    at_cap = b'{"schemaVersion":2,"pad":"' + b"x" * 72 + b'"}'
    assert len(at_cap) == 100
    resolved = await resolve(Registry(httpx.Response(200, content=at_cap)), max_body_bytes=100)
    assert resolved.manifest_bytes_len == 100

    over = at_cap[:-2] + b'x"}'
    with pytest.raises(RegistryError, match="larger than 100 bytes"):
        await resolve(Registry(httpx.Response(200, content=over)), max_body_bytes=100)


async def test_endless_streamed_body_is_cut_without_reading_it_all() -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        while True:
            sent.append(1)
            yield b"x" * 1024

    # An async stream has no Content-Length: only the streaming cap can stop it.
    registry = Registry(lambda request: httpx.Response(200, content=endless()))
    with pytest.raises(RegistryError, match="larger than 4096 bytes"):
        await resolve(registry, max_body_bytes=4096)
    assert len(sent) == 5


async def test_declared_oversize_body_is_refused_from_content_length() -> None:
    registry = Registry(httpx.Response(200, content=b"{}", headers={"Content-Length": "999999"}))
    with pytest.raises(RegistryError, match="larger than 1000 bytes"):
        await resolve(registry, max_body_bytes=1000)


async def test_same_origin_redirects_are_followed() -> None:
    registry = Registry(
        httpx.Response(307, headers={"Location": "/v2/library/laya/manifests/en-2026"}),
        httpx.Response(
            301, headers={"Location": "https://OLLAYA.dev:443/v2/library/laya/manifests/final"}
        ),
        httpx.Response(200, content=MANIFEST),
    )
    resolved = await resolve(registry)
    assert resolved.digest == MANIFEST_DIGEST
    assert [str(r.url) for r in registry.requests] == [
        LAYA_URL,
        "https://ollaya.dev/v2/library/laya/manifests/en-2026",
        # httpx drops the scheme's default port from the URL.
        "https://ollaya.dev/v2/library/laya/manifests/final",
    ]


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("https://evil.example/v2/x", "https://evil.example"),
        ("http://ollaya.dev/v2/library/laya/manifests/en", "http://ollaya.dev"),
        ("https://ollaya.dev:8443/v2/library/laya/manifests/en", "https://ollaya.dev:8443"),
        ("//cdn.example/v2/x", "https://cdn.example"),
    ],
)
async def test_cross_origin_redirects_are_refused(location: str, target: str) -> None:
    registry = Registry(httpx.Response(302, headers={"Location": location}))
    with pytest.raises(RegistryError) as caught:
        await resolve(registry)
    assert f"to {target} " in str(caught.value)
    # Refused before any request to the target.
    assert len(registry.requests) == 1


async def test_redirect_loops_and_missing_locations_are_errors() -> None:
    loop = Registry(httpx.Response(302, headers={"Location": LAYA_URL}))
    with pytest.raises(RegistryError, match="more than 5 redirects"):
        await resolve(loop)
    assert len(loop.requests) == 6

    blank = Registry(httpx.Response(302))
    with pytest.raises(RegistryError, match="without a Location"):
        await resolve(blank)


async def test_guard_runs_before_any_request() -> None:
    registry = Registry(httpx.Response(200, content=MANIFEST))
    durations: list[float] = []
    with pytest.raises(RegistryNotAllowed):
        await resolve(registry, parse_model_name("evil.example/laya:en"), durations=durations)
    resolver = RegistryResolver(
        allowed_registries=("127.0.0.1:5000",),
        allow_insecure=False,
        transport=httpx.MockTransport(registry),
    )
    async with resolver:
        with pytest.raises(RegistryNotAllowed, match="allow-insecure-registries"):
            await resolver.resolve(parse_model_name("http://127.0.0.1:5000/library/laya:en"))
    assert registry.requests == []
    assert durations == []


async def test_http_registry_when_insecure_is_allowed() -> None:
    registry = Registry(httpx.Response(200, content=MANIFEST))
    ref = parse_model_name("laya:en", default_registry="http://127.0.0.1:5000")
    resolved = await resolve(registry, ref)
    assert resolved.url == "http://127.0.0.1:5000/v2/library/laya/manifests/en"
    assert resolved.canonical == "http://127.0.0.1:5000/library/laya:en"


def test_resolve_sync_runs_the_guard_first() -> None:
    with pytest.raises(RegistryNotAllowed):
        resolve_sync(parse_model_name("evil.example/laya:en"), allowed_registries=["ollaya.dev"])

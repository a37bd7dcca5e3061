"""The resolver against the real registry simulator on loopback (run inside the test netns)."""

from __future__ import annotations

import hashlib

import httpx
import pytest
from aiohttp import web
from registry_harness import RegistrySim, serve

from decisionmodel.engine.names import parse_model_name
from decisionmodel.engine.resolver import MANIFEST_MEDIA_TYPE, RegistryResolver, RetryPolicy
from decisionmodel.errors import ModelNotFound, RegistryError


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def resolver_for(registry: RegistrySim, fake: FakeTime, **options: object) -> RegistryResolver:
    return RegistryResolver(
        allowed_registries=[registry.authority],
        allow_insecure=True,
        sleep=fake.sleep,
        clock=fake.clock,
        rng=lambda: 0.5,
        **options,  # type: ignore[arg-type]
    )


async def served_bytes(registry: RegistrySim, path: str) -> bytes:
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.get(f"{registry.base}{path}")
    response.raise_for_status()
    return response.content


async def test_digest_is_sha256_of_the_served_manifest(registry: RegistrySim) -> None:
    ref = parse_model_name("laya:en", default_registry=registry.base)
    durations: list[float] = []
    async with resolver_for(registry, FakeTime(), on_duration=durations.append) as resolver:
        resolved = await resolver.resolve(ref)
    served = await served_bytes(registry, "/v2/library/laya/manifests/en")
    assert resolved.digest == hashlib.sha256(served).hexdigest()
    assert resolved.digest == registry.state.entries["library/laya:en"].digest
    assert resolved.manifest_bytes_len == len(served)
    assert resolved.canonical == f"http://{registry.authority}/library/laya:en"
    assert durations == [0.0]  # fake clock, no retry
    first = registry.state.requests[0]
    assert first["path"] == "/v2/library/laya/manifests/en"
    assert first["headers"]["Accept"] == MANIFEST_MEDIA_TYPE
    assert first["authorization"] is False


async def test_a_model_added_through_the_admin_api(registry: RegistrySim) -> None:
    added = await registry.admin("PUT", "/_sim/models/acme/triage/v3", {"accuracy": 0.7})
    ref = parse_model_name(f"http://{registry.authority}/acme/triage:v3")
    async with resolver_for(registry, FakeTime()) as resolver:
        resolved = await resolver.resolve(ref)
    assert resolved.digest == added.json()["digest"]


async def test_missing_tag_is_model_not_found(registry: RegistrySim) -> None:
    ref = parse_model_name("laya:does-not-exist", default_registry=registry.base)
    async with resolver_for(registry, FakeTime()) as resolver:
        with pytest.raises(ModelNotFound):
            await resolver.resolve(ref)
    assert len(registry.state.requests) == 1


async def test_429_with_retry_after_is_recovered(registry: RegistrySim) -> None:
    await registry.admin(
        "PUT", "/_sim/faults/library/laya/en", {"status": 429, "count": 2, "retry_after": 1}
    )
    fake = FakeTime()
    ref = parse_model_name("laya:en", default_registry=registry.base)
    async with resolver_for(registry, fake) as resolver:
        resolved = await resolver.resolve(ref)
    assert resolved.digest == registry.state.entries["library/laya:en"].digest
    assert fake.sleeps == [1.0, 1.0]
    assert len(registry.state.requests) == 3


async def test_5xx_burst_is_recovered_with_backoff(registry: RegistrySim) -> None:
    await registry.admin("PUT", "/_sim/faults", {"status": 503, "count": 3})
    fake = FakeTime()
    ref = parse_model_name("laya:en", default_registry=registry.base)
    async with resolver_for(registry, fake) as resolver:
        await resolver.resolve(ref)
    # 0.5 · 2^(n-1) · (0.5 + 0.5/2) for n = 1, 2, 3.
    assert fake.sleeps == [0.375, 0.75, 1.5]


async def test_a_registry_that_stays_down_is_a_registry_error(registry: RegistrySim) -> None:
    await registry.admin("PUT", "/_sim/faults", {"status": 502})
    ref = parse_model_name("laya:en", default_registry=registry.base)
    async with resolver_for(registry, FakeTime(), retry=RetryPolicy(max_attempts=4)) as resolver:
        with pytest.raises(RegistryError, match="4 attempts") as caught:
            await resolver.resolve(ref)
    assert caught.value.permanent is False
    assert len(registry.state.requests) == 4


async def test_garbage_manifest_is_a_registry_error(registry: RegistrySim) -> None:
    await registry.admin("PUT", "/_sim/faults", {"status": 200, "body": "not json"})
    ref = parse_model_name("laya:en", default_registry=registry.base)
    async with resolver_for(registry, FakeTime()) as resolver:
        with pytest.raises(RegistryError, match="valid JSON"):
            await resolver.resolve(ref)


async def test_tag_moved_gives_a_new_digest(registry: RegistrySim) -> None:
    await registry.admin("PUT", "/_sim/faults/library/laya/en", {"tag_moved": True})
    ref = parse_model_name("laya:en", default_registry=registry.base)
    async with resolver_for(registry, FakeTime()) as resolver:
        before = await resolver.resolve(ref)
        after = await resolver.resolve(ref)
    assert before.digest == registry.state.entries["library/laya:en"].digest
    assert after.digest != before.digest
    moved = await served_bytes(registry, "/v2/library/laya/manifests/en")
    assert after.digest == hashlib.sha256(moved).hexdigest()


async def test_registry_client_goes_through_the_env_proxy(
    registry: RegistrySim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTTP proxy on loopback forwards to the simulator. The model's host is under .invalid,
    which never resolves (RFC 6761), so the resolve can only succeed through the proxy."""
    seen: list[tuple[str, str]] = []

    async def forward(request: web.Request) -> web.Response:
        seen.append((request.headers["Host"], request.path_qs))
        async with httpx.AsyncClient(trust_env=False) as client:
            upstream = await client.get(f"{registry.base}{request.path_qs}")
        return web.Response(status=upstream.status_code, body=upstream.content)

    proxy = web.Application()
    proxy.router.add_route("GET", "/{tail:.*}", forward)
    runner, port = await serve(proxy)
    try:
        for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        ref = parse_model_name("http://registry.invalid:5000/library/laya:en")
        resolver = RegistryResolver(
            allowed_registries=["registry.invalid:5000"], allow_insecure=True
        )
        async with resolver:
            resolved = await resolver.resolve(ref)
    finally:
        await runner.cleanup()
    assert seen == [("registry.invalid:5000", "/v2/library/laya/manifests/en")]
    assert resolved.digest == registry.state.entries["library/laya:en"].digest

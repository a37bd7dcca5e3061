"""Each form of a model name resolves from the registry it names, in the scheme it names, and a
registry that cannot be reached is RegistryUnavailable with the registry and the fix in its
message (issue 11, point 12). Against the registry simulator on loopback (test netns)."""

from __future__ import annotations

import pytest
from registry_harness import RegistrySim

from decisionmodel.engine.names import parse_model_name
from decisionmodel.engine.resolver import RegistryResolver, RetryPolicy
from decisionmodel.errors import RegistryError, RegistryUnavailable
from decisionmodel.vocabulary import Reason


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def resolver_for(registry: RegistrySim, *, allow_insecure: bool = True) -> RegistryResolver:
    fake = FakeTime()
    return RegistryResolver(
        allowed_registries=[registry.authority],
        allow_insecure=allow_insecure,
        retry=RetryPolicy(max_attempts=2),
        sleep=fake.sleep,
        clock=fake.clock,
        rng=lambda: 0.5,
    )


@pytest.mark.parametrize(
    "spelling",
    ["laya:en", "library/laya:en", "http://{host}/library/laya:en", "HTTP://{host}/laya:en"],
)
async def test_the_plain_http_forms_resolve_the_same_digest(
    registry: RegistrySim, spelling: str
) -> None:
    # Host-less against an http --ollaya-registry, or the host with http:// in the name.
    ref = parse_model_name(spelling.format(host=registry.authority), default_registry=registry.base)
    async with resolver_for(registry) as resolver:
        resolved = await resolver.resolve(ref)
    assert resolved.digest == registry.state.entries["library/laya:en"].digest
    assert resolved.url == f"{registry.base}/v2/library/laya/manifests/en"


@pytest.mark.parametrize("allow_insecure", [True, False])
async def test_a_host_without_a_scheme_is_https_and_the_message_says_how_to_name_http(
    registry: RegistrySim, allow_insecure: bool
) -> None:
    name = f"{registry.authority}/library/laya:en"
    # Even with the same host configured as the http default registry: a host is https.
    ref = parse_model_name(name, default_registry=registry.base)
    assert ref.registry_base == f"https://{registry.authority}"
    async with resolver_for(registry, allow_insecure=allow_insecure) as resolver:
        with pytest.raises(RegistryUnavailable) as caught:
            await resolver.resolve(ref)
    error = caught.value
    assert error.reason == Reason.REGISTRY_UNAVAILABLE and error.permanent is False
    assert isinstance(error, RegistryError)  # handled as one class with the other failures
    message = str(error)
    assert f"registry https://{registry.authority} unavailable" in message
    assert "gave up after 2 attempts" in message
    assert f"name it http://{registry.authority}/library/laya:en in spec.model" in message
    assert ("--allow-insecure-registries" in message) is not allow_insecure
    # TLS never got as far as an HTTP request.
    assert registry.state.requests == []


async def test_a_registry_answering_503_is_unavailable_and_named(registry: RegistrySim) -> None:
    await registry.admin("PUT", "/_sim/faults/library/laya/en", {"status": 503})
    ref = parse_model_name(f"http://{registry.authority}/library/laya:en")
    async with resolver_for(registry) as resolver:
        with pytest.raises(RegistryUnavailable) as caught:
            await resolver.resolve(ref)
    message = str(caught.value)
    assert f"registry {registry.base} unavailable" in message and "503" in message
    assert f"check that {registry.base} is up and reachable" in message
    # An http registry needs no advice about schemes.
    assert "means https" not in message


async def test_a_registry_that_answers_wrongly_stays_a_registry_error(
    registry: RegistrySim,
) -> None:
    await registry.admin("PUT", "/_sim/faults/library/laya/en", {"status": 403})
    ref = parse_model_name("laya:en", default_registry=registry.base)
    async with resolver_for(registry) as resolver:
        with pytest.raises(RegistryError) as caught:
            await resolver.resolve(ref)
    assert type(caught.value) is RegistryError
    assert caught.value.reason == Reason.REGISTRY_ERROR

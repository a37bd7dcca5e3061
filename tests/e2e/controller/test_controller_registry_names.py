"""Every form of a host-qualified model name means one registry and scheme for dmrollout and the
runtime, and a registry that cannot be reached shows on Resolved at once (issue 11, point 12).

The controller runs with ``--allowed-registries 127.0.0.1:5000 --allow-insecure-registries
--ollaya-registry http://127.0.0.1:5000`` (tests/rollout_harness.py); the registry simulator
serves plain HTTP on 127.0.0.1:5000. RUNTIME_API.md: a host may carry ``http://``; a host
without a scheme is https, whatever the default registry is.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from harness.helpers import eventually
from harness.rollout_harness import REGISTRY_HOST, REGISTRY_URL, RolloutHarness, put_model

# Far below the resolve step's 5 min window: a failed attempt takes the resolver's own budget
# (five tries, about 8 s), then Temporal retries at most 30 s apart.
SHOWN_WITHIN = 60
AFTER_FIX = 90


def warning_reasons(h: RolloutHarness) -> list[str]:
    events = json.loads(h.kubectl("get", "events", "-o", "json"))["items"]
    return [e.get("reason", "") for e in events if e.get("type") == "Warning"]


@pytest.fixture
def model() -> tuple[str, str]:
    """A model of its own in the registry: (repo, digest)."""
    repo = f"names-{uuid.uuid4().hex[:8]}"
    return repo, put_model(repo, "v1", revision=repo)


async def ready_with(h: RolloutHarness, name: str, model: str, digest: str) -> None:
    await eventually(lambda: h.status(name).get("phase") == "Ready", AFTER_FIX, what="Ready")
    stable = h.status(name)["stableRevision"]
    assert (stable["model"], stable["digest"]) == (model, digest)
    assert h.condition(name, "Resolved")["status"] == "True"


async def test_a_host_with_http_resolves_prefetches_and_becomes_ready(
    ctl: RolloutHarness, model: tuple[str, str]
) -> None:
    repo, digest = model
    name = f"{REGISTRY_URL}/library/{repo}:v1"  # http://127.0.0.1:5000/library/<repo>:v1
    ctl.create_dm("schemed", {"model": name})
    await ready_with(ctl, "schemed", name, digest)
    # The runtime loaded it under the name as written (it refused it with 400 before).
    assert "RuntimeRequestRejected" not in warning_reasons(ctl)


async def test_a_host_without_a_scheme_is_https_and_says_how_to_name_http(
    ctl: RolloutHarness, model: tuple[str, str]
) -> None:
    repo, digest = model
    https_name = f"{REGISTRY_HOST}/library/{repo}:v1"  # 127.0.0.1:5000/library/<repo>:v1
    ctl.create_dm("bare-host", {"model": https_name})
    shown = await eventually(
        lambda: ctl.held("bare-host", "Resolved", "RegistryUnavailable"),
        SHOWN_WITHIN,
        what="Resolved=False RegistryUnavailable",
    )
    message = shown["message"]
    assert f"registry https://{REGISTRY_HOST} unavailable" in message
    http_name = f"{REGISTRY_URL}/library/{repo}:v1"
    assert f"name it {http_name} in spec.model" in message
    assert ctl.status("bare-host")["phase"] == "Resolving"
    assert "RegistryUnavailable" in warning_reasons(ctl)
    # The fix the message names: write the scheme. The rollout goes on with the new spec.
    ctl.update_spec("bare-host", {"model": http_name})
    await ready_with(ctl, "bare-host", http_name, digest)


@pytest.fixture
def outage(model: tuple[str, str]) -> Iterator[str]:
    """The model's manifest answers 503 until the test clears it (or the test ends)."""
    repo, _ = model
    fault = f"{REGISTRY_URL}/_sim/faults/library/{repo}/v1"
    with httpx.Client(trust_env=False) as c:
        c.put(fault, json={"status": 503}).raise_for_status()
    try:
        yield fault
    finally:
        with httpx.Client(trust_env=False) as c:
            c.delete(fault)


async def test_a_registry_answering_503_shows_registry_unavailable_then_goes_on(
    ctl: RolloutHarness, model: tuple[str, str], outage: str
) -> None:
    repo, digest = model
    ctl.create_dm("outage", {"model": f"{repo}:v1"})  # host-less: --ollaya-registry
    shown = await eventually(
        lambda: ctl.held("outage", "Resolved", "RegistryUnavailable"),
        SHOWN_WITHIN,
        what="Resolved=False RegistryUnavailable",
    )
    message = shown["message"]
    assert f"registry {REGISTRY_URL} unavailable" in message and "503" in message
    assert f"check that {REGISTRY_URL} is up and reachable" in message
    assert ctl.status("outage")["phase"] == "Resolving"
    with httpx.Client(trust_env=False) as c:
        c.delete(outage).raise_for_status()
    await ready_with(ctl, "outage", f"{repo}:v1", digest)

"""Activity inputs → renderer params (decisionmodel.rollout.render_params): images, registry
choice, proxies. Pure.

Moved from tests/integration/test_activities_objects.py, where the cluster marker kept it out
of ``make unit``; what it asserts is unchanged. The settings are those of the integration
fixture without the local cluster's kubeconfig, which params never reads.
"""

from __future__ import annotations

import uuid

import pytest

from decisionmodel.engine.render import render_prefetch_job
from decisionmodel.errors import ImageOverrideNotAllowed
from decisionmodel.rollout.contracts import (
    CachePolicy,
    DMRef,
    KeyRef,
    RevisionObjectsInput,
    RevisionRecord,
    RevisionSpec,
)
from decisionmodel.rollout.render_params import (
    prefetch_image,
    prefetch_params,
    registry_url,
    serving_image,
    serving_params,
)
from decisionmodel.rollout.settings import RolloutSettings

REGISTRY = "http://127.0.0.1:5000"


@pytest.fixture
def settings() -> RolloutSettings:
    return RolloutSettings(
        ollaya_registry=REGISTRY,
        allowed_registries=["127.0.0.1:5000"],
        allow_insecure_registries=True,
        poll_interval_seconds=0.2,
    )


def _rev() -> str:
    return uuid.uuid4().hex[:16]


def objects_input(
    dm: DMRef,
    digest: str,
    *,
    model: str = "laya:en",
    pinned: bool = False,
    replicas: int = 1,
    api_key: KeyRef | None = None,
    revision: str | None = None,
) -> RevisionObjectsInput:
    """The same input the integration tests build (a copy: no import from an integration
    module)."""
    rev = revision or _rev()
    return RevisionObjectsInput(
        dm=dm,
        record=RevisionRecord(hash=rev, model=model, digest=digest),
        revision=RevisionSpec(model=model, digest=digest if pinned else None, digest_pinned=pinned),
        replicas=replicas,
        cache=CachePolicy(size="1Gi"),
        api_key=api_key,
        caching_timeout_seconds=120,
    )


def test_params_image_and_registry_choice(settings: RolloutSettings) -> None:
    dm = DMRef(namespace="ns", name="router", uid="u")
    cuda = RevisionSpec(model="laya:en", device="cuda", runtime_version="0.11.2")
    assert serving_image(cuda, settings) == "ghcr.io/ollaya-dev/ollaya:0.11.2-cuda"
    assert prefetch_image(cuda, settings) == "ghcr.io/ollaya-dev/ollaya:0.11.2"
    custom = RevisionSpec(model="laya:en", image="registry.corp/ollaya:patched")
    with pytest.raises(ImageOverrideNotAllowed):
        serving_image(custom, settings)
    allowed = settings.model_copy(update={"allow_image_override": True})
    assert serving_image(custom, allowed) == prefetch_image(custom, allowed)
    assert serving_image(custom, allowed) == "registry.corp/ollaya:patched"

    # OLLAYA_REGISTRY only for host-less names; a named host pulls from itself.
    assert registry_url("acme/triage:v3", settings) == REGISTRY
    assert registry_url("mirror.corp:8080/acme/triage:v3", settings) is None
    assert registry_url("localhost/triage:v3", settings) is None
    inp = objects_input(dm, "c" * 64, model="registry.example.com/acme/triage:v3")
    job_params = prefetch_params(inp, settings)
    assert job_params.registry_url is None
    assert job_params.store_manifest_path == "manifests/registry.example.com/acme/triage/v3"
    assert serving_params(inp, settings).registry_url is None
    # Credentialed proxies never reach a Job (the renderer filters); no_proxy always does.
    proxied = settings.model_copy(
        update={"https_proxy": "http://user:pw@proxy:3128", "no_proxy": ".svc"}
    )
    job = render_prefetch_job(prefetch_params(objects_input(dm, "c" * 64), proxied))
    names = {e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert {"NO_PROXY", "no_proxy"} <= names
    assert not {"HTTPS_PROXY", "https_proxy"} & names

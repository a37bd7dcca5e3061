"""The resolve activity's pure parts: record_for's revision identity, the permanent guards
(refused before anything leaves the process) and a pinned digest taken as given.

Moved from tests/integration/test_activities_pods.py, where the cluster marker kept them out
of ``make unit``; what they assert is unchanged. The activity runs in Temporal's in-process
ActivityEnvironment (no server). The registry-backed refusals (ModelNotFound, RegistryError)
stay in the integration file, next to the registry simulator they need.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from harness.helpers import spec_hash
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.resolve import ResolveActivities, record_for
from decisionmodel.api import DecisionModelSpec
from decisionmodel.rollout.contracts import DMRef, ResolveInput, ResolveResult, RevisionSpec
from decisionmodel.rollout.settings import RolloutSettings

REGISTRY = "http://127.0.0.1:5000"
RUN = uuid.uuid4().hex[:6]

# The integration file's settings: a host-less name resolves against REGISTRY.
SETTINGS = RolloutSettings(
    allowed_registries=["127.0.0.1:5000"],
    allow_insecure_registries=True,
    ollaya_registry=REGISTRY,
    poll_interval_seconds=0.2,
)


async def _run(env: ActivityEnvironment, fn: Any, inp: Any) -> Any:
    return await env.run(fn, inp)


def _app_error(excinfo: pytest.ExceptionInfo[BaseException]) -> ApplicationError:
    err = excinfo.value
    assert isinstance(err, ApplicationError), repr(err)
    return err


def test_record_for_known_hashes_match_the_spec_construction() -> None:
    # Known answers of tests/unit/api/test_api_revision.py: the record the activity computes
    # hashes exactly as the spec's own identity does (helpers.spec_hash).
    digest = "c305bd41e2f5f0b4d1b2dcb5f9a1e3c7a4d6e8f0b2c4d6e8f0a2c4e6a8b0c2d4"
    resources = {"requests": {"memory": "3500Mi", "cpu": "1"}, "limits": {"memory": "4Gi"}}
    scheduling = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"gpu": "t4"},
    }
    plain = record_for(RevisionSpec(model="laya:en", resources=resources), digest)
    assert plain.hash == "6330705458964183"
    placed = record_for(
        RevisionSpec(model="laya:en", resources=resources, scheduling=scheduling), digest
    )
    assert placed.hash == "6c1735de78ff390b"
    assert placed.placement == "a8ff5af475"
    spec = DecisionModelSpec.model_validate(
        {"model": "laya:en", "resources": resources, "scheduling": scheduling}
    )
    assert placed.hash == spec_hash(spec, digest, placed.image or "")
    # Not identity: replicas/cache/auth are not RevisionSpec fields at all; the image is.
    cuda = record_for(RevisionSpec(model="laya:en", device="cuda", resources=resources), digest)
    assert cuda.image == "ghcr.io/ollaya-dev/ollaya:0.10.0-cuda"
    assert cuda.hash != plain.hash
    pinned_runtime = record_for(
        RevisionSpec(model="laya:en", resources=resources, runtime_version="0.11.0"), digest
    )
    assert pinned_runtime.image == "ghcr.io/ollaya-dev/ollaya:0.11.0"
    assert pinned_runtime.hash != plain.hash


async def test_resolve_pinned_digest_does_not_ask_the_registry() -> None:
    # The tag does not exist: any registry request would end in an error (ModelNotFound from
    # a registry, a connection error without one), never in this result.
    pinned = "ab" * 32
    acts = ResolveActivities(SETTINGS)
    inp = ResolveInput(
        dm=DMRef(namespace="n", name="triage", uid="u"),
        revision=RevisionSpec(model=f"laya:absent-{RUN}", digest=pinned, digest_pinned=True),
    )
    result: ResolveResult = await _run(ActivityEnvironment(), acts.resolve, inp)
    assert result.resolved_from_registry is False
    assert result.record.digest == pinned


@pytest.mark.parametrize(
    ("model", "changes", "settings", "reason", "permanent"),
    [
        ("laya", {}, SETTINGS, "InvalidModelName", True),
        ("registry.evil.example/acme/x:v1", {}, SETTINGS, "RegistryNotAllowed", True),
        (
            "laya:en",
            {},
            SETTINGS.model_copy(update={"allow_insecure_registries": False}),
            "RegistryNotAllowed",
            True,
        ),
        ("laya:en", {"image": "example.com/mine:1"}, SETTINGS, "ImageOverrideNotAllowed", True),
    ],
    ids=["no-tag", "not-allowed", "insecure", "image-override"],
)
async def test_resolve_guard_refusals_are_typed(
    model: str,
    changes: dict[str, Any],
    settings: RolloutSettings,
    reason: str,
    permanent: bool,
) -> None:
    acts = ResolveActivities(settings)
    inp = ResolveInput(
        dm=DMRef(namespace="n", name="triage", uid="u"),
        revision=RevisionSpec(model=model, **changes),
    )
    with pytest.raises(ApplicationError) as excinfo:
        await _run(ActivityEnvironment(), acts.resolve, inp)
    err = _app_error(excinfo)
    assert err.type == reason, err
    assert err.non_retryable is permanent

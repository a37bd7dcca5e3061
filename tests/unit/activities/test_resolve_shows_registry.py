"""A registry that cannot be reached, or answers wrongly, holds resolve visibly: each failed
attempt shows Resolved=False with the reason and the fix, then Temporal retries (issue 11,
point 12). The activity runs in Temporal's ActivityEnvironment; the registry is an httpx mock
and the status writer is recorded instead of applied."""

from __future__ import annotations

from typing import Any, cast

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import typed_errors
from activities.resolve import ResolveActivities
from decisionmodel.engine.resolver import RegistryResolver, RetryPolicy
from decisionmodel.rollout.contracts import DMRef, ResolveInput, RevisionSpec
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import ConditionType, Reason
from kube.client import Kube

DM = DMRef(namespace="n", name="triage", uid="u")
SETTINGS = RolloutSettings(
    allowed_registries=["127.0.0.1:5000"],
    allow_insecure_registries=True,
    ollaya_registry="http://127.0.0.1:5000",
)
Shown = tuple[ConditionType, str, str, bool]


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[Shown]:
    writes: list[Shown] = []

    async def record(
        kube: Any, dm: DMRef, condition: ConditionType, reason: str, message: str, first: bool
    ) -> None:
        writes.append((condition, reason, message, first))

    monkeypatch.setattr(typed_errors, "show_guard", record)
    return writes


def activities(answer: httpx.Response | Exception, kube: Kube | None) -> ResolveActivities:
    def registry(request: httpx.Request) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def no_wait(seconds: float) -> None:
        return None

    def factory(settings: RolloutSettings) -> RegistryResolver:
        return RegistryResolver(
            allowed_registries=settings.allowed_registries,
            allow_insecure=settings.allow_insecure_registries,
            retry=RetryPolicy(max_attempts=2),
            transport=httpx.MockTransport(registry),
            sleep=no_wait,
        )

    return ResolveActivities(SETTINGS, resolver_factory=factory, kube=kube)


async def resolve_fails(acts: ResolveActivities, model: str) -> ApplicationError:
    inp = ResolveInput(dm=DM, revision=RevisionSpec(model=model))
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(acts.resolve, inp)
    return caught.value


async def test_an_unreachable_registry_shows_resolved_false_registry_unavailable(
    shown: list[Shown],
) -> None:
    acts = activities(httpx.ConnectError("wrong version number"), cast(Kube, object()))
    error = await resolve_fails(acts, "127.0.0.1:5000/library/laya:en")
    assert error.type == Reason.REGISTRY_UNAVAILABLE and error.non_retryable is False
    ((condition, reason, message, first),) = shown
    assert (condition, reason, first) == (ConditionType.RESOLVED, Reason.REGISTRY_UNAVAILABLE, True)
    assert message == error.message
    # The registry, and the fix: the host without a scheme was read as https.
    assert "registry https://127.0.0.1:5000 unavailable" in message
    assert "name it http://127.0.0.1:5000/library/laya:en in spec.model" in message


async def test_a_registry_answering_wrongly_shows_resolved_false_registry_error(
    shown: list[Shown],
) -> None:
    acts = activities(httpx.Response(403), cast(Kube, object()))
    error = await resolve_fails(acts, "laya:en")
    assert error.type == Reason.REGISTRY_ERROR and error.non_retryable is False
    assert [(c, r) for c, r, _, _ in shown] == [(ConditionType.RESOLVED, Reason.REGISTRY_ERROR)]
    assert "unexpected status 403" in shown[0][2]


async def test_a_missing_tag_is_final_and_left_to_the_workflow(shown: list[Shown]) -> None:
    # Permanent: the workflow's failure path writes Resolved=False; no guard write here.
    acts = activities(httpx.Response(404), cast(Kube, object()))
    error = await resolve_fails(acts, "laya:en")
    assert error.type == Reason.MODEL_NOT_FOUND and error.non_retryable is True
    assert shown == []


async def test_without_a_cluster_nothing_is_shown(shown: list[Shown]) -> None:
    error = await resolve_fails(activities(httpx.Response(503), None), "laya:en")
    assert error.type == Reason.REGISTRY_UNAVAILABLE
    assert shown == []

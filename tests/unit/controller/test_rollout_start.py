"""How the controller starts a rollout workflow (controller/temporal/rollouts.py)."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from controller.temporal.rollouts import Rollouts
from decisionmodel.rollout.contracts import DMRef, RevisionSpec, RolloutInput


class RecordingClient:
    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    async def start_workflow(self, *args: Any, **kwargs: Any) -> None:
        self.started.append(kwargs)


async def test_a_rollout_gets_a_workflow_task_timeout_that_survives_a_busy_worker() -> None:
    client = RecordingClient()
    rollouts = Rollouts(client, "q")  # type: ignore[arg-type]
    inp = RolloutInput(
        dm=DMRef(namespace="ns", name="dm", uid="uid-1"),
        requested_revision="u000000000000001",
        revision=RevisionSpec(model="laya:en", digest=None, device="cpu"),
        replicas=1,
    )
    assert await rollouts.start(inp)
    (options,) = client.started
    # The server's default, 10 s, timed out tasks that waited for a saturated worker.
    assert options["task_timeout"] == timedelta(seconds=30)
    assert options["id"] == "rollout/ns/dm/u000000000000001"


class DescribingClient:
    """A client whose describe fails with ``status`` (or answers ``running`` when None)."""

    def __init__(self, status: RPCStatusCode | None) -> None:
        self.status = status

    def get_workflow_handle(self, wid: str) -> DescribingClient:
        return self

    async def describe(self, **kwargs: Any) -> Any:
        if self.status is not None:
            raise RPCError("describe failed", self.status, b"")
        return SimpleNamespace(status=WorkflowExecutionStatus.COMPLETED)


@pytest.mark.parametrize(
    ("status", "closed"),
    [
        (RPCStatusCode.DEADLINE_EXCEEDED, None),
        (RPCStatusCode.RESOURCE_EXHAUSTED, None),
        (RPCStatusCode.UNAVAILABLE, None),
        (RPCStatusCode.NOT_FOUND, True),
        (None, True),  # answered: completed
    ],
    ids=["timeout", "throttled", "unavailable", "not-found", "closed"],
)
async def test_a_run_is_closed_only_when_temporal_says_so(
    status: RPCStatusCode | None, closed: bool | None
) -> None:
    """A failed describe is no evidence that the run ended: taking it as ended started a second
    rollout of the same revision beside the first. It says Temporal did not answer (the
    reconcile then leaves every rollout as it is), never "closed"."""
    from controller.temporal.errors import TemporalUnavailable

    rollouts = Rollouts(DescribingClient(status), "q")  # type: ignore[arg-type]
    if closed is None:
        with pytest.raises(TemporalUnavailable):
            await rollouts.describe_running("rollout/ns/dm/u000000000000001")
    else:
        assert await rollouts.describe_running("rollout/ns/dm/u000000000000001") is None


class DownClient:
    """A client whose every call fails as when the frontend cannot be reached."""

    namespace = "default"

    def __init__(self) -> None:
        self.calls = 0

    def get_workflow_handle(self, wid: str) -> DownClient:
        return self

    async def describe(self, **kwargs: Any) -> Any:
        self.calls += 1
        raise RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b"")


async def test_an_unreachable_temporal_is_said_once_then_answered_at_once() -> None:
    from controller.temporal.errors import TemporalUnavailable

    client = DownClient()
    rollouts = Rollouts(client, "q", where="Temporal at t:7233")  # type: ignore[arg-type]
    with pytest.raises(TemporalUnavailable, match="Temporal at t:7233 did not answer"):
        await rollouts.describe_running("rollout/ns/dm/r")
    # Within the hold, no call waits its own timeout: the answer is known.
    with pytest.raises(TemporalUnavailable):
        await rollouts.describe_running("rollout/ns/dm/r")
    assert client.calls == 1

"""How the controller starts a rollout workflow (controller/rollouts.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from controller.rollouts import Rollouts
from decisionmodel.contracts import DMRef, RevisionSpec, RolloutInput


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

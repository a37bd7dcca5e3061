"""The hub controller aborts the runs of pipelines deleted while no controller watched
(issue 25: nothing it created is left behind). No DELETED event ever comes for them; the
full list of the pipelines (start-up, each relist) is checked against the running runs, found
by one visibility list (their DmPipeline attribute, or the ID for older runs)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

from controller.hub.pipelines import PipelineController
from localenv.temporal import TemporalDevServer
from workflows import search_attributes as sa


@workflow.defn(name="PipelineWorkflow", sandboxed=False)
class StandInRun:
    """Stands in for a pipeline run: it runs until aborted, and says why."""

    def __init__(self) -> None:
        self.why: str | None = None

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.why is not None)
        return self.why or ""

    @workflow.signal
    def abort(self, reason: str) -> None:
        self.why = reason


async def listed(client: Client, ids: set[str], timeout: float = 30) -> None:
    """Until visibility lists the runs (it is eventually consistent); bounded."""
    query = "WorkflowType = 'PipelineWorkflow' AND ExecutionStatus = 'Running'"
    deadline = time.monotonic() + timeout
    while ids - {wf.id async for wf in client.list_workflows(query)}:
        assert time.monotonic() < deadline, f"{ids} not listed"
        await asyncio.sleep(0.2)


async def test_runs_of_pipelines_gone_are_aborted_the_others_kept(
    temporal_server: TemporalDevServer,
) -> None:
    client = await Client.connect(temporal_server.address)
    queue = f"orphans-{uuid.uuid4().hex[:6]}"
    ns = f"orph-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, workflows=[StandInRun]):

        async def start(name: str, attribute: bool = True) -> WorkflowHandle[Any, str]:
            pairs = [SearchAttributePair(sa.DM_PIPELINE, f"{ns}/{name}")] if attribute else []
            return await client.start_workflow(
                StandInRun.run,
                id=f"pipeline/{ns}/{name}/rev1",
                task_queue=queue,
                search_attributes=TypedSearchAttributes(pairs),
                result_type=str,
            )

        kept, gone, older = await start("kept"), await start("gone"), await start("old", False)
        await listed(client, {kept.id, gone.id, older.id})
        controller = PipelineController(kube=None, client=client)  # type: ignore[arg-type]
        await controller.abort_orphans({(ns, "kept")})
        assert "deleted" in await asyncio.wait_for(gone.result(), 30)
        assert "deleted" in await asyncio.wait_for(older.result(), 30)  # found by its ID
        await controller.abort_orphans({(ns, "kept")})  # nothing left to abort: no error
        assert not (await kept.describe()).close_time
        await kept.signal(StandInRun.abort, "test over")

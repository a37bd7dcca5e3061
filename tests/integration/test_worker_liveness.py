"""The worker's liveness follows its activities' progress (controller.worker.progress): a worker
whose activity stops reporting is unhealthy, one whose activities heartbeat is not."""

from __future__ import annotations

import asyncio
import uuid

from harness.helpers import eventually
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from controller.serve.liveness import LoopProgress
from controller.worker.progress import ProgressInterceptor
from localenv.temporal import TemporalDevServer

release = asyncio.Event()
progress = LoopProgress(stall_seconds=1.5)
healthy_after_beats: list[bool] = []


@activity.defn(name="stuck")
async def stuck(beats: int) -> None:
    for _ in range(beats):  # beats for longer than the stall: progress, so alive
        activity.heartbeat()
        await asyncio.sleep(0.1)
    healthy_after_beats.append(progress.healthy())
    await release.wait()  # no more progress until released


@workflow.defn(name="LivenessProbe", sandboxed=False)
class LivenessProbe:
    @workflow.run
    async def run(self, beats: int) -> None:
        from datetime import timedelta

        await workflow.execute_activity("stuck", beats, start_to_close_timeout=timedelta(minutes=5))


async def test_an_activity_that_stops_reporting_makes_the_worker_unhealthy(
    temporal_server: TemporalDevServer,
) -> None:
    client = await Client.connect(temporal_server.address)
    queue = f"liveness-{uuid.uuid4().hex[:8]}"
    release.clear()
    async with Worker(
        client,
        task_queue=queue,
        workflows=[LivenessProbe],
        activities=[stuck],
        interceptors=[ProgressInterceptor(progress)],
    ):
        handle = await client.start_workflow(
            LivenessProbe.run, 20, id=f"liveness-{uuid.uuid4().hex}", task_queue=queue
        )
        await eventually(lambda: healthy_after_beats, 30, what="2 s of heartbeats")
        assert healthy_after_beats == [True] and progress.in_flight == 1
        await eventually(lambda: not progress.healthy(), 30, what="wedged")
        release.set()
        await handle.result()
        assert progress.in_flight == 0 and progress.healthy()

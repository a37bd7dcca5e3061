"""``dmrollout worker``: runs RolloutWorkflow and its activities on one task queue.

Activities are async: cancellation reaches them as ``asyncio.CancelledError`` at the next await
(which WAIT_CANCELLATION_COMPLETED cleanup relies on), heartbeats are cheap, and the blocking
kubernetes client runs in a bounded thread pool (``asyncio.to_thread``, sized by
``max_concurrent_activities``) so one slow API call never stalls the others.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
from datetime import timedelta

from activities.registry import build_activities
from temporalio.client import Client
from temporalio.worker import Worker

from activities.kube import Kube
from activities.settings import RolloutSettings
from controller.temporal_client import TemporalSettings, check_namespace, connect, make_runtime
from workflows.rollout import RolloutWorkflow

log = logging.getLogger("dmrollout.worker")

MAX_CONCURRENT_ACTIVITIES = 32


def build_worker(
    client: Client,
    kube: Kube,
    settings: RolloutSettings,
    task_queue: str,
    max_concurrent_activities: int = MAX_CONCURRENT_ACTIVITIES,
) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[RolloutWorkflow],
        activities=build_activities(kube, settings),
        max_concurrent_activities=max_concurrent_activities,
        # Let activities in flight finish (or reach a heartbeat and see the cancel) on SIGTERM.
        graceful_shutdown_timeout=timedelta(seconds=20),
    )


async def run_worker(temporal: TemporalSettings, settings: RolloutSettings) -> int:
    client = await connect(temporal, make_runtime(temporal))
    await check_namespace(client, temporal.namespace)
    kube = Kube.from_config(settings.kubeconfig)
    loop = asyncio.get_running_loop()
    # The thread pool behind asyncio.to_thread: one thread per concurrent activity.
    loop.set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=MAX_CONCURRENT_ACTIVITIES)
    )
    worker = build_worker(client, kube, settings, temporal.task_queue)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker on task queue %s of %s", temporal.task_queue, temporal.address)
    async with worker:
        await stop.wait()
        log.info("shutting down: waiting for activities in flight")
    return 0

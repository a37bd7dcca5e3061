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
import os
import signal
from datetime import timedelta

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from temporalio.client import Client
from temporalio.worker import Worker

from activities.registry import build_activities
from controller.temporal_client import TemporalSettings, check_namespace, connect, make_runtime
from decisionmodel.settings import RolloutSettings
from kube.client import Kube
from workflows.rollout import RolloutWorkflow

log = logging.getLogger("dmrollout.worker")

MAX_CONCURRENT_ACTIVITIES = 32


class WorkerMetrics:
    """The seed-004 series measured where the work happens: registry resolves run here.

    Served on ``DMROLLOUT_WORKER_METRICS_PORT`` (prometheus_client), next to the Temporal SDK's
    own metrics (``DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS``, e.g. workflow-task failures).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.resolve_duration = Histogram(
            "decisionmodel_registry_resolve_duration_seconds",
            "Duration of a model registry tag→digest resolution.",
            registry=self.registry,
        )

    def observe_resolve(self, seconds: float) -> None:
        self.resolve_duration.observe(seconds)


def build_worker(
    client: Client,
    kube: Kube,
    settings: RolloutSettings,
    task_queue: str,
    max_concurrent_activities: int = MAX_CONCURRENT_ACTIVITIES,
    metrics: WorkerMetrics | None = None,
) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[RolloutWorkflow],
        activities=build_activities(
            kube, settings, metrics.observe_resolve if metrics is not None else None
        ),
        max_concurrent_activities=max_concurrent_activities,
        # Let activities in flight finish (or reach a heartbeat and see the cancel) on SIGTERM.
        graceful_shutdown_timeout=timedelta(seconds=20),
    )


async def run_worker(temporal: TemporalSettings, settings: RolloutSettings) -> int:
    client = await connect(temporal, make_runtime(temporal))
    await check_namespace(client, temporal.namespace)
    kube = Kube.from_settings(settings)
    loop = asyncio.get_running_loop()
    # The thread pool behind asyncio.to_thread: one thread per concurrent activity.
    loop.set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=MAX_CONCURRENT_ACTIVITIES)
    )
    metrics = WorkerMetrics()
    port = os.environ.get("DMROLLOUT_WORKER_METRICS_PORT")
    if port:
        start_http_server(int(port), registry=metrics.registry)
    worker = build_worker(client, kube, settings, temporal.task_queue, metrics=metrics)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker on task queue %s of %s", temporal.task_queue, temporal.address)
    async with worker:
        await stop.wait()
        log.info("shutting down: waiting for activities in flight")
    return 0

"""``dmrollout worker``: runs RolloutWorkflow and its activities on one task queue.

Activities are async: cancellation reaches them as ``asyncio.CancelledError`` at the next await
(which WAIT_CANCELLATION_COMPLETED cleanup relies on), heartbeats are cheap, and the blocking
kubernetes client runs in a bounded thread pool (``asyncio.to_thread``, sized by
``worker_max_concurrent_activities``) so one slow API call never stalls the others. Every
concurrency of the worker is bounded (``RolloutSettings.worker_*``) so that, under load, tasks
wait in Temporal's queues rather than time out inside a busy process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from temporalio import worker as worker_module
from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker, WorkerDeploymentConfig

from activities.registry import build_activities, build_hub_activities, build_stage_activities
from controller.serve.cicd_spans import CicdSpanInterceptor
from controller.serve.health import HealthServer
from controller.serve.liveness import LoopProgress
from controller.serve.metrics import PROBE_RESULTS
from controller.serve.metrics_server import build_secure_metrics_server
from controller.serve.metrics_settings import MetricsSettings
from controller.serve.sdk_metrics import with_sdk_series
from controller.serve.tracing import shutdown_tracing, tracing_enabled, tracing_interceptors
from controller.temporal.client import TemporalSettings, check_namespace, connect, make_runtime
from controller.worker.deployment import deployment_config, make_current, watch_build
from controller.worker.progress import ProgressInterceptor
from decisionmodel.api.pipeline import stage_task_queue
from decisionmodel.engine.render.proxy import skipped_proxy_variables
from decisionmodel.pipeline.contracts import HUB_TASK_QUEUE
from decisionmodel.rollout import render_params
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from workflows import search_attributes as sa
from workflows.pipeline import PipelineWorkflow
from workflows.pipeline_stage import PipelineStageWorkflow
from workflows.rollout import RolloutWorkflow
from workflows.store_recovery import StoreRecoveryWorkflow

log = logging.getLogger("dmrollout.worker")


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
        # The gate transitions of candidate Pods, judged here during warm-up (the controller
        # counts the stable's): the same series, summed by namespace and name in the alerts.
        self.probe_results = Counter(
            "decisionmodel_probe_results",
            "Model-readiness probe outcomes, counted on a gate transition.",
            ["namespace", "name", "result"],
            registry=self.registry,
        )

        # (namespace, name) -> monotonic time of its last transition: what forget_deleted checks.
        self._last_transition: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def record_probe_transition(self, namespace: str, name: str, result: str) -> None:
        with self._lock:
            self._last_transition[(namespace, name)] = time.monotonic()
        self.probe_results.labels(namespace, name, result).inc()

    def forget_deleted(self, exists: Callable[[str, str], bool], idle_seconds: float) -> int:
        """Seed 004: a deleted DecisionModel's series are removed. The worker sees no deletes,
        so it asks, for the DecisionModels whose series have been idle ``idle_seconds`` (one
        GET each, only for those that ever had a candidate here); an error keeps the series.
        Returns how many DecisionModels' series were removed."""
        now = time.monotonic()
        with self._lock:
            idle = [k for k, t in self._last_transition.items() if now - t >= idle_seconds]
        removed = 0
        for namespace, name in idle:
            try:
                if exists(namespace, name):
                    continue
            except Exception:  # unreachable, throttled: ask again next time
                log.debug("could not check DecisionModel %s/%s", namespace, name, exc_info=True)
                continue
            with self._lock:
                self._last_transition.pop((namespace, name), None)
            for result in PROBE_RESULTS:
                with contextlib.suppress(KeyError):
                    self.probe_results.remove(namespace, name, result)
            removed += 1
        return removed

    def observe_resolve(self, seconds: float) -> None:
        self.resolve_duration.observe(seconds)


def tuning_options(settings: RolloutSettings) -> dict[str, Any]:
    """The Worker's concurrency, bounded (RolloutSettings.worker_*, docs/operations.md
    "Scaling"): what the process cannot do now waits in the task queue, not started and timing
    out here."""
    workflow_tasks = settings.worker_max_concurrent_workflow_tasks
    return {
        "max_concurrent_activities": settings.worker_max_concurrent_activities,
        "max_concurrent_workflow_tasks": workflow_tasks,
        "max_cached_workflows": settings.worker_max_cached_workflows,
        # A poll holds a slot's worth of work: never more polls than slots.
        "workflow_task_poller_behavior": PollerBehaviorSimpleMaximum(
            min(settings.worker_workflow_task_pollers, workflow_tasks)
        ),
        "activity_task_poller_behavior": PollerBehaviorSimpleMaximum(
            settings.worker_activity_task_pollers
        ),
        "sticky_queue_schedule_to_start_timeout": timedelta(
            seconds=settings.worker_sticky_schedule_to_start_seconds
        ),
    }


def build_worker(
    client: Client,
    kube: Kube,
    settings: RolloutSettings,
    task_queue: str,
    metrics: WorkerMetrics | None = None,
    progress: LoopProgress | None = None,
    deployment: WorkerDeploymentConfig | None = None,
    ui_url: str | None = None,
) -> Worker:
    """The rollouts' worker; with ``deployment``, a build of a Worker Deployment whose
    workflows are pinned to it (controller/worker/deployment.py)."""
    versioning: dict[str, Any] = {} if deployment is None else {"deployment_config": deployment}
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[RolloutWorkflow, StoreRecoveryWorkflow],
        activities=build_activities(
            kube,
            settings,
            metrics.observe_resolve if metrics is not None else None,
            metrics.record_probe_transition if metrics is not None else None,
            client,
        ),
        **tuning_options(settings),
        interceptors=worker_interceptors(progress, ui_url),
        **versioning,
        # Let activities in flight finish (or reach a heartbeat and see the cancel) on SIGTERM.
        graceful_shutdown_timeout=timedelta(seconds=20),
    )


def worker_interceptors(
    progress: LoopProgress | None, ui_url: str | None
) -> list[worker_module.Interceptor]:
    """Liveness, and with tracing on the CI/CD conventions on each activity's span."""
    found: list[worker_module.Interceptor] = []
    if progress is not None:
        found.append(ProgressInterceptor(progress))
    if tracing_enabled():
        found.append(CicdSpanInterceptor(ui_url))
    return found


def pipeline_workers(
    client: Client, kube: Kube, settings: RolloutSettings, rollouts: Client | None = None
) -> list[Worker]:
    """The pipelines' workers this process runs besides the rollouts' (issue 25): the stages
    of this cluster (``DMROLLOUT_STAGE_CLUSTER``) and, on the hub, the pipelines
    (``DMROLLOUT_PIPELINE_HUB``), on ``client`` (the pipelines' namespace). Each polls its
    own task queue with this cluster's credentials only; ``rollouts`` is the client of this
    cluster's rollouts, whose verdicts the stages read."""
    workers = []
    common: dict[str, Any] = {
        **tuning_options(settings),
        "graceful_shutdown_timeout": timedelta(seconds=20),
    }
    if settings.stage_cluster:
        workers.append(
            Worker(
                client,
                task_queue=stage_task_queue(settings.stage_cluster),
                workflows=[PipelineStageWorkflow],
                activities=build_stage_activities(kube, settings, rollouts),
                **common,
            )
        )
    if settings.pipeline_hub:
        workers.append(
            Worker(
                client,
                task_queue=HUB_TASK_QUEUE,
                workflows=[PipelineWorkflow],
                activities=build_hub_activities(kube, settings),
                **common,
            )
        )
    return workers


def warn_skipped_proxies(settings: RolloutSettings) -> list[str]:
    """One startup warning naming the proxy variables that look credentialed and are
    therefore not copied to prefetch Jobs (seed 001: names only, never the value)."""
    skipped = skipped_proxy_variables(render_params.proxy_env(settings))
    if skipped:
        log.warning(
            "%s carr%s credentials (or cannot be parsed) and %s not copied to prefetch Jobs, "
            "whose spec a tenant can read: the pull then has no proxy; use a credential-free "
            'proxy for the Jobs (seed 001 "Behind an HTTP proxy")',
            " and ".join(skipped),
            "ies" if len(skipped) == 1 else "y",
            "is" if len(skipped) == 1 else "are",
        )
    return skipped


async def _pipelines_client(
    rollouts: Client, temporal: TemporalSettings, settings: RolloutSettings
) -> Client:
    """The client of the pipelines' namespace, checked like the rollouts' when this worker
    runs pipelines or stages (their runs upsert the pipeline attributes)."""
    pipelines = rollouts
    if temporal.pipelines_namespace and temporal.pipelines_namespace != temporal.namespace:
        pipelines = await connect(temporal.for_pipelines())
    if settings.stage_cluster or settings.pipeline_hub:
        namespace = temporal.for_pipelines().namespace
        await check_namespace(pipelines, namespace, sa.registered(pipelines=True))
    return pipelines


async def run_worker(temporal: TemporalSettings, settings: RolloutSettings) -> int:
    client = await connect(
        temporal, make_runtime(temporal), tracing_interceptors("dmrollout-worker")
    )
    await check_namespace(client, temporal.namespace)
    pipelines = await _pipelines_client(client, temporal, settings)
    kube = Kube.from_settings(settings)
    loop = asyncio.get_running_loop()
    # The thread pool behind asyncio.to_thread: one thread per concurrent activity.
    loop.set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=settings.worker_max_concurrent_activities)
    )
    metrics = WorkerMetrics()
    progress = LoopProgress(settings.worker_liveness_stall_seconds)
    serving = MetricsSettings()
    sdk = temporal.metrics_bind_address if serving.secure else None
    render = with_sdk_series(lambda: generate_latest(metrics.registry), sdk)
    health = _health_server(None if serving.secure else render, progress)
    secure = build_secure_metrics_server(serving, kube, render)
    if secure is not None:
        secure.start()
    deployment = deployment_config(settings)
    worker = build_worker(
        client,
        kube,
        settings,
        temporal.task_queue,
        metrics=metrics,
        progress=progress,
        deployment=deployment,
        ui_url=temporal.ui_url,
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker on task queue %s of %s", temporal.task_queue, temporal.address)
    warn_skipped_proxies(settings)
    period = settings.worker_series_check_seconds
    sweep = asyncio.create_task(_forget_deleted(metrics, kube, period))
    extra = pipeline_workers(pipelines, kube, settings, rollouts=client)
    for w in extra:
        log.info("pipelines: also on task queue %s", w.task_queue)
    try:
        async with contextlib.AsyncExitStack() as workers:
            for w in (worker, *extra):
                await workers.enter_async_context(w)
            drained = await _join_deployment(client, deployment, settings, temporal.task_queue)
            await _first_of(stop.wait(), drained)
            log.info("shutting down: waiting for activities in flight")
        if not stop.is_set():  # drained: nothing more to do here until the Pod is removed
            await stop.wait()
    finally:
        sweep.cancel()
        if health is not None:
            health.stop()
        if secure is not None:
            secure.stop()
        shutdown_tracing()
    return 0


async def _join_deployment(
    client: Client,
    deployment: WorkerDeploymentConfig | None,
    settings: RolloutSettings,
    task_queue: str,
) -> Coroutine[Any, Any, None] | None:
    """Join the Worker Deployment: the promoting build becomes current once it has polled.
    Returns what to wait for before this build stops polling (None: never)."""
    if deployment is None:
        return None
    version, promote = deployment.version, settings.worker_promote_on_start
    log.info(
        "Worker Deployment %s, build %s (%s)",
        version.deployment_name,
        version.build_id,
        "takes new rollouts" if promote else "draining: finishes the rollouts pinned to it",
    )
    if promote:
        await make_current(client, version, task_queue=task_queue)
    # A draining build once no rollout is pinned to it; this release's build never.
    return watch_build(client, version, settings.worker_drain_check_seconds, task_queue, promote)


async def _first_of(*waits: Coroutine[Any, Any, Any] | None) -> None:
    """Return when the first of ``waits`` (None: never) returns; the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits if w is not None]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


async def _forget_deleted(metrics: WorkerMetrics, kube: Kube, period: float) -> None:
    """Every ``period``: drop the probe series of DecisionModels that are gone."""

    def exists(namespace: str, name: str) -> bool:
        return kube.read_dm(namespace, name) is not None

    while True:
        await asyncio.sleep(period)
        removed = await asyncio.to_thread(metrics.forget_deleted, exists, period)
        if removed:
            log.info("removed the probe series of %d deleted DecisionModel(s)", removed)


def _health_server(
    metrics: Callable[[], bytes] | None, progress: LoopProgress
) -> HealthServer | None:
    """``/healthz`` (activities not wedged), ``/readyz`` and, with plain HTTP opted into,
    ``/metrics`` (dmrollout's worker series) on DMROLLOUT_WORKER_METRICS_PORT."""
    port = os.environ.get("DMROLLOUT_WORKER_METRICS_PORT")
    if not port:
        return None

    def healthy() -> bool:
        if progress.healthy():
            return True
        log.error(
            "activities wedged: %d in flight, no heartbeat or completion for %.0f s",
            progress.in_flight,
            progress.stalled_for(),
        )
        return False

    server = HealthServer("0.0.0.0", int(port), metrics, lambda: True, healthy)
    server.start()
    return server

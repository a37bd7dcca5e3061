"""``dmrollout controller``: watches → work queue → reconcilers, under a leader Lease.

Watches run in every replica (a standby is ready the moment it leads), but only the leader
takes keys off the queue: two replicas never both dispatch. Losing the Lease ends the process
(as controller-runtime does), so a replica that cannot prove leadership stops acting at once and
its Deployment restarts it as a standby.
"""

from __future__ import annotations

import asyncio
import logging
import time

from controller.machinery.cache import DECISION_MODEL, CacheNotSynced, ObjectCache
from controller.machinery.leader import LeaderElector
from controller.machinery.lifecycle import Outcome, run_leading, stop_on_signals
from controller.machinery.watch import Watcher
from controller.machinery.workqueue import QueueShutDown, WorkQueue
from controller.reconciler.reconcile import Reconciler
from controller.reconciler.settings import ControllerSettings
from controller.reconciler.steady import SteadyState
from controller.serve.health import HealthServer
from controller.serve.liveness import LoopProgress
from controller.serve.metrics import ControllerMetrics
from controller.serve.metrics_server import SecureMetricsServer, build_secure_metrics_server
from controller.serve.metrics_settings import MetricsSettings
from controller.serve.reconcile_metrics import ReconcileMetrics
from controller.serve.sdk_metrics import with_sdk_series
from controller.serve.tracing import shutdown_tracing, tracing_interceptors
from controller.temporal.client import (
    ApiKeyReload,
    TemporalSettings,
    check_namespace,
    connect,
    make_runtime,
)
from controller.temporal.errors import is_away
from controller.temporal.probe import TemporalProbe
from controller.temporal.rollouts import Rollouts
from controller.temporal.runs import TEMPORAL_ERRORS, TemporalClient
from controller.temporal.store_recoveries import StoreRecoveries
from decisionmodel.rollout.dispatch import DispatchSettings
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import Reason
from kube.client import Kube
from kube.lease import LeaseStore

log = logging.getLogger("dmrollout.controller")


# How soon a reconcile that found its kinds not listed yet looks again.
CACHE_WAIT_SECONDS = 1.0


class LeadershipLost(RuntimeError):
    pass


# How soon a probe loop that ended anyway is started again.
PROBE_RESTART_SECONDS = 5.0


async def keep_probing(probe: TemporalProbe) -> None:
    """The probe's loop, started again should it ever end (its own loop already survives what
    one probe raises): nothing else would update the condition of idle DecisionModels."""
    while True:
        try:
            await probe.run()
            log.error("the Temporal probe ended; starting it again")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the Temporal probe failed; starting it again")
        await asyncio.sleep(PROBE_RESTART_SECONDS)


class Manager:
    def __init__(
        self,
        settings: ControllerSettings,
        rollout: RolloutSettings,
        temporal: TemporalSettings,
        metrics_settings: MetricsSettings | None = None,
    ) -> None:
        self.settings = settings
        self.metrics_settings = metrics_settings or MetricsSettings()
        # HTTPS /metrics (the default), started with the health server in run().
        self.secure_metrics: SecureMetricsServer | None = None
        self.rollout = rollout
        self.temporal = temporal
        self.metrics = ControllerMetrics()
        self.queue: WorkQueue[str] = WorkQueue()
        self.reconciles = ReconcileMetrics(self.metrics.registry, lambda: len(self.queue))
        self.watcher: Watcher | None = None
        self.probe: TemporalProbe | None = None
        # The client certificate the Temporal client connected with (client.client_cert_digest).
        self.cert_at_start = temporal.client_cert_digest()
        self.leading = False
        # How the process ends (a stop signal, the Lease lost): controller/machinery/lifecycle.
        self.outcome = Outcome()
        # Reconciles in flight and when one last finished: /healthz fails when they are wedged.
        self.progress = LoopProgress(settings.liveness_stall_seconds)
        # The Temporal SDK's series too (its client runs here: starts, queries, visibility),
        # read from its exporter on loopback (DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS).
        self.render = with_sdk_series(self.metrics.render, temporal.metrics_bind_address)
        self.health = HealthServer(
            settings.health_bind,
            settings.health_port,
            None if self.metrics_settings.secure else self.render,
            ready=self._ready,
            healthy=self._healthy,
        )

    def _healthy(self) -> bool:
        if self.outcome.lost:
            return False
        if self.probe is not None and not self.probe.alive():
            # Without its probe, idle DecisionModels would keep a stale TemporalReachable: a
            # restart is better than a condition nobody updates.
            stuck = time.monotonic() - self.probe.last_round
            log.error("the Temporal probe has not finished a round for %.0f s", stuck)
            return False
        if self._renewed_while_refused():
            log.error(
                "Temporal refuses the controller's credential and the client certificate on "
                "disk has changed since start: restarting to connect with the renewed one"
            )
            return False
        if not self.progress.healthy(waiting=len(self.queue) if self.leading else 0):
            log.error(
                "reconciles wedged: %d in flight, none finished for %.0f s",
                self.progress.in_flight,
                self.progress.stalled_for(),
            )
            return False
        return True

    def _renewed_while_refused(self) -> bool:
        """Temporal refuses the credential, and a renewed client certificate is mounted: only a
        new connection takes it (the SDK keeps the TLS material it started with), so the
        kubelet's restart is the way to recover by itself."""
        probe = self.probe
        if probe is None or probe.down is None or probe.reason != Reason.TEMPORAL_UNAUTHORIZED:
            return False
        if self.temporal.client_cert_file is None:
            return False
        return self.temporal.client_cert_digest() != self.cert_at_start

    def _ready(self) -> bool:
        synced = self.watcher is not None and self.watcher.synced
        return synced and (self.leading or not self.settings.leader_election)

    async def run(self) -> int:
        """Connect, build the reconciler on one watch-fed cache, serve probes and metrics,
        reconcile while leading (controller/machinery/lifecycle.py); the exit code."""
        client, where = await self._connect()
        kube = Kube.from_settings(self.rollout)
        # One watch-fed cache, read by every reconcile and the steady state
        # (controller/machinery/cache.py).
        cache = ObjectCache()
        reconciler = self._reconciler(client, where, kube, cache)
        self.watcher = Watcher(kube, self.queue.add, self.settings.watch_namespaces, cache)
        # Probes first: /readyz says not ready until the cache is synced anyway.
        self.health.start()
        self.watcher.start()
        self.secure_metrics = build_secure_metrics_server(self.metrics_settings, kube, self.render)
        if self.secure_metrics is not None:
            self.secure_metrics.start()
        assert self.probe is not None
        probing = asyncio.create_task(keep_probing(self.probe), name="temporal-probe")
        stop_on_signals(self.outcome)
        workers = self.settings.workers
        code = await run_leading(
            lambda: self._lead(reconciler),
            self._elector(kube),
            self.outcome,
            f"dispatching with {workers} workers",
        )
        log.info("stopping")
        self.queue.shutdown()
        probing.cancel()
        self.watcher.stop()
        self.health.stop()
        if self.secure_metrics is not None:
            self.secure_metrics.stop()
        shutdown_tracing()
        return code

    async def _connect(self) -> tuple[TemporalClient, str]:
        """The Temporal client (lazy) and where it points; a Temporal away at start is no
        reason to stop."""
        client = await connect(
            self.temporal,
            make_runtime(self.temporal),
            tracing_interceptors("dmrollout-controller"),
            lazy=True,
        )
        where = f"Temporal at {self.temporal.address} (namespace {self.temporal.namespace!r})"
        try:
            await check_namespace(client, self.temporal.namespace)
        except TEMPORAL_ERRORS as e:
            if not is_away(e):
                raise
            # Not a reason to stop, nor is a refused credential: the steady state needs
            # Kubernetes alone, and each DecisionModel says why Temporal cannot be used
            # (TemporalReachable) until it answers.
            log.warning("%s cannot be used at start: %s; rollouts wait", where, e)
        return client, where

    def _reconciler(
        self, client: TemporalClient, where: str, kube: Kube, cache: ObjectCache
    ) -> Reconciler:
        rollouts = Rollouts(
            client,
            self.temporal.task_queue,
            self.temporal.ui_url,
            where,
            poll_stale_seconds=self.settings.worker_poll_stale_seconds,
        )

        def wake_all() -> None:
            for namespace, name in cache.keys(DECISION_MODEL):
                self.queue.add(f"{namespace}/{name}")

        rollouts.on_refused = ApiKeyReload(self.temporal, client)
        self.probe = TemporalProbe(rollouts, on_change=wake_all)
        return Reconciler(
            kube=kube,
            rollouts=rollouts,
            steady=SteadyState(
                kube,
                self.rollout,
                self.settings,
                StoreRecoveries(client, self.temporal.task_queue),
                reader=cache,
            ),
            settings=self.settings,
            dispatch=DispatchSettings(
                runtime_version=self.rollout.runtime_version,
                runtime_version_policy=self.settings.runtime_version_policy,
                decision_records=self.rollout.decision_records_namespace is not None,
            ),
            metrics=self.metrics,
            reader=cache,
            wake=self.queue.add_first,
            temporal=self.probe,
        )

    def _elector(self, kube: Kube) -> LeaderElector | None:
        if not self.settings.leader_election:
            return None
        return LeaderElector(
            LeaseStore(kube, self.settings.lease_namespace, self.settings.lease_name),
            self.settings.identity,
            lease_duration=self.settings.lease_duration_seconds,
            renew_deadline=self.settings.renew_deadline_seconds,
            retry_period=self.settings.retry_period_seconds,
        )

    async def _lead(self, reconciler: Reconciler) -> None:
        """The workers, while this replica leads (cancelled when it stops leading)."""
        self.leading = True
        workers = [
            asyncio.create_task(self._work(reconciler), name=f"reconcile-{i}")
            for i in range(self.settings.workers)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            self.leading = False
            for w in workers:
                w.cancel()

    async def _work(self, reconciler: Reconciler) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            namespace, _, name = key.partition("/")
            began = time.monotonic()
            self.progress.started()
            try:
                again = await reconciler.reconcile(namespace, name)
                self.queue.forget(key)
                if again is not None:
                    self.queue.add_after(key, again)
                self.reconciles.observe(
                    time.monotonic() - began, "success" if again is None else "requeue_after"
                )
            except asyncio.CancelledError:
                raise
            except CacheNotSynced as e:
                # Not listed yet (startup, or a namespace whose list is refused): wait for it
                # rather than act on an empty cache as if the objects were gone.
                self.queue.forget(key)
                self.queue.add_after(key, CACHE_WAIT_SECONDS)
                self.reconciles.observe(time.monotonic() - began, "requeue_after")
                log.info("reconcile %s waits for the cache: %s", key, e)
            except Exception:
                delay = self.queue.add_rate_limited(key)
                self.reconciles.observe(time.monotonic() - began, "error")
                log.exception("reconcile %s failed; retrying in %.1fs", key, delay)
            finally:
                self.progress.finished()
                self.queue.done(key)

"""controller-runtime's reconcile and work-queue series, as the manager records them."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from controller.reconciler.manager import Manager
from controller.reconciler.settings import ControllerSettings
from controller.serve.reconcile_metrics import CONTROLLER, ReconcileMetrics
from controller.temporal.client import TemporalSettings
from decisionmodel.rollout.settings import RolloutSettings


def sample(registry: CollectorRegistry, series: str, **labels: str) -> float | None:
    return registry.get_sample_value(series, labels)


def test_every_series_exists_at_zero_from_the_start() -> None:
    registry = CollectorRegistry()
    ReconcileMetrics(registry, queue_depth=lambda: 3)
    for result in ("success", "error", "requeue_after"):
        assert (
            sample(
                registry, "controller_runtime_reconcile_total", controller=CONTROLLER, result=result
            )
            == 0.0
        )
    assert sample(registry, "controller_runtime_reconcile_errors_total", controller=CONTROLLER) == 0
    assert sample(registry, "workqueue_retries_total", name=CONTROLLER) == 0.0
    assert sample(registry, "workqueue_depth", name=CONTROLLER) == 3.0


def test_an_error_counts_as_error_and_retry() -> None:
    registry = CollectorRegistry()
    m = ReconcileMetrics(registry, queue_depth=lambda: 0)
    m.observe(0.02, "success")
    m.observe(0.3, "error")
    m.observe(0.01, "requeue_after")
    total = "controller_runtime_reconcile_total"
    assert sample(registry, total, controller=CONTROLLER, result="success") == 1.0
    assert sample(registry, total, controller=CONTROLLER, result="error") == 1.0
    assert sample(registry, total, controller=CONTROLLER, result="requeue_after") == 1.0
    assert sample(registry, "controller_runtime_reconcile_errors_total", controller=CONTROLLER) == 1
    assert sample(registry, "workqueue_retries_total", name=CONTROLLER) == 1.0
    time_count = "controller_runtime_reconcile_time_seconds_count"
    assert sample(registry, time_count, controller=CONTROLLER) == 3.0
    bucket = "controller_runtime_reconcile_time_seconds_bucket"
    assert sample(registry, bucket, controller=CONTROLLER, le="0.025") == 2.0


class FlakyReconciler:
    """Fails its first reconcile of every key, then asks to be re-checked in an hour."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def reconcile(self, namespace: str, name: str) -> float | None:
        key = f"{namespace}/{name}"
        self.seen.append(key)
        if self.seen.count(key) == 1:
            raise RuntimeError("the API server said 500")
        return 3600.0


async def test_the_manager_records_each_reconcile_with_its_result() -> None:
    manager = Manager(
        ControllerSettings(leader_election=False),
        RolloutSettings(),
        TemporalSettings(),
    )
    manager.queue = type(manager.queue)(base_delay=0.01, max_delay=0.01)
    registry = CollectorRegistry()
    manager.reconciles = ReconcileMetrics(registry, lambda: len(manager.queue))
    reconciler = FlakyReconciler()
    manager.queue.add("team-a/router")
    worker = asyncio.create_task(manager._work(reconciler))  # type: ignore[arg-type]
    try:
        for _ in range(200):
            if len(reconciler.seen) >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        worker.cancel()
    assert reconciler.seen == ["team-a/router", "team-a/router"]
    total = "controller_runtime_reconcile_total"
    assert sample(registry, total, controller=CONTROLLER, result="error") == 1.0
    assert sample(registry, total, controller=CONTROLLER, result="requeue_after") == 1.0

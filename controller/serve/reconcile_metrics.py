"""controller-runtime's reconcile and work-queue series, under controller-runtime's names.

Seed 004's operator alerts (reconcile errors, operator down) and the dashboards platform teams
already run for Go operators query these names; a Python controller that exports them fits in
unchanged. Label values: `controller="decisionmodel"`, `name="decisionmodel"` for the queue.

Every series exists from start-up at 0 (as controller-runtime initialises them), so
`absent(controller_runtime_reconcile_total)` means "no controller is exporting", and a rate over
`controller_runtime_reconcile_errors_total` starts from a known zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

CONTROLLER: Final = "decisionmodel"
Result = Literal["success", "error", "requeue_after"]
RESULTS: Final[tuple[Result, ...]] = ("success", "error", "requeue_after")
# controller-runtime's reconcile_time buckets (v0.15+): 5 ms … 60 s.
RECONCILE_TIME_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
    40, 50, 60,
)  # fmt: skip


class ReconcileMetrics:
    def __init__(self, registry: CollectorRegistry, queue_depth: Callable[[], int]) -> None:
        self.total = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller.",
            ["controller", "result"],
            registry=registry,
        )
        self.errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller.",
            ["controller"],
            registry=registry,
        )
        self.time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller.",
            ["controller"],
            buckets=RECONCILE_TIME_BUCKETS,
            registry=registry,
        )
        self.depth = Gauge(
            "workqueue_depth", "Current depth of workqueue.", ["name"], registry=registry
        )
        self.retries = Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue.",
            ["name"],
            registry=registry,
        )
        self.depth.labels(CONTROLLER).set_function(lambda: float(queue_depth()))
        for result in RESULTS:
            self.total.labels(CONTROLLER, result)
        self.errors.labels(CONTROLLER)
        self.time.labels(CONTROLLER)
        self.retries.labels(CONTROLLER)

    def observe(self, seconds: float, result: Result) -> None:
        """One reconcile ended: `error` also counts an error and a work-queue retry."""
        self.total.labels(CONTROLLER, result).inc()
        self.time.labels(CONTROLLER).observe(seconds)
        if result == "error":
            self.errors.labels(CONTROLLER).inc()
            self.retries.labels(CONTROLLER).inc()

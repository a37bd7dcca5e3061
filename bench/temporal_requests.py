"""What the product asks of the Temporal frontend, from the dev server's own counters.

``temporal server start-dev`` serves Prometheus metrics (localenv/temporal.py fixes the port);
``service_requests{service_name="frontend", operation=...}`` counts every RPC the frontend
served. A snapshot before and after a window gives requests per operation. The workers' task
polls (long polls, a fixed number per worker whatever the fleet) are told apart from the rest,
which is what the controller asks: describes, lists, counts, starts, system info.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

# RPCs of a worker polling its task queues and answering tasks: there whatever the fleet.
WORKER_OPERATIONS = frozenset(
    {
        "PollWorkflowTaskQueue",
        "PollActivityTaskQueue",
        "PollNexusTaskQueue",
        "RespondWorkflowTaskCompleted",
        "RespondActivityTaskCompleted",
        "RespondActivityTaskFailed",
        "RecordActivityTaskHeartbeat",
        "RecordWorkerHeartbeat",
        "ShutdownWorker",
    }
)


def frontend_requests(metrics_url: str) -> Counter[str]:
    """Requests the frontend has served so far, by operation."""
    with httpx.Client(trust_env=False, timeout=10) as http:
        text = http.get(metrics_url).text
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name not in ("service_requests", "service_requests_total"):
            continue
        for sample in family.samples:
            labels = sample.labels
            # The server's own system workers poll in temporal-system: not ours to count.
            if (
                labels.get("service_name") == "frontend"
                and labels.get("namespace") != "temporal-system"
                and not sample.name.endswith("_created")
            ):
                counts[labels.get("operation", "?")] += int(sample.value)
    return counts


@dataclass(frozen=True)
class TemporalIdle:
    seconds: float
    by_operation: dict[str, int]

    @property
    def product_per_second(self) -> float:
        """Requests not from the workers' polls: what the controller (and the fleet) cost."""
        n = sum(v for k, v in self.by_operation.items() if k not in WORKER_OPERATIONS)
        return n / self.seconds

    @property
    def polls_per_second(self) -> float:
        n = sum(v for k, v in self.by_operation.items() if k in WORKER_OPERATIONS)
        return n / self.seconds


def between(before: Counter[str], after: Counter[str], seconds: float) -> TemporalIdle:
    diff = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) > 0}
    return TemporalIdle(seconds=seconds, by_operation=diff)

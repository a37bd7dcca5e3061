"""Every Prometheus series a worker serves follows one convention (issue 38, item 7): names
in snake case under a known prefix (dmrollout's own ``decisionmodel_``, the reference's; the
SDK's ``temporal_``; controller-runtime's where they mirror it), durations in seconds with the
unit in the name, counters ending in ``_total``. Read from a real worker's SDK exporter after
a rollout ran (no list typed here), and from the controller's and worker's registries."""

from __future__ import annotations

import re
import socket
import urllib.request
import uuid

from harness.workflow_fakes import FakeCluster, make_input
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from temporalio.worker import Worker

from controller.serve.metrics import ControllerMetrics
from controller.serve.reconcile_metrics import ReconcileMetrics
from controller.temporal.client import TemporalSettings, connect, make_runtime
from controller.worker.run import WorkerMetrics
from localenv.temporal import TemporalDevServer
from workflows.rollout import RolloutWorkflow

PREFIXES = ("decisionmodel_", "temporal_", "controller_runtime_", "workqueue_")
# A duration's name says its unit, and it is seconds.
NOT_SECONDS = re.compile(r"_(ms|millis|milliseconds|latency|duration)$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def problems(families: list[tuple[str, str, str]]) -> list[str]:
    """(name, type, unit) → what breaks the convention."""
    found = []
    for name, kind, _ in families:
        if not name.startswith(PREFIXES):
            found.append(f"{name}: no known prefix")
        if NOT_SECONDS.search(name):
            found.append(f"{name}: a duration not named in seconds")
        timed = any(word in name for word in ("latency", "duration", "time"))
        if kind == "histogram" and timed and not name.endswith("_seconds"):
            found.append(f"{name}: a duration histogram without _seconds")
    return found


def registry_families(registry: CollectorRegistry) -> list[tuple[str, str, str]]:
    return [(f.name, f.type, f.unit) for f in registry.collect()]


async def test_the_sdk_series_of_a_worker_follow_the_convention(
    temporal_server: TemporalDevServer,
) -> None:
    port = free_port()
    settings = TemporalSettings(
        address=temporal_server.address, metrics_bind_address=f"127.0.0.1:{port}"
    )
    client = await connect(settings, make_runtime(settings))
    queue = f"named-{uuid.uuid4().hex[:8]}"
    cluster = FakeCluster()
    async with Worker(
        client, task_queue=queue, workflows=[RolloutWorkflow], activities=cluster.activities()
    ):
        inp = make_input()
        handle = await client.start_workflow(
            RolloutWorkflow.run, inp, id=f"rollout/{uuid.uuid4().hex}", task_queue=queue
        )
        await handle.result()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    families = [(f.name, f.type, f.unit) for f in text_string_to_metric_families(text)]
    names = {f[0] for f in families}
    assert "temporal_workflow_task_execution_failed" in names or any(
        n.startswith("temporal_workflow_completed") for n in names
    ), sorted(names)
    assert any(n.endswith("_seconds") for n in names), sorted(names)
    assert problems(families) == [], sorted(names)
    counters = [n for n, kind, _ in families if kind == "counter"]
    samples = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert all(f"{c}_total" in samples for c in counters), sorted(samples)


def test_dmrollouts_own_series_follow_the_convention() -> None:
    controller = ControllerMetrics()
    ReconcileMetrics(controller.registry, queue_depth=lambda: 0)
    worker = WorkerMetrics()
    assert problems(registry_families(controller.registry)) == []
    assert problems(registry_families(worker.registry)) == []

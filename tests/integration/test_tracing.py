"""Issue 13, point 5: with the standard OTEL_* variables set, one trace runs from the
controller's reconcile through StartWorkflow, the rollout workflow and its activities, exported
over OTLP/HTTP (to a receiver in this test's network namespace)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from temporalio.worker import Worker
from test_rollout_workflow_logic import FakeCluster, make_input

from controller.reconciler.reconcile import reconcile_attributes
from controller.serve import tracing
from controller.serve.cicd_spans import CicdSpanInterceptor
from controller.temporal.client import TemporalSettings, connect
from controller.temporal.rollouts import Rollouts
from controller.worker.run import worker_interceptors
from localenv.temporal import TemporalDevServer
from workflows.rollout import RolloutWorkflow


@dataclass
class Receiver:
    spans: list[tuple[str, bytes, bytes, bytes]] = field(
        default_factory=list
    )  # name, trace, id, parent
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)  # by span name

    async def handle(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                for s in scope.spans:
                    self.spans.append((s.name, s.trace_id, s.span_id, s.parent_span_id))
                    self.attributes[s.name] = {a.key: a.value.string_value for a in s.attributes}
        return web.Response(status=200)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, int]]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/v1/traces", found.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield found, int(port)
    await runner.cleanup()


def test_off_without_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*tracing.ENDPOINT_VARS, "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    assert tracing.tracing_interceptors("x") == []
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing.tracing_enabled()


async def test_one_trace_from_reconcile_to_activities(
    temporal_server: TemporalDevServer,
    receiver: tuple[Receiver, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found, port = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    interceptors = tracing.tracing_interceptors("dmrollout-test")
    assert interceptors, "OTEL_EXPORTER_OTLP_ENDPOINT set: tracing is on"
    client = await connect(TemporalSettings(address=temporal_server.address), None, interceptors)
    queue = f"traced-{uuid.uuid4().hex[:8]}"
    cluster = FakeCluster()
    inp = make_input()
    interceptors = worker_interceptors(None, "http://ui.example")
    assert [type(i) for i in interceptors] == [CicdSpanInterceptor]
    async with Worker(
        client,
        task_queue=queue,
        workflows=[RolloutWorkflow],
        activities=cluster.activities(),
        interceptors=interceptors,
    ):
        with tracing.span("reconcile", **reconcile_attributes(inp.dm.namespace, inp.dm.name)):
            assert await Rollouts(client, queue).start(inp)
        handle = client.get_workflow_handle(
            f"rollout/{inp.dm.namespace}/{inp.dm.name}/{inp.requested_revision}"
        )
        await handle.result()
    tracing.shutdown_tracing()  # flush what is buffered

    async def all_there() -> None:
        while not {"reconcile", "RunActivity:promote"} <= {s[0] for s in found.spans}:
            await asyncio.sleep(0.1)

    await asyncio.wait_for(all_there(), 30)
    root = next(s for s in found.spans if s[0] == "reconcile")
    in_trace = {s[0] for s in found.spans if s[1] == root[1]}
    assert {
        "StartWorkflow:RolloutWorkflow",
        "RunWorkflow:RolloutWorkflow",
        "StartActivity:resolve",
        "RunActivity:resolve",
        "RunActivity:promote",
    } <= in_trace, sorted(in_trace)
    # OpenTelemetry's CI/CD and deployment conventions (issue 38, item 7).
    dm = f"{inp.dm.namespace}/{inp.dm.name}"
    assert found.attributes["reconcile"]["deployment.name"] == dm
    promote = found.attributes["RunActivity:promote"]
    assert promote["cicd.pipeline.name"] == f"rollout {dm}"
    assert promote["cicd.pipeline.task.name"] == "promote"
    assert promote["cicd.pipeline.task.type"] == "deploy"
    assert promote["cicd.pipeline.task.run.result"] == "success"
    assert promote["deployment.id"] and promote["k8s.namespace.name"] == inp.dm.namespace
    assert promote["cicd.pipeline.run.url.full"].startswith("http://ui.example/namespaces/")
    assert found.attributes["RunActivity:warmup_inspect"]["cicd.pipeline.task.type"] == "test"

"""The real Temporal dev server runs a workflow and knows the rollout search attributes."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from localenv.temporal import TemporalDevServer
    from workflows import search_attributes as sa


@activity.defn
async def greet(name: str) -> str:
    return f"hello {name}"


@workflow.defn
class HelloWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=10)
        )


async def test_workflow_runs_on_dev_server(temporal_server: TemporalDevServer) -> None:
    client = await Client.connect(temporal_server.address)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        result = await client.execute_workflow(
            HelloWorkflow.run, "dm", id=f"hello-{queue}", task_queue=queue
        )
    assert result == "hello dm"


async def test_search_attributes_registered(temporal_server: TemporalDevServer) -> None:
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    client = await Client.connect(temporal_server.address)
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace="default")
    )
    assert {k.name for k in sa.ALL} <= set(resp.custom_attributes)

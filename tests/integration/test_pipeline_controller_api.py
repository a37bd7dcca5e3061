"""The hub's pipeline controller against a real API server and Temporal (issue 34, Pipelines).

- An API server it cannot reach at start-up (connection refused, as a 429 or a 5xx: the
  ``Unavailable`` of kube.errors) is retried with a bounded backoff, not ready meanwhile
  (``/readyz`` 503, ``/healthz`` 200); once it answers, the pipelines are listed and
  reconciled. It used to exit on the first refused list.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.helpers import eventually, scratch_namespace
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from controller.hub.pipelines import PipelineController, PipelineHealth
from controller.serve.health import HealthServer
from decisionmodel.api.pipeline_crd import PIPELINE_CRD_NAME, render_pipeline_crd_yaml
from kube.client import Kube
from localenv.chaos import SilentProxy, kubeconfig_via
from localenv.cluster import LocalCluster
from localenv.temporal import TemporalDevServer


@pytest.fixture(scope="module")
def cluster(local_cluster: LocalCluster) -> LocalCluster:
    local_cluster.kubectl(
        "apply", "--server-side", "--field-manager=dmrollout-crd-test", "-f", "-",
        input=render_pipeline_crd_yaml(),
    )  # fmt: skip
    local_cluster.kubectl(
        "wait", "--for=condition=Established", f"crd/{PIPELINE_CRD_NAME}", "--timeout=60s"
    )
    return local_cluster


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    yield from scratch_namespace(cluster, "dmpc")


@pytest.fixture
async def client(temporal_server: TemporalDevServer) -> AsyncIterator[Client]:
    yield await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)


def apply_pipeline(cluster: LocalCluster, namespace: str, clusters: list[str]) -> None:
    stages: list[dict[str, Any]] = []
    for index, name in enumerate(clusters):
        stage: dict[str, Any] = {"name": f"s{index}", "cluster": name, "namespace": "models"}
        if stages:
            stage["dependsOn"] = [stages[-1]["name"]]
        stages.append(stage)
    doc = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModelPipeline",
        "metadata": {"name": "scoring", "namespace": namespace},
        "spec": {"template": {"spec": {"model": "laya:en"}}, "stages": stages},
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def pipeline_status(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "dmp", "scoring", "-n", namespace, "-o", "json").stdout
    status: dict[str, Any] = json.loads(out).get("status") or {}
    return status


def probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def terminate_runs(client: Client, namespace: str) -> None:
    query = f"WorkflowId STARTS_WITH 'pipeline/{namespace}/'"
    async for run in client.list_workflows(query):
        with contextlib.suppress(RPCError):  # ended already
            await client.get_workflow_handle(run.id).terminate("test over")


async def test_an_api_server_away_at_start_up_is_retried_not_ready_meanwhile(
    cluster: LocalCluster, namespace: str, client: Client, tmp_path: Path
) -> None:
    apply_pipeline(cluster, namespace, [f"nowhere-{uuid.uuid4().hex[:6]}"])
    port = unused_port()  # nothing listens there yet: every connection is refused
    kube = Kube.from_config(str(kubeconfig_via(cluster.kubeconfig, port, tmp_path / "kc")))
    health = PipelineHealth()
    server = HealthServer("127.0.0.1", 0, None, health.ready, health.healthy)
    server.start()
    controller = PipelineController(kube, client, health)
    task = asyncio.create_task(controller.run())
    proxy: SilentProxy | None = None
    try:
        await eventually(
            lambda: task.done() or health.failed_lists >= 2,
            timeout=30,
            what="two refused lists of the pipelines",
        )
        assert not task.done(), f"the controller's loop ended: {task.exception()!r}"
        assert probe(server.port, "/readyz") == 503
        assert probe(server.port, "/healthz") == 200  # backing off is alive
        proxy = SilentProxy("127.0.0.1", cluster.api_port, port=port).start()
        status = await eventually(
            lambda: pipeline_status(cluster, namespace).get("conditions"),
            timeout=60,
            what="the pipeline reconciled once the API server answers",
        )
        assert status[0]["type"] == "Accepted" and status[0]["status"] == "True"
        await eventually(lambda: probe(server.port, "/readyz") == 200, timeout=10)
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        server.stop()
        if proxy is not None:
            proxy.stop()
        await terminate_runs(client, namespace)

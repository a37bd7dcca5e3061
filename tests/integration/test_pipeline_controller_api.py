"""The hub's pipeline controller against a real API server and Temporal (issue 34, Pipelines).

- An API server it cannot reach at start-up (connection refused, as a 429 or a 5xx: the
  ``Unavailable`` of kube.errors) is retried with a bounded backoff, not ready meanwhile
  (``/readyz`` 503, ``/healthz`` 200); once it answers, the pipelines are listed and
  reconciled. It used to exit on the first refused list.
- A new revision whose tag does not resolve shows this revision's stages (Pending, never the
  previous run's Promoted ones) and ``FreightPinned=False`` with the resolve's reason and the
  fix; ``decisionmodel.io/retry`` then runs it again, without a spec change. It used to show
  the previous run's stages, Succeeded, and a failed run could not be retried.
- A stage naming a cluster no worker serves holds the revision's run before it starts
  (``StageWorkersPolling=False/NoStageWorker`` naming the stage, its cluster and the fix;
  no run, nothing applied, not even the earlier stages), and the run starts once a worker
  polls that cluster's queue. It used to start, and the earlier stages rolled out.
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
from harness.kstatus import KStatusChecker
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import Worker

from controller.hub.pipelines import PipelineController, PipelineHealth
from controller.serve.health import HealthServer
from decisionmodel.api.pipeline import stage_task_queue
from decisionmodel.api.pipeline_crd import PIPELINE_CRD_NAME, render_pipeline_crd_yaml
from decisionmodel.pipeline import contracts as p
from decisionmodel.pipeline.status import run_status
from decisionmodel.vocabulary import Reason, StageState
from kube.client import Kube
from kube.pipelines import PIPELINE_STATUS_MANAGER, apply_pipeline_status
from localenv.chaos import SilentProxy, kubeconfig_via
from localenv.cluster import LocalCluster
from localenv.temporal import TemporalDevServer
from workflows.pipeline import PipelineWorkflow


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


def apply_pipeline(
    cluster: LocalCluster, namespace: str, clusters: list[str], model: str = "laya:en"
) -> None:
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
        "spec": {"template": {"spec": {"model": model}}, "stages": stages},
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def pipeline_status(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "dmp", "scoring", "-n", namespace, "-o", "json").stdout
    status: dict[str, Any] = json.loads(out).get("status") or {}
    return status


@pytest.fixture(scope="module")
def kstatus() -> Iterator[KStatusChecker]:
    checker = KStatusChecker()
    yield checker
    checker.close()


def kstatus_is(checker: KStatusChecker, cluster: LocalCluster, namespace: str, want: str) -> bool:
    """kstatus (the library, hack/kstatus) reads the live pipeline as ``want`` (issue 38)."""
    out = cluster.kubectl("get", "dmp", "scoring", "-n", namespace, "-o", "json").stdout
    return checker.check(json.loads(out)).status == want


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


@workflow.defn(name="PipelineStageWorkflow", sandboxed=False)
class StandInStage:
    """A stage cluster's worker, as far as the controller sees it: it polls the stage's queue."""

    @workflow.run
    async def run(self) -> None:
        return None


async def test_a_stage_no_worker_serves_holds_the_run_until_one_does(
    cluster: LocalCluster, namespace: str, client: Client, kstatus: KStatusChecker
) -> None:
    served, missing = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("staging", "nowhere"))
    apply_pipeline(cluster, namespace, [served, missing])
    controller = PipelineController(Kube.from_config(str(cluster.kubeconfig)), client)
    task = asyncio.create_task(controller.run())

    def polling() -> dict[str, Any] | None:
        conditions = pipeline_status(cluster, namespace).get("conditions") or []
        return next((c for c in conditions if c["type"] == "StageWorkersPolling"), None)

    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(
                Worker(client, task_queue=stage_task_queue(served), workflows=[StandInStage])
            )
            held = await eventually(polling, timeout=60, what="StageWorkersPolling")
            # Nothing started, so nothing applied anywhere: not even the served first stage.
            assert not pipeline_status(cluster, namespace).get("workflowId")
            runs = f"WorkflowId STARTS_WITH 'pipeline/{namespace}/'"
            assert [r.id async for r in client.list_workflows(runs)] == []
            assert held["status"] == "False" and held["reason"] == "NoStageWorker"
            # The stage, its cluster, the field and the fix; the stage before it not named.
            assert f"stage s1 (spec.stages[1].cluster '{missing}'" in held["message"]
            assert stage_task_queue(missing) in held["message"] and "s0" not in held["message"]
            assert "no stage rolls out" in held["message"]
            assert "DMROLLOUT_STAGE_CLUSTER" in held["message"]
            assert kstatus_is(kstatus, cluster, namespace, "Failed")  # Stalled: needs a worker
            await stack.enter_async_context(
                Worker(client, task_queue=stage_task_queue(missing), workflows=[StandInStage])
            )
            # The next resync sees the worker: the run starts, the condition turns True.
            status = await eventually(
                lambda: (s := pipeline_status(cluster, namespace)).get("workflowId") and s,
                timeout=90,
                what="the run started once a worker polls the missing cluster's queue",
            )
            assert (await client.get_workflow_handle(status["workflowId"]).describe()).status
            assert (polling() or {}).get("status") == "True"
            assert not kstatus_is(kstatus, cluster, namespace, "Failed")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await terminate_runs(client, namespace)


@workflow.defn(name="PipelineStageWorkflow", sandboxed=False)
class PromotingStage:
    """A stage cluster whose rollout promotes at once."""

    @workflow.run
    async def run(self, inp: p.StageInput) -> p.StageVerdict:
        return p.StageVerdict(state=StageState.PROMOTED, reason="AsExpected")


def hub_activities(kube: Kube, refuse: dict[str, str | None]) -> list[object]:
    """The hub worker's: a registry that answers the tag or refuses it with ``refuse["reason"]``,
    and the real status write (run_status, applied under the run's field manager)."""

    @activity.defn(name=p.RESOLVE_FREIGHT)
    async def resolve(inp: p.ResolveFreightInput) -> p.Freight:
        if refuse["reason"]:
            raise ApplicationError(
                f"{inp.model}: the registry has no such tag", type=refuse["reason"]
            )
        return p.Freight(model=inp.model, digest="a" * 64)

    @activity.defn(name=p.RECORD_PIPELINE)
    async def record(rec: p.PipelineRecord) -> None:
        ref = rec.pipeline
        await Kube.run(
            apply_pipeline_status, kube, ref.namespace, ref.name, ref.uid, run_status(rec),
            PIPELINE_STATUS_MANAGER,
        )  # fmt: skip

    return [resolve, record]


def freight_pinned(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    conditions = pipeline_status(cluster, namespace).get("conditions") or []
    return next((c for c in conditions if c["type"] == "FreightPinned"), {})


async def test_a_tag_that_does_not_resolve_shows_its_revision_failing_and_a_retry_runs_it(
    cluster: LocalCluster, namespace: str, client: Client, kstatus: KStatusChecker
) -> None:
    stage_cluster = f"staging-{uuid.uuid4().hex[:6]}"
    kube = Kube.from_config(str(cluster.kubeconfig))
    refuse: dict[str, str | None] = {"reason": None}
    controller = PipelineController(kube, client)
    task = asyncio.create_task(controller.run())
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(
                Worker(
                    client, task_queue=stage_task_queue(stage_cluster), workflows=[PromotingStage]
                )
            )
            await stack.enter_async_context(
                Worker(
                    client,
                    task_queue=p.HUB_TASK_QUEUE,
                    workflows=[PipelineWorkflow],
                    activities=hub_activities(kube, refuse),
                )
            )
            apply_pipeline(cluster, namespace, [stage_cluster])
            first = await eventually(
                lambda: (
                    (s := pipeline_status(cluster, namespace)).get("phase") == "Succeeded" and s
                ),
                timeout=90,
                what="the first revision's run promoted its stage",
            )
            # kstatus: Current once the run succeeded (the controller's next reconcile).
            await eventually(
                lambda: kstatus_is(kstatus, cluster, namespace, "Current"), 60, what="Current"
            )
            refuse["reason"] = Reason.MODEL_NOT_FOUND
            apply_pipeline(cluster, namespace, [stage_cluster], model="laya:gone")
            failing = await eventually(
                lambda: (
                    freight_pinned(cluster, namespace).get("status") == "False"
                    and pipeline_status(cluster, namespace)
                ),
                timeout=60,
                what="FreightPinned=False on the new revision",
            )
            assert failing["revision"] != first["revision"]
            assert failing["phase"] == "Failed"
            assert [s["state"] for s in failing["stages"]] == ["Pending"]  # not Promoted
            assert "freight" not in failing  # not the previous run's
            pinned = freight_pinned(cluster, namespace)
            assert pinned["reason"] == Reason.MODEL_NOT_FOUND
            assert "laya:gone" in pinned["message"]
            assert "dmrollout pipeline retry scoring" in pinned["message"]
            await eventually(
                lambda: kstatus_is(kstatus, cluster, namespace, "Failed"), 60, what="Failed"
            )
            # The tag is published; a retry (no spec change) runs the revision again.
            refuse["reason"] = None
            cluster.kubectl(
                "annotate", "dmp", "scoring", "-n", namespace, "decisionmodel.io/retry=1"
            )
            retried = await eventually(
                lambda: (
                    (s := pipeline_status(cluster, namespace)).get("phase") == "Succeeded" and s
                ),
                timeout=90,
                what="the retried run promoted its stage",
            )
            assert retried["revision"] == failing["revision"]
            assert retried["workflowId"].startswith(f"{failing['workflowId']}/")
            assert retried["lastRetryToken"] == "1"
            assert freight_pinned(cluster, namespace)["status"] == "True"
            await eventually(
                lambda: kstatus_is(kstatus, cluster, namespace, "Current"), 60, what="Current"
            )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await terminate_runs(client, namespace)

"""What one chaos cell runs on: its namespace, models, a worker and a controller of its own.

Each cell gets a fresh namespace, a model repository of its own in the registry simulator, and
its own ``dmrollout worker`` and ``dmrollout controller`` processes on a task queue of their
own, watching only that namespace (their own Lease too). So a cell's faults and kills reach
nobody else's rollout, and no process carries a previous cell's state.

Both processes are supervised as a Deployment's containers are: a process that exits (the
controller when it loses its Lease, the worker when Temporal goes away) is started again after
a short backoff. A fault that kills one holds it down until the fault heals.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_matrix import Cell, FaultKind, Step
from chaos_observe import WATCH_TIMEOUTS
from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import (
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    golden_jsonl,
    put_model,
)
from harness.supervised import Supervised, free_port, supervise
from temporalio.client import Client, WorkflowHandle

from controller.temporal.rollouts import dm_query
from decisionmodel.rollout.contracts import RolloutOutcome
from kube.client import Kube
from localenv.cgroups import WorkerCgroup
from localenv.chaos import (
    ApiServerStopped,
    Fault,
    OomKilled,
    ProcessKilled,
    RegistryErrors,
    RuntimeUnreachable,
    SilentApiServer,
    SilentProxy,
    SilentRuntime,
    TemporalStopped,
    Together,
    kubeconfig_via,
)
from localenv.cluster import API_PORT, LocalCluster
from localenv.env import REGISTRY_URL
from localenv.identities import CONTROLLER, WORKER
from localenv.temporal import TemporalDevServer

DM = "chaos"
EVAL_CASES = 40
EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.50",
}
# The controller fixture's figures (tests/e2e/controller/conftest.py): restarts and the reaper
# quick enough for a test.
CONTROLLER_ENV = {
    "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": "10",
    "DMROLLOUT_CONTROLLER_MAX_ROLLOUT_RESTARTS": "2",
    "DMROLLOUT_CONTROLLER_RESTART_BACKOFF_SECONDS": "1",
    "DMROLLOUT_CONTROLLER_REAP_GRACE_SECONDS": "15",
}
REAP_GRACE_SECONDS = 15.0
# The grace cell's promotion grace: long enough to land a fault in it, short enough for the
# deletion of the previous revision to run into a 60 s fault. Not 10 s: kube-apiserver's
# graceful stop takes about that long, and the fault (in once the API server is down) landed
# 0.1 s after the timer fired, in the deletion (apiserver_stop/grace, make chaos on 0532f9c).
GRACE_CELL_SECONDS = 30
OTHER_GRACE_SECONDS = 2


@dataclass
class NodeHold:
    """Keeps the candidate's serving Pods Pending (tests/e2e/test_durability.py's NodeHold):
    every revision's Pods select ``key=true``; the nodes carry it except while held."""

    cluster: LocalCluster
    key: str

    @property
    def selector(self) -> dict[str, str]:
        return {self.key: "true"}

    def release(self) -> None:
        for node in self.cluster.nodes:
            self.cluster.kubectl("label", "node", node.name, "--overwrite", f"{self.key}=true")

    def engage(self) -> None:
        for node in self.cluster.nodes:
            self.cluster.kubectl("label", "node", node.name, f"{self.key}-", check=False)


class CellRig:
    def __init__(
        self,
        cell: Cell,
        cluster: LocalCluster,
        temporal: TemporalDevServer,
        client: Client,
        logs: Path,
    ) -> None:
        self.cell = cell
        self.cluster = cluster
        self.temporal = temporal
        self.client = client
        self.logs = logs
        suffix = uuid.uuid4().hex[:8]
        self.queue = f"chaos-{suffix}"
        self.repo = f"chaos-{suffix}"
        self.h = RolloutHarness(cluster, client, self.queue, namespace=f"chaos-{suffix}")
        self.nodes = NodeHold(cluster, f"chaos.dmrollout.dev/hold-{suffix}")
        # Reads of the cell's observers: short timeouts, a down API costs a sample only.
        self.kube = Kube.from_config(str(cluster.kubeconfig), WATCH_TIMEOUTS)
        self.proxy: SilentProxy | None = None
        self.cgroup = WorkerCgroup(self.queue) if cell.fault.needs_cgroup else None
        self.processes: list[Supervised] = []
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def namespace(self) -> str:
        return self.h.namespace

    # -- set up and tear down -----------------------------------------------------------------
    def start(self) -> None:
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir(parents=True)
        put_model(self.repo, "v1", accuracy=0.9, revision=f"{self.repo}-v1")
        put_model(self.repo, "v2", accuracy=0.9, revision=f"{self.repo}-v2")
        self.h.golden_configmap("golden", golden_jsonl(EVAL_CASES))
        self.nodes.release()
        if self.cgroup is not None:
            self.cgroup.create()
        # The product's own ServiceAccounts (as in a cluster): their requests are in the API
        # server's audit log, where the cell counts objects created twice (chaos_proof).
        worker = self.cluster.component_kubeconfig(WORKER)
        controller = self.cluster.component_kubeconfig(CONTROLLER)
        if self.cell.fault is FaultKind.SILENT or self.cell.step is Step.PROMOTE:
            # Only the product's processes go through the proxy: the test, the simulators and
            # the control plane keep talking to the API server directly. Silent: the fault;
            # slow: the promote step's hold.
            self.proxy = SilentProxy("127.0.0.1", API_PORT).start()
            port = self.proxy.port
            worker = kubeconfig_via(worker, port, self.logs / "kubeconfig-worker")
            controller = kubeconfig_via(controller, port, self.logs / "kubeconfig-controller")
        self.processes = [
            Supervised("worker", self._worker(worker)),
            Supervised("controller", self._controller(controller)),
        ]
        for p in self.processes:
            p.start()
        self._supervisor = asyncio.create_task(supervise(self.processes))

    @property
    def worker(self) -> Supervised:
        return self.processes[0]

    @property
    def controller(self) -> Supervised:
        return self.processes[1]

    def _worker(self, kubeconfig: Path) -> WorkerProcess:
        wrap = self.cgroup.join_argv if self.cgroup is not None else None
        proc = WorkerProcess(self.cluster, self.temporal.address, self.queue, self.logs, wrap=wrap)
        proc.env["DMROLLOUT_KUBECONFIG"] = str(kubeconfig)
        return proc

    def _controller(self, kubeconfig: Path) -> ControllerProcess:
        grace = GRACE_CELL_SECONDS if self.cell.step is Step.GRACE else OTHER_GRACE_SECONDS
        return ControllerProcess(
            self.cluster,
            self.temporal.address,
            self.queue,
            self.logs,
            health_port=free_port(),
            identity=self.queue,
            extra_args=("--watch-namespaces", self.namespace),
            extra_env={
                **CONTROLLER_ENV,
                "DMROLLOUT_KUBECONFIG": str(kubeconfig),
                "DMROLLOUT_CONTROLLER_LEASE_NAME": self.queue,
                "DMROLLOUT_CONTROLLER_PROMOTION_GRACE_SECONDS": str(grace),
            },
        )

    async def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
        for p in reversed(self.processes):
            await asyncio.to_thread(p.stop)
        if self.proxy is not None:
            self.proxy.stop()
        if self.cgroup is not None:
            self.cgroup.remove()
        self.nodes.engage()
        self.cluster.kubectl("delete", "namespace", self.namespace, "--wait=false", check=False)

    # -- the fault ------------------------------------------------------------------------------
    def fault(self) -> Fault:
        kind, seconds = self.cell.fault, self.cell.seconds
        if kind is FaultKind.APISERVER:
            return ApiServerStopped(self.cluster)
        if kind is FaultKind.TEMPORAL:
            return TemporalStopped(self.temporal)
        if kind is FaultKind.REGISTRY:
            return RegistryErrors(REGISTRY_URL)
        if kind is FaultKind.WORKER:
            return ProcessKilled(self.worker, "worker_kill")
        if kind is FaultKind.CONTROLLER:
            return ProcessKilled(self.controller, "controller_kill")
        if kind is FaultKind.OOM:
            assert self.cgroup is not None
            return OomKilled(self.worker, self.cgroup)
        if kind is FaultKind.RUNTIME:
            assert self.cgroup is not None
            return RuntimeUnreachable(self.cgroup, [n.pod_cidr for n in self.cluster.nodes])
        assert self.proxy is not None
        runtime = SilentRuntime(self.cluster, self.namespace, seconds, self.stable_pods)
        return Together("silent_peers", [SilentApiServer(self.proxy), runtime])

    def stable_pods(self) -> list[str]:
        stable = (self.h.status(DM).get("stableRevision") or {}).get("hash")
        return [p["metadata"]["name"] for p in self.h.pods(DM, stable)] if stable else []

    # -- the rollouts -------------------------------------------------------------------------
    async def roll_stable(self) -> dict[str, Any]:
        spec = {
            "model": f"{self.repo}:v1",
            "replicas": 1,
            "scheduling": {"nodeSelector": self.nodes.selector},
        }
        self.h.create_dm(DM, spec)
        await eventually(lambda: self.h.status(DM).get("phase") == "Ready", 180, 0.5, "stable")
        return self.h.status(DM)

    async def rollout_ids(self) -> set[str]:
        return {wf.id async for wf in self.client.list_workflows(dm_query(self.namespace, DM))}

    async def trigger(self, known: set[str]) -> WorkflowHandle[Any, RolloutOutcome]:
        """Change the model to v2 (evaluated; Manual promotion for the approval steps); the
        handle of the rollout the controller starts for it."""
        rollout: dict[str, Any] = {"evaluation": EVALUATION}
        if self.cell.step.manual:
            rollout["promotion"] = "Manual"
        self.h.update_spec(DM, {"model": f"{self.repo}:v2", "rollout": rollout})

        async def started() -> str:
            new = await self.rollout_ids() - known
            assert len(new) == 1, new
            return new.pop()

        wid = await async_assert_eventually(started, 60, 0.2, "the candidate's rollout")
        return self.client.get_workflow_handle(wid, result_type=RolloutOutcome)

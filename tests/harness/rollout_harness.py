"""Shared pieces of the rollout tests: the CRD, a DecisionModel per test, workers, the registry.

Everything is real: the local control plane with kwok and the fake kubelet, the Temporal dev
server, the runtime and registry simulators, the product's activities and workflow.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from controller.worker.run import build_worker
from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import RolloutInput, RolloutOutcome, RolloutTuning, workflow_id
from decisionmodel.rollout.dispatch import DispatchSettings, rollout_input
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from localenv.cluster import LocalCluster
from localenv.env import REGISTRY_HOST, REGISTRY_URL
from localenv.identities import CONTROLLER, SYSTEM_NAMESPACE, WORKER
from simulators.answers import make_golden_set
from workflows.rollout import RolloutWorkflow

CRD_FILE = Path(__file__).resolve().parents[2] / "deploy/crd/decisionmodels.decisionmodel.io.yaml"
SIM_PREFIX = "sim.dmrollout.dev/"
ROOT = Path(__file__).resolve().parents[2]
LEADER_ELECTION_ROLE = ROOT / "deploy/core/leader_election_role.yaml"


def install_crd(cluster: LocalCluster) -> None:
    """The CRD and, as a cluster admin installs them with it, the admission policies that hold
    the components' ServiceAccounts (deploy/admission): every rollout here passes them."""
    from harness.shipped import kustomize

    cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    cluster.apply(kustomize("deploy/admission"))
    cluster.kubectl(
        "wait", "--for", "condition=established", "--timeout=60s",
        "crd/decisionmodels.decisionmodel.io",
    )  # fmt: skip


# --- the components' identities and their shipped RBAC ---------------------------------------
# The worker and the controller reach the API server as their own ServiceAccounts (never the
# admin certificate), holding only what deploy/namespaced grants in each namespace a test uses:
# a missing grant fails the test that needs it, and the audit log attributes every request.

_namespaced_rbac: list[dict[str, Any]] = []


def namespaced_rbac() -> list[dict[str, Any]]:
    """deploy/namespaced rendered once (its Roles and RoleBindings, namespace to be set)."""
    if not _namespaced_rbac:
        from harness.shipped import kustomize

        _namespaced_rbac.extend(kustomize("deploy/namespaced"))
    return _namespaced_rbac


def grant_namespaces(cluster: LocalCluster, namespaces: list[str]) -> None:
    """Create the namespaces (if missing) with the shipped per-namespace RBAC in each."""
    docs: list[dict[str, Any]] = []
    for ns in namespaces:
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for obj in namespaced_rbac():
            copy = json.loads(json.dumps(obj))
            copy["metadata"]["namespace"] = ns
            docs.append(copy)
    cluster.apply(docs)


def grant_lease(cluster: LocalCluster, lease: str) -> None:
    """The shipped leader-election Role, for the Lease this controller process elects on."""
    docs = [d for d in yaml.safe_load_all(LEADER_ELECTION_ROLE.read_text()) if d]
    for d in docs:
        d["metadata"]["namespace"] = SYSTEM_NAMESPACE
        if lease != "dmrollout-controller":
            d["metadata"]["name"] = f"{d['metadata']['name']}-{lease}"
        if d["kind"] == "Role":
            for rule in d["rules"]:
                if "resourceNames" in rule:
                    rule["resourceNames"] = [lease]
        else:
            d["roleRef"]["name"] = docs[0]["metadata"]["name"]
    cluster.apply(docs)


def rollout_settings(cluster: LocalCluster) -> RolloutSettings:
    return RolloutSettings(
        kubeconfig=str(cluster.component_kubeconfig(WORKER)),
        ollaya_registry=REGISTRY_URL,
        allowed_registries=[REGISTRY_HOST],
        allow_insecure_registries=True,
        poll_interval_seconds=0.2,
        placement_profile="Strict",  # as worker_env: the e2e placement tests exercise the guard
    )


def worker_env(cluster: LocalCluster, temporal_address: str, task_queue: str) -> dict[str, str]:
    """Environment of a `dmrollout worker` subprocess equal to rollout_settings()."""
    return {
        "DMROLLOUT_KUBECONFIG": str(cluster.component_kubeconfig(WORKER)),
        "DMROLLOUT_OLLAYA_REGISTRY": REGISTRY_URL,
        "DMROLLOUT_ALLOWED_REGISTRIES": json.dumps([REGISTRY_HOST]),
        "DMROLLOUT_ALLOW_INSECURE_REGISTRIES": "true",
        "DMROLLOUT_POLL_INTERVAL_SECONDS": "0.2",
        # The e2e placement tests exercise the guard; Passthrough (the default) is unit-tested.
        "DMROLLOUT_PLACEMENT_PROFILE": "Strict",
        "DMROLLOUT_TEMPORAL_ADDRESS": temporal_address,
        "DMROLLOUT_TEMPORAL_TASK_QUEUE": task_queue,
        # Plain /metrics on the health port (explicit opt-in): several controllers and workers
        # share one network namespace here, and the HTTPS default would have them all on 8443.
        "DMROLLOUT_METRICS_SECURE": "false",
    }


def registry_digest(repo: str, tag: str) -> str:
    with httpx.Client(trust_env=False) as c:
        r = c.get(f"{REGISTRY_URL}/v2/library/{repo}/manifests/{tag}")
        r.raise_for_status()
        return hashlib.sha256(r.content).hexdigest()


def put_model(repo: str, tag: str, **profile: Any) -> str:
    with httpx.Client(trust_env=False) as c:
        r = c.put(f"{REGISTRY_URL}/_sim/models/library/{repo}/{tag}", json=profile)
        r.raise_for_status()
        return str(r.json()["digest"])


def golden_jsonl(n: int, seed: int = 7, marker: str = "") -> str:
    cases = make_golden_set(n, seed=seed)
    if marker:
        for case in cases:
            case["state"] = (
                f"{marker} {case['state']}" if isinstance(case["state"], str) else case["state"]
            )
    return "".join(json.dumps(c) + "\n" for c in cases)


class RolloutHarness:
    """One per test: a fresh namespace, DecisionModels in it, and rollouts driven directly."""

    def __init__(
        self, cluster: LocalCluster, client: Client, task_queue: str, namespace: str | None = None
    ) -> None:
        self.cluster = cluster
        self.client = client
        self.task_queue = task_queue
        self.namespace = namespace or f"ro-{uuid.uuid4().hex[:8]}"
        self.kube = Kube.from_config(str(cluster.kubeconfig))
        grant_namespaces(cluster, [self.namespace])

    # -- objects ---------------------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.cluster.kubectl("-n", self.namespace, *args, input=input).stdout

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        r = self.cluster.kubectl("-n", self.namespace, "get", kind, name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def names(self, kind: str) -> list[str]:
        out = self.kubectl("get", kind, "-o", "json")
        return sorted(i["metadata"]["name"] for i in json.loads(out)["items"])

    def create_dm(
        self, name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        obj = {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "annotations": annotations or {},
            },
            "spec": spec,
        }
        self.cluster.apply(obj)
        return self.dm(name)

    def update_spec(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.kubectl("patch", "dm", name, "--type=merge", "-p", json.dumps({"spec": patch}))
        return self.dm(name)

    def dm(self, name: str) -> dict[str, Any]:
        obj = self.get("dm", name)
        assert obj is not None
        return obj

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.dm(name).get("status") or {}
        return status

    def condition(self, name: str, type_: str) -> dict[str, Any]:
        """The DecisionModel's condition of ``type_`` ({} when it has none)."""
        for c in self.status(name).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return {}

    def held(self, name: str, type_: str, reason: str) -> dict[str, Any] | None:
        """The condition when it is False with ``reason`` (a guard holding a step), else None."""
        found = self.condition(name, type_)
        if (found.get("status"), found.get("reason")) == ("False", reason):
            return found
        return None

    def golden_configmap(self, name: str, jsonl: str) -> None:
        self.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.namespace},
                "data": {"cases.jsonl": jsonl},
            }
        )

    def api_key_secret(self, name: str, value: str) -> None:
        self.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": {"decisionmodel.io/api-key": "true"},
                },
                "stringData": {"token": value},
            }
        )

    # -- rollouts --------------------------------------------------------------------------
    def input_for(self, name: str, **changes: Any) -> RolloutInput:
        dm = DecisionModel.from_k8s(self.dm(name))
        tuning = RolloutTuning(
            heartbeat_timeout_seconds=5, promotion_grace_seconds=2, warmup_timeout_seconds=30
        )
        inp = rollout_input(dm, DispatchSettings(), tuning)
        return inp.model_copy(update=changes) if changes else inp

    async def start(self, inp: RolloutInput) -> WorkflowHandle[Any, RolloutOutcome]:
        return await self.client.start_workflow(
            RolloutWorkflow.run,
            inp,
            id=workflow_id(inp.dm, inp.requested_revision, inp.retry_token),
            task_queue=self.task_queue,
            result_type=RolloutOutcome,
        )

    async def rollout(self, name: str, timeout: float = 120, **changes: Any) -> RolloutOutcome:
        handle = await self.start(self.input_for(name, **changes))
        return await asyncio.wait_for(handle.result(), timeout)

    def pods(self, dm: str, revision: str) -> list[dict[str, Any]]:
        out = self.kubectl(
            "get",
            "pods",
            "-l",
            f"decisionmodel.io/name={dm},decisionmodel.io/revision={revision}",
            "-o",
            "json",
        )
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items


async def connect(address: str) -> Client:
    return await Client.connect(address, data_converter=pydantic_data_converter)


@asynccontextmanager
async def in_process_worker(
    client: Client, cluster: LocalCluster, task_queue: str
) -> AsyncIterator[Worker]:
    settings = rollout_settings(cluster)
    worker = build_worker(client, Kube.from_config(settings.kubeconfig), settings, task_queue)
    async with worker:
        yield worker


class WorkerProcess:
    """`dmrollout worker` as a real process, so a test can SIGKILL it like a crash."""

    def __init__(
        self,
        cluster: LocalCluster,
        temporal_address: str,
        task_queue: str,
        log_dir: Path,
        metrics_port: int | None = None,
        extra_env: dict[str, str] | None = None,
        module: str = "controller.cli",
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        self.env = {
            **os.environ,
            **worker_env(cluster, temporal_address, task_queue),
            **(extra_env or {}),
        }
        # A command the worker runs inside (the chaos cells' cgroup join), or none.
        self.wrap = wrap
        # ``python -m <module> worker``: the product's CLI, or a test build of it.
        self.module = module
        if metrics_port is not None:
            self.env["DMROLLOUT_WORKER_METRICS_PORT"] = str(metrics_port)
            # A deleted DecisionModel's probe series go within seconds (test_controller_steady).
            self.env["DMROLLOUT_WORKER_SERIES_CHECK_SECONDS"] = "3"
        self.metrics_port = metrics_port
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.log_dir / f"worker-{self.starts}.log").open("wb")
        argv = [sys.executable, "-m", self.module, "worker"]
        self.proc = subprocess.Popen(
            self.wrap(argv) if self.wrap is not None else argv,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def metrics(self) -> str:
        """The worker's /metrics text (plain HTTP), or "" while it is not listening yet."""
        assert self.metrics_port is not None, "started without a metrics port"
        try:
            with httpx.Client(trust_env=False) as c:
                return c.get(f"http://127.0.0.1:{self.metrics_port}/metrics").text
        except httpx.TransportError:
            return ""

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class ControllerProcess:
    """`dmrollout controller` as a real process (restartable, killable)."""

    def __init__(
        self,
        cluster: LocalCluster,
        temporal_address: str,
        task_queue: str,
        log_dir: Path,
        health_port: int,
        identity: str = "ctl-a",
        extra_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.env = {
            **os.environ,
            **worker_env(cluster, temporal_address, task_queue),
            "DMROLLOUT_KUBECONFIG": str(cluster.component_kubeconfig(CONTROLLER)),
            "DMROLLOUT_CONTROLLER_IDENTITY": identity,
            "DMROLLOUT_CONTROLLER_LEASE_NAMESPACE": SYSTEM_NAMESPACE,
            "DMROLLOUT_CONTROLLER_LEASE_DURATION_SECONDS": "10",
            "DMROLLOUT_CONTROLLER_RENEW_DEADLINE_SECONDS": "8",
            "DMROLLOUT_CONTROLLER_RETRY_PERIOD_SECONDS": "1",
            "DMROLLOUT_CONTROLLER_HEARTBEAT_TIMEOUT_SECONDS": "5",
            "DMROLLOUT_CONTROLLER_PROMOTION_GRACE_SECONDS": "2",
            **(extra_env or {}),
        }
        self.args = [
            sys.executable, "-m", "controller.cli", "controller",
            "--health-port", str(health_port),
            "--allowed-registries", REGISTRY_HOST,
            "--allow-insecure-registries",
            "--ollaya-registry", REGISTRY_URL,
            *extra_args,
        ]  # fmt: skip
        self.health_port = health_port
        self.identity = identity
        self.cluster = cluster
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        if self.starts == 0:
            grant_lease(self.cluster, self.env.get("DMROLLOUT_CONTROLLER_LEASE_NAME", CONTROLLER))
        self.starts += 1
        log = (self.log_dir / f"controller-{self.identity}-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def lost_its_lease(self) -> bool:
        """The last run exited because it lost its Lease (it says so before it exits)."""
        log = self.log_dir / f"controller-{self.identity}-{self.starts}.log"
        return "leadership lost" in log.read_text(errors="replace")

    def metrics(self) -> str:
        """The /metrics text, or "" while the process is not listening yet."""
        try:
            with httpx.Client(trust_env=False) as c:
                return c.get(f"http://127.0.0.1:{self.health_port}/metrics").text
        except httpx.TransportError:
            return ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

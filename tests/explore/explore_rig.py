"""One lifecycle on the live local environment: its namespace, model repository, golden set,
its own `dmrollout worker` and `dmrollout controller` processes, and what each operation of
``explore_ops`` does there.

Each lifecycle's worker and controller watch only its namespace, on a task queue and a Lease of
their own (as the chaos cells do), so lifecycles run side by side and a kill reaches only its own
processes. Temporal and the API server are shared: their faults (``GLOBAL_KINDS``) are taken one
at a time under :data:`Faults.lock` and every lifecycle's checker sees them in :class:`Faults`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec
from explore_ops import BAD_TAG, GOOD_TAGS, Desired, Op
from harness.decision_records import KEY_SECRET, create_key_secret, grant_records
from harness.refusing_proxy import RefusingProxy
from harness.rollout_harness import (
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    golden_jsonl,
    put_model,
    registry_digest,
)
from harness.supervised import Supervised, free_port, supervise
from temporalio.client import Client

from decisionmodel.engine.render import labels as L
from localenv.chaos import ApiServerStopped, TemporalStopped
from localenv.cluster import LocalCluster
from localenv.temporal import TemporalDevServer
from simulators.pod_faults import PREFIX as SIM

SPEC_KINDS = frozenset(
    {
        "tag",
        "replicas",
        "gate",
        "promotion",
        "resources",
        "unschedulable",
        "pin",
        "manual_promotion_field",
    }
)
# The CLI's verbs that write only the DecisionModel (an annotation), with no Temporal address.
KUBE_ONLY_VERBS = frozenset({"retry", "undo"})
DM = "ex"
DATASET = "golden"
# Markers that must never leave the cluster's Secret and ConfigMap: the invariant "no secret
# value or dataset content in any history, log, Event or status" greps for them.
SECRET_MARKER = "exsecret" + "7f3a91"
DATASET_MARKER = "exdataset" + "c42d08"
EVAL_CASES = 30
CONTROLLER_ENV = {
    "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": "10",
    "DMROLLOUT_CONTROLLER_MAX_ROLLOUT_RESTARTS": "2",
    "DMROLLOUT_CONTROLLER_RESTART_BACKOFF_SECONDS": "1",
    "DMROLLOUT_CONTROLLER_REAP_GRACE_SECONDS": "15",
    "DMROLLOUT_CONTROLLER_PROMOTION_GRACE_SECONDS": "2",
}
_FAULT_VALUES = {
    "digest": "sha256:" + "0" * 64,
    "device": "cpu-fallback",
    "load-fails": "true",
    "unauthorized": "true",
    "latency-ms": "1500",
}


@dataclass
class Faults:
    """What every lifecycle's checker must know: when the last fault of the environment healed,
    and whether one is in force now. One environment fault at a time."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    active: int = 0
    healed_at: float = 0.0
    last: str = ""  # the kind of the last fault healed

    def quiet_for(self) -> float:
        return 0.0 if self.active else time.monotonic() - self.healed_at


class Lifecycle:
    def __init__(
        self,
        cluster: LocalCluster,
        temporal: TemporalDevServer,
        client: Client,
        logs: Path,
        faults: Faults,
    ) -> None:
        self.cluster, self.temporal, self.client, self.faults = cluster, temporal, client, faults
        suffix = uuid.uuid4().hex[:8]
        self.queue = f"ex-{suffix}"
        self.repo = f"ex-{suffix}"
        self.h = RolloutHarness(cluster, client, self.queue, namespace=f"ex-{suffix}")
        # Signed decision records (issue 38) in a namespace of the lifecycle's own, with its
        # key; ``record_key_gone`` deletes the key Secret (a promotion then waits for it).
        self.records_namespace = f"exrec-{suffix}"
        self.records_key = ec.generate_private_key(ec.SECP256R1())
        self.record_key_gone = False
        self.logs = logs
        self.desired = Desired()
        self.processes: list[Supervised] = []
        self.worker: Supervised
        self.controller: Supervised
        self.build = 1
        self.controllers = 0
        self.proxy: RefusingProxy | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self.republished = 0
        self.pinned_digest = ""
        # When this lifecycle's own last fault (a kill, a deletion, a runtime fault) was made or
        # healed, and which runtime fault is in force on its namespace.
        self.touched_at = time.monotonic()
        self.runtime_fault: str | None = None
        self.foreign_service = False
        self.secret_unlabelled = False
        # An undo or a rollback-to since the last spec change: the model may then serve
        # another revision than its spec, on purpose.
        self.undone_after_change = False

    @property
    def namespace(self) -> str:
        return self.h.namespace

    # -- set up and tear down -----------------------------------------------------------------
    def prepare(self) -> None:
        """The lifecycle's objects and processes; blocking (run it in a thread)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        for tag in GOOD_TAGS:
            put_model(self.repo, tag, accuracy=0.9, revision=f"{self.repo}-{tag}")
        put_model(self.repo, BAD_TAG, accuracy=0.3, revision=f"{self.repo}-bad")
        self.h.golden_configmap(DATASET, golden_jsonl(EVAL_CASES, marker=DATASET_MARKER))
        self.h.api_key_secret("runtime-key", SECRET_MARKER)
        grant_records(self.cluster, self.records_namespace)
        create_key_secret(self.cluster, self.records_namespace, self.records_key)
        # The controller reaches Temporal through a proxy of its own, which can refuse its
        # credential (operation temporal_refused) without touching any other lifecycle.
        host, _, port = self.temporal.address.rpartition(":")
        self.proxy = RefusingProxy(host, int(port)).start()
        self.worker, self.controller = self._worker(promote=True), self._controller()
        self.processes = [self.worker, self.controller]
        for p in self.processes:
            p.start()
        self.h.create_dm(DM, self.spec())

    def _worker(self, promote: bool) -> Supervised:
        """A worker of build ``b<self.build>`` of the lifecycle's own Worker Deployment, as the
        chart runs one: the release's build takes new rollouts; a draining one (``promote``
        false) finishes those pinned to it."""
        build = f"b{self.build}"
        # A draining build is the same build started again: a log folder of its own, so that
        # its log does not overwrite the one its first process wrote (the no-secret check
        # reads both).
        logs = self.logs / (build if promote else f"{build}-draining")
        logs.mkdir(parents=True, exist_ok=True)
        env = {
            "DMROLLOUT_WORKER_DEPLOYMENT_NAME": self.queue,
            "DMROLLOUT_WORKER_BUILD_ID": build,
            "DMROLLOUT_WORKER_DRAIN_CHECK_SECONDS": "2",
            "DMROLLOUT_WORKER_PROMOTE_ON_START": "true" if promote else "false",
            "DMROLLOUT_DECISION_RECORDS_NAMESPACE": self.records_namespace,
        }
        proc = WorkerProcess(self.cluster, self.temporal.address, self.queue, logs, extra_env=env)
        return Supervised(f"worker {build}" + ("" if promote else " (draining)"), proc)

    def _controller(self) -> Supervised:
        self.controllers += 1
        assert self.proxy is not None
        controller = ControllerProcess(
            self.cluster,
            self.proxy.address,
            self.queue,
            self.logs,
            health_port=free_port(),
            identity=f"{self.queue}-{self.controllers}",
            extra_args=("--watch-namespaces", self.namespace),
            extra_env={
                **CONTROLLER_ENV,
                "DMROLLOUT_CONTROLLER_LEASE_NAME": self.queue,
                "DMROLLOUT_DECISION_RECORDS_NAMESPACE": self.records_namespace,
            },
        )
        return Supervised(f"controller {self.controllers}", controller)

    def supervise(self) -> None:
        self._supervisor = asyncio.create_task(supervise(self.processes))

    def spec(self) -> dict[str, Any]:
        spec = self.desired.spec(self.repo, DATASET, self.pinned_digest)
        spec["auth"] = {"apiKeySecretRef": {"name": "runtime-key", "key": "token"}}
        return spec

    async def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
        for p in reversed(self.processes):
            await asyncio.to_thread(p.stop)
        if self.proxy is not None:
            await asyncio.to_thread(self.proxy.stop)

    def delete(self) -> None:
        for namespace in (self.namespace, self.records_namespace):
            self.cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

    # -- operations ---------------------------------------------------------------------------
    async def apply(self, op: Op) -> str:
        """Do ``op``; a short line of what happened (for the trace)."""
        if op.kind in ("temporal_stop", "apiserver_pause"):
            return await self._environment_fault(op)
        if op.kind == "wait":
            await asyncio.sleep(float(op.arg))
            return "waited"
        if op.kind == "temporal_refused":
            return await self._credential_refused(float(op.arg))
        if op.kind in ("worker_restart", "controller_restart"):
            self.touched_at = time.monotonic()
            target = self.worker if op.kind == "worker_restart" else self.controller
            await asyncio.to_thread(target.kill)
            await asyncio.to_thread(target.start)
            return f"{target.name} killed and started"
        if op.kind == "worker_upgrade":
            return await asyncio.to_thread(self._upgrade_worker, op.arg == "draining")
        if op.kind == "controller_failover":
            return await self._failover()
        return await asyncio.to_thread(self._apply_sync, op)

    def _apply_sync(self, op: Op) -> str:
        k = op.kind
        if k in SPEC_KINDS:
            if k == "pin":
                self.pinned_digest = registry_digest(self.repo, self.desired.tag)
            self.desired = self.desired.after(op)
            self.undone_after_change = False
            return self._commit()
        if k == "republish":
            self.republished += 1
            self.desired = self.desired.after(op)
            digest = put_model(self.repo, op.arg, accuracy=0.9, revision=f"re{self.republished}")
            return f"{op.arg} now {digest[:19]}"
        if k in ("secret_unlabel", "secret_fix"):
            self.touched_at = time.monotonic()
            self.secret_unlabelled = k == "secret_unlabel"
            label = "decisionmodel.io/api-key" + ("-" if k == "secret_unlabel" else "=true")
            return self._kubectl("label", "secret", "runtime-key", "--overwrite", label)
        if k in ("record_key_gone", "record_key_back"):
            return self._record_key(k == "record_key_gone")
        if k in ("approve", "reject", "abort", "retry", "undo"):
            rc, said = self._cli("promote" if k == "approve" else k)
            self.undone_after_change |= k == "undo" and rc == 0
            return said
        if k == "rollback_to":
            return self._rollback_to(op.arg)
        self.touched_at = time.monotonic()
        if k == "scale":
            stable = self.stable_hash()
            if not stable:
                return "no stable"
            name = L.deployment_name(DM, stable)
            return self._kubectl("scale", "deployment", name, f"--replicas={op.arg}")
        if k == "delete_pod":
            pods = self._pods()
            return self._kubectl("delete", "pod", pods[0], "--wait=false") if pods else "no pod"
        if k == "delete_deployment":
            stable = self.stable_hash()
            if not stable:
                return "no stable"
            name = L.deployment_name(DM, stable)
            return self._kubectl("delete", "deployment", name, "--wait=false")
        return self._apply_foreign_or_runtime(op)

    def _apply_foreign_or_runtime(self, op: Op) -> str:
        if op.kind == "foreign_service":
            if self.get("v1", "services", L.service_name(DM)) is not None:
                return "a Service is there already"
            self.foreign_service = True
            return self._kubectl("create", "service", "clusterip", DM, "--tcp=80:80")
        if op.kind == "foreign_service_gone":
            if not self.foreign_service:
                return "no foreign Service"
            self.foreign_service = False
            return self._kubectl("delete", "service", DM, "--wait=false")
        if op.kind == "runtime_fault":
            self.heal_runtime()
            self.runtime_fault = op.arg
            return self._annotate_namespace(f"{SIM}{op.arg}={_FAULT_VALUES[op.arg]}")
        if op.kind == "runtime_heal":
            return self.heal_runtime() or "no runtime fault"
        raise AssertionError(f"unknown operation {op}")

    def _record_key(self, gone: bool) -> str:
        """The decision records' signing key Secret deleted (a promotion waits, saying so on
        Promoted) or created again."""
        if gone == self.record_key_gone:
            return "key Secret already " + ("gone" if gone else "there")
        self.touched_at = time.monotonic()
        self.record_key_gone = gone
        if gone:
            return self.cluster.kubectl(
                "-n", self.records_namespace, "delete", "secret", KEY_SECRET
            ).stdout.strip()
        create_key_secret(self.cluster, self.records_namespace, self.records_key)
        return "key Secret created again"

    def heal_runtime(self) -> str:
        """Remove the runtime fault; it stays recorded when the API server refused the change
        (another lane's API-server fault), so the final heal removes it (explorer seed 10015:
        a heal refused by a paused API server left the fault on, and the lifecycle was judged
        against a runtime that still answered 401)."""
        if self.runtime_fault is None:
            return ""
        self.touched_at = time.monotonic()
        r = self.cluster.kubectl(
            "annotate", "namespace", self.namespace, f"{SIM}{self.runtime_fault}-", check=False
        )
        if r.returncode != 0:
            return f"not healed: {str(r.stderr).strip()[:200]}"
        self.runtime_fault = None
        return str(r.stdout).strip()[:200]

    def faults_on_namespace(self) -> list[str]:
        """The runtime faults the namespace carries now (raises when it cannot be read)."""
        r = self.cluster.kubectl("get", "namespace", self.namespace, "-o", "json", check=False)
        if r.returncode != 0:
            raise RuntimeError(f"namespace {self.namespace} not read: {r.stderr.strip()[:200]}")
        annotations = (json.loads(r.stdout)["metadata"].get("annotations")) or {}
        return sorted(k.removeprefix(SIM) for k in annotations if k.startswith(SIM))

    def api_answers(self) -> bool:
        return self.cluster.kubectl("get", "namespace", self.namespace, check=False).returncode == 0

    def _upgrade_worker(self, draining: bool) -> str:
        """A ``helm upgrade`` to a new worker build: the old build's Pod stops (SIGKILL, as a
        crash-free but impatient rollout of the Deployment may do) and the new one starts.
        With ``draining`` the old build comes back as a draining build (chart value
        ``worker.versioning.draining``), one at a time: the explorer keeps one such build."""
        self.touched_at = time.monotonic()
        old = self.worker
        old.kill()
        self.processes.remove(old)
        said = f"{old.name} stopped"
        if draining and not any("draining" in p.name for p in self.processes):
            drainer = self._worker(promote=False)
            drainer.start()
            self.processes.append(drainer)
            said += ", started again draining"
        self.build += 1
        self.worker = self._worker(promote=True)
        self.worker.start()
        self.processes.insert(0, self.worker)
        return f"{said}; {self.worker.name} started"

    async def _failover(self) -> str:
        """A second controller (a new Pod of the Deployment) starts as a standby; then the
        leader is killed, and the standby takes the Lease once it expires."""
        self.touched_at = time.monotonic()
        old = self.controller
        self.controller = self._controller()
        await asyncio.to_thread(self.controller.start)
        self.processes.append(self.controller)
        standby = self.controller.proc
        assert isinstance(standby, ControllerProcess)
        deadline = time.monotonic() + 30
        while not await asyncio.to_thread(standby.metrics) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)  # until the standby's process listens (then it campaigns)
        await asyncio.to_thread(old.kill)
        self.processes.remove(old)
        self.touched_at = time.monotonic()
        return f"{self.controller.name} standing by, {old.name} killed"

    async def _credential_refused(self, seconds: float) -> str:
        """Temporal refuses the controller's credential (UNAUTHENTICATED) for ``seconds``: an
        expired API key or certificate, then its rotation (issue 34)."""
        assert self.proxy is not None
        self.touched_at = time.monotonic()
        await asyncio.to_thread(self.proxy.refuse)
        try:
            await asyncio.sleep(seconds)
        finally:
            await asyncio.to_thread(self.proxy.accept)
            self.touched_at = time.monotonic()
        return f"the controller's credential refused for {seconds:.0f}s"

    async def _environment_fault(self, op: Op) -> str:
        fault: ApiServerStopped | TemporalStopped = (
            TemporalStopped(self.temporal)
            if op.kind == "temporal_stop"
            else ApiServerStopped(self.cluster)
        )
        async with self.faults.lock:
            self.faults.active += 1
            try:
                await asyncio.to_thread(fault.inject)
                await asyncio.sleep(float(op.arg))
            finally:
                await asyncio.to_thread(fault.heal)
                self.faults.active -= 1
                self.faults.healed_at = time.monotonic()
                self.faults.last = op.kind
        return f"{fault.name} for {op.arg}s"

    # -- reads ----------------------------------------------------------------------------------
    # The checker and the settles read every couple of seconds in every lane: straight from the
    # API server, not by a kubectl process each (most of the explorer's CPU before).
    def get(self, api: str, kind: str, name: str) -> dict[str, Any] | None:
        """One object of the lifecycle's namespace (``api`` "v1" or "group/version"), or None
        when it is not there."""
        root = "/api/v1" if api == "v1" else f"/apis/{api}"
        found = self.cluster.api_read(f"{root}/namespaces/{self.namespace}/{kind}/{name}")
        return dict(found) if found is not None else None

    def items(self, api: str, kind: str, selector: str = "") -> list[dict[str, Any]]:
        root = "/api/v1" if api == "v1" else f"/apis/{api}"
        query = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        listed = self.cluster.api_get(f"{root}/namespaces/{self.namespace}/{kind}{query}")
        return list(listed["items"])

    def dm(self) -> dict[str, Any] | None:
        """The DecisionModel, or None when it is not there or cannot be read now."""
        try:
            return self.get("decisionmodel.io/v1alpha1", "decisionmodels", DM)
        except OSError:  # the API server paused or restarting (URLError is an OSError)
            return None

    def stable_hash(self) -> str:
        obj = self.dm() or {}
        return str(((obj.get("status") or {}).get("stableRevision") or {}).get("hash") or "")

    def served_builds(self) -> set[str]:
        """The builds a live worker process of this lifecycle runs."""
        return {
            p.proc.env["DMROLLOUT_WORKER_BUILD_ID"]
            for p in self.processes
            if isinstance(p.proc, WorkerProcess) and p.alive()
        }

    def _pods(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.items("v1", "pods", f"{L.LABEL_NAME}={DM}")]

    # -- helpers --------------------------------------------------------------------------------
    def _commit(self) -> str:
        """Patch the spec as a GitOps tool does: again until the API server takes it."""
        patch = json.dumps({"spec": self.spec()})
        deadline = time.monotonic() + 120
        while True:
            r = self.cluster.kubectl(
                "-n", self.namespace, "patch", "dm", DM, "--type=merge", "-p", patch, check=False
            )
            said = str(r.stdout or r.stderr).strip()[:200]
            if r.returncode == 0 or "6443" not in said or time.monotonic() > deadline:
                return said
            time.sleep(1)

    def _kubectl(self, *args: str) -> str:
        r = self.cluster.kubectl("-n", self.namespace, *args, check=False)
        return (r.stdout or r.stderr).strip().splitlines()[-1:][0] if (r.stdout or r.stderr) else ""

    def _annotate_namespace(self, annotation: str) -> str:
        r = self.cluster.kubectl(
            "annotate", "namespace", self.namespace, "--overwrite", annotation, check=False
        )
        return str(r.stdout or r.stderr).strip()[:200]

    def _rollback_to(self, which: str) -> str:
        """Seed 002: a deliberate rollback to a retained successful revision, by its hash."""
        status = (self.dm() or {}).get("status") or {}
        key = "previousRevision" if which == "previous" else "stableRevision"
        target = (status.get(key) or {}).get("hash")
        if not target:
            return f"no {key}"
        annotation = f"{L.ANNOTATION_ROLLBACK_TO}={target}"
        r = self.cluster.kubectl(
            "-n", self.namespace, "annotate", "dm", DM, "--overwrite", annotation, check=False
        )
        self.undone_after_change |= r.returncode == 0
        return str(r.stdout or r.stderr).strip()[:200]

    def cli(self, verb: str, *extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "controller.cli", verb, DM, "-n", self.namespace]
        argv += ["--kubeconfig", str(self.cluster.kubeconfig)]
        if verb not in KUBE_ONLY_VERBS:
            argv += ["--address", self.temporal.address]
        try:
            return subprocess.run(
                [*argv, *extra], capture_output=True, text=True, timeout=90, check=False
            )
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(argv, 124, "", f"timed out: {e}")

    def _cli(self, verb: str) -> tuple[int, str]:
        r = self.cli(verb)
        said = (r.stdout.strip() or r.stderr.strip()).splitlines()
        return r.returncode, f"rc {r.returncode}: {said[-1] if said else ''}"[:200]

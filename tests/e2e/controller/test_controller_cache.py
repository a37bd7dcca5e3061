"""The controller reads from its watch-fed cache (issue 14, point 2;
controller/machinery/cache.py).

A controller of its own, whose periodic re-inspection is an hour away, so whatever it does here
was driven by a watch event: a stable Pod replaced by its Deployment is gated and counted again
(a Pod event reaches the steady state), and a reconcile of a steady DecisionModel (here caused by
an annotation) sends no read to the API server — the audit log shows no get or list of this
controller in the namespace after its first lists.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.helpers import eventually
from harness.rollout_harness import (
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    grant_namespaces,
)
from temporalio.client import Client

from localenv import audit
from localenv.cluster import LocalCluster
from localenv.env import LocalEnv
from localenv.identities import CONTROLLER, username

NAMESPACE = f"cache-{uuid.uuid4().hex[:6]}"
PORT = 18093
DM = "cached"
GATE = "decisionmodel.io/model-ready"


@pytest.fixture(scope="module")
def cache_controller(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
) -> Iterator[ControllerProcess]:
    grant_namespaces(crd, [NAMESPACE])
    c = ControllerProcess(
        crd,
        local_env.temporal.address,
        ctl_queue,
        ctl_logs,
        health_port=PORT,
        identity="cache-a",
        extra_args=("--watch-namespaces", NAMESPACE),
        extra_env={
            "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": "3600",
            "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-cache-test",
        },
    )
    c.start()
    yield c
    c.stop()


def reconciles(c: ControllerProcess) -> float:
    found = re.findall(r"^controller_runtime_reconcile_total\{[^}]*\} ([0-9.e+]+)$",
                       c.metrics(), re.M)  # fmt: skip
    return sum(float(v) for v in found)


def model_ready(h: RolloutHarness) -> int:
    return int((h.status(DM).get("replicas") or {}).get("modelReady") or 0)


def gated(pod: dict[str, object]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []  # type: ignore[union-attr]
    return any(c.get("type") == GATE and c.get("status") == "True" for c in conds)


async def test_pod_events_reach_the_steady_state_and_a_reconcile_reads_nothing(
    crd: LocalCluster, temporal_client: Client, ctl_queue: str, cache_controller: ControllerProcess
) -> None:
    h = RolloutHarness(crd, temporal_client, ctl_queue, NAMESPACE)
    h.create_dm(DM, {"model": "laya:en", "replicas": 2})
    await eventually(lambda: h.status(DM).get("phase") == "Ready" and model_ready(h) == 2, 150,
                     what="Ready, 2 model-ready")  # fmt: skip
    rev = h.status(DM)["stableRevision"]["hash"]

    # A stable Pod replaced: only its Pod events can get the new one probed and gated now.
    (victim, *_) = [p["metadata"]["name"] for p in h.pods(DM, rev)]
    h.kubectl("delete", "pod", victim, "--wait=false")

    def replaced_and_gated() -> bool:
        pods = [p for p in h.pods(DM, rev) if not p["metadata"].get("deletionTimestamp")]
        names = {p["metadata"]["name"] for p in pods}
        return victim not in names and len(pods) == 2 and all(gated(p) for p in pods)

    await eventually(replaced_and_gated, 90, what="the replacement Pod gated via its events")
    # Settled: the phase the replacement may have moved is written back before the window
    # opens.
    await eventually(lambda: model_ready(h) == 2 and h.status(DM).get("phase") == "Ready", 60,
                     what="counted model-ready again, Ready")  # fmt: skip

    # A reconcile of the steady DecisionModel, from the cache: no get, no list.
    mark = len(audit.read(crd.audit_log))
    before = reconciles(cache_controller)
    h.kubectl("annotate", "dm", DM, "example.com/touched=yes")
    await eventually(lambda: reconciles(cache_controller) >= before + 1, 30,
                     what="a reconcile after the annotation")  # fmt: skip
    mine = [
        r
        for r in audit.read(crd.audit_log)[mark:]
        if r.user == username(CONTROLLER) and r.namespace == NAMESPACE
    ]
    reads = [str(r.use) for r in mine if r.use.verb in ("get", "list")]
    # The one read allowed: a status apply built from the cache that the API server refused as
    # stale (409, the DecisionModel changed meanwhile) is re-read (kube/status.py) and retried.
    refused = [r for r in mine if r.code == 409 and r.use.resource == "decisionmodels/status"]
    dm_get = "get     decisionmodel.io/decisionmodels (namespaced)"
    assert all(r == dm_get for r in reads) and len(reads) <= len(refused), (
        f"the steady state read from the API: {reads}; stale status applies: {len(refused)}"
    )

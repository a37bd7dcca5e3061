"""A post-promotion watch returns traffic to the previous revision as fast as the evidence
allows (issue 34: with all new Pods failing after the switch, the Service went back after
20.5 s, 9 of 21 probes through it failing; Pods that stopped answering were left in the
Service for the whole probe-error window).

Traffic is probed through the Service every second (``harness.service_probe``: every ready
endpoint gets a decision) while every Pod of the new stable fails, two ways: the model lost (the
runtime answers, wrongly: the gates flip False and the Service has no ready endpoint) and 401 on
every request (the runtime does not answer: tolerated, so the Pods stay in the Service). Either
way the previous revision, kept warm for the watch, answers; the Service must not select only
failing Pods for more than about one probe interval.

A controller of its own with the product's watch period (10 s) and a probe-error window of
ERROR_WINDOW s (the default 180 s only makes a regression slower to show).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.helpers import eventually
from harness.rollout_harness import (
    SIM_PREFIX,
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    grant_namespaces,
)
from harness.service_probe import Probe, ServiceProber
from temporalio.client import Client

from decisionmodel.vocabulary import Reason
from localenv.cluster import LocalCluster
from localenv.env import LocalEnv

NAMESPACES = {"model-lost": "watchoutage-0", "unanswered": "watchoutage-1"}
FAULTS = {"model-lost": "lose-model=true", "unanswered": "unauthorized=true"}
ERROR_WINDOW = 60
OLD_MODEL, NEW_MODEL = "laya:en", "laya:multilingual"
# Probes (1 s apart) that may fail: the runtime simulator shows a fault within about a second,
# one look at the Pods, the switch, the EndpointSlice.
MAX_FAILED_PROBES = 3


@pytest.fixture(scope="module")
def outage_controller(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
) -> Iterator[ControllerProcess]:
    grant_namespaces(crd, list(NAMESPACES.values()))
    c = ControllerProcess(
        crd,
        local_env.temporal.address,
        ctl_queue,
        ctl_logs,
        health_port=18099,
        identity="watchoutage",
        extra_args=("--watch-namespaces", ",".join(NAMESPACES.values())),
        extra_env={
            "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-watchoutage",
            "DMROLLOUT_CONTROLLER_PROBE_ERROR_WINDOW_SECONDS": str(ERROR_WINDOW),
        },
    )
    c.start()
    yield c
    c.stop()


def selected(h: RolloutHarness, name: str) -> str | None:
    service = h.get("Service", name) or {}
    return ((service.get("spec") or {}).get("selector") or {}).get("decisionmodel.io/revision")


def answered_by(probe: Probe, revision: str) -> bool:
    """The probe was answered, by Pods of ``revision`` only."""
    return probe.ok and all(f"-{revision}-" in part for part in probe.detail.split("; "))


def served_by(prober: ServiceProber, revision: str, after: float) -> bool:
    return any(answered_by(p, revision) for p in prober.since(after))


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_traffic_returns_at_once_when_every_new_pod_fails_in_the_watch(
    crd: LocalCluster,
    temporal_client: Client,
    ctl_queue: str,
    outage_controller: ControllerProcess,
    fault: str,
) -> None:
    h = RolloutHarness(crd, temporal_client, ctl_queue, NAMESPACES[fault])
    spec = {"model": OLD_MODEL, "replicas": 2, "rollout": {"postPromotionWatch": "10m"}}
    h.create_dm("outage", spec)
    await eventually(lambda: h.status("outage").get("phase") == "Ready", 120, what="Ready")
    old = h.status("outage")["stableRevision"]["hash"]
    h.update_spec("outage", {"model": NEW_MODEL})
    new = await eventually(
        lambda: (
            s["hash"]
            if (s := h.status("outage").get("stableRevision")) and s["hash"] != old
            else None
        ),
        120,
        what="the new revision promoted",
    )
    with ServiceProber(h.kube, h.namespace, "outage", {old: OLD_MODEL, new: NEW_MODEL}) as prober:
        await eventually(lambda: served_by(prober, new, 0), 60, what="traffic on the new Pods")
        assert h.pods("outage", old), "the previous revision must be kept for the watch"

        began = time.monotonic()
        for pod in h.pods("outage", new):
            h.kubectl("annotate", "pod", pod["metadata"]["name"], f"{SIM_PREFIX}{FAULTS[fault]}")
        failed = await eventually(
            lambda: h.status("outage").get("failedRevision"),
            ERROR_WINDOW + 120,
            what="the new revision rolled back",
        )
        await eventually(lambda: served_by(prober, old, began), 60, what="traffic on the old Pods")
        returned = next(p.at for p in prober.since(began) if answered_by(p, old))
        failures = [p for p in prober.since(began) if not p.ok]

    seconds = returned - began
    failed_at = [f"+{p.at - began:.1f}s" for p in failures]
    print(f"{fault}: traffic back after {seconds:.1f}s, {len(failures)} probes failed {failed_at}")
    assert len(failures) <= MAX_FAILED_PROBES, [
        f"+{p.at - began:.1f}s {p.detail}" for p in failures
    ]
    assert failed["hash"] == new and failed["reason"] == Reason.POST_PROMOTION_GATE_FAILED
    assert f"selects revision {old} again" in failed["message"], failed["message"]
    status = h.status("outage")
    assert status["stableRevision"]["hash"] == old
    assert selected(h, "outage") == old

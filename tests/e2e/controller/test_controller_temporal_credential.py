"""Temporal refuses the controller's credential: the stable is looked after meanwhile (issue 34).

An expired or revoked API key or client certificate is not an outage: Temporal answers, with
UNAUTHENTICATED. Before, that answer aborted every reconcile that asked Temporal before its
steady state, and ended the probe task for good, so idle DecisionModels said nothing and a
deleted stable Deployment stayed deleted. A controller of its own reaches Temporal through
``harness.refusing_proxy`` (the dev server accepts any caller), which refuses every call for a
while as a frontend does for an expired key, then accepts again as after the rotation: each
DecisionModel says TemporalReachable=False reason TemporalUnauthorized (naming the address and
the fix) within a reconcile, the deleted stable Deployment is restored, a spec change waits,
and everything goes on by itself once the credential is accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.helpers import eventually
from harness.refusing_proxy import RefusingProxy
from harness.rollout_harness import ControllerProcess, RolloutHarness, WorkerProcess, put_model
from harness.supervised import free_port
from temporalio.client import Client

from localenv.cluster import LocalCluster
from localenv.env import LocalEnv

NAMESPACE = "tcred-0"
# The probe asks every 15 s, and the breaker may first hold a dropped connection for 10 s as
# unreachable; a reconcile follows at once (the probe wakes every DecisionModel).
BOUND = 60

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def proxy(local_env: LocalEnv) -> Iterator[RefusingProxy]:
    host, _, port = local_env.temporal.address.rpartition(":")
    with RefusingProxy(host, int(port)) as p:
        yield p


@pytest.fixture
def refused(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    ctl_queue: str,
    ctl_logs: Path,
    temporal_client: Client,
    proxy: RefusingProxy,
) -> Iterator[tuple[RolloutHarness, ControllerProcess]]:
    """A controller that reaches Temporal through the proxy, on the shared worker's queue (the
    worker's own credential is not the one refused)."""
    harness = RolloutHarness(crd, temporal_client, ctl_queue, NAMESPACE)
    c = ControllerProcess(
        crd,
        proxy.address,
        ctl_queue,
        ctl_logs,
        health_port=free_port(),
        identity="tcred",
        extra_args=("--watch-namespaces", NAMESPACE),
        extra_env={
            "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-tcred",  # not the session controller's
            "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": "10",
        },
    )
    c.start()
    yield harness, c
    c.stop()


def condition(h: RolloutHarness, name: str, type_: str) -> dict[str, Any] | None:
    for c in h.status(name).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def refused_condition(h: RolloutHarness, name: str, address: str) -> dict[str, Any] | None:
    c = condition(h, name, "TemporalReachable")
    if c and c["status"] == "False" and c["reason"] == "TemporalUnauthorized":
        return c if address in c["message"] else None
    return None


def probe_said(c: ControllerProcess, what: str) -> bool:
    """The probe's own log line (controller/temporal/probe.py logs each change it sees): only a
    probe loop that outlived the refusals says that Temporal answers again."""
    log = c.log_dir / f"controller-{c.identity}-{c.starts}.log"
    return what in log.read_text(errors="replace")


def ready_pods(h: RolloutHarness, dm: str, revision: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in h.pods(dm, revision)
        if not p["metadata"].get("deletionTimestamp")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in p.get("status", {}).get("conditions") or []
        )
    ]


async def test_a_refused_credential_is_said_and_the_stable_is_looked_after(
    refused: tuple[RolloutHarness, ControllerProcess], proxy: RefusingProxy
) -> None:
    h, controller = refused
    put_model("laya", "tcred2", revision="tcred2")  # the revision the spec moves to meanwhile
    h.create_dm("idle", {"model": "laya:en", "replicas": 1})
    h.create_dm("cred", {"model": "laya:en", "replicas": 2})
    for name in ("idle", "cred"):
        await eventually(lambda n=name: h.status(n).get("phase") == "Ready", 120, what=name)
    stable = h.status("cred")["stableRevision"]["hash"]
    deployment = f"cred-{stable}"

    proxy.refuse()
    # On every DecisionModel, the idle one too (only the probe asks Temporal for it): the
    # reason of a refused credential, where, and the fix.
    for name in ("idle", "cred"):
        said = await eventually(
            lambda n=name: refused_condition(h, n, proxy.address),
            BOUND,
            what=f"{name}: TemporalReachable=False TemporalUnauthorized naming the address",
        )
        assert "rotate" in said["message"], said
        assert "stable revision is looked after" in said["message"], said

    # The stable Deployment deleted: restored, its new Pods Ready, with Kubernetes alone.
    before = {p["metadata"]["name"] for p in h.pods("cred", stable)}
    h.kubectl("delete", "deployment", deployment, "--wait=true")
    await eventually(
        lambda: (
            h.get("deployment", deployment) is not None
            and len(names := ready_pods(h, "cred", stable)) == 2
            and not before & set(names)
        ),
        BOUND,
        what="the stable Deployment restored and its new Pods Ready",
    )

    # A spec change waits, and says what for; the stable keeps serving.
    h.update_spec("cred", {"model": "laya:tcred2"})
    await eventually(
        lambda: (
            (c := condition(h, "cred", "Reconciling"))
            and c["reason"] == "TemporalUnauthorized"
            and h.status("cred").get("observedGeneration") == h.dm("cred")["metadata"]["generation"]
        ),
        BOUND,
        what="the change observed, waiting for Temporal to accept the controller",
    )
    assert h.status("cred")["stableRevision"]["hash"] == stable
    # A new DecisionModel meanwhile is Pending ("accepted, not yet processed", seed 001), not
    # without a phase (explorer seed 3519), and says why.
    h.create_dm("fresh", {"model": "laya:en", "replicas": 1})
    await eventually(
        lambda: (
            h.status("fresh").get("phase") == "Pending"
            and refused_condition(h, "fresh", proxy.address)
        ),
        BOUND,
        what="fresh: Pending, TemporalReachable=False TemporalUnauthorized",
    )
    assert proxy.refused > 0
    assert controller.proc is not None and controller.proc.poll() is None, "controller exited"
    await eventually(
        lambda: probe_said(controller, "refused the controller's credential"),
        BOUND,
        what="the probe saw the refusal",
    )

    # The credential accepted again: the condition goes by itself, on the idle DecisionModel
    # too (so the probe outlived the refusals), and the waiting rollout runs to its promotion.
    proxy.accept()
    await eventually(
        lambda: probe_said(controller, "Temporal answers again"), BOUND, what="the probe lives"
    )
    await eventually(
        lambda: condition(h, "idle", "TemporalReachable") is None, BOUND, what="idle: cleared"
    )
    await eventually(
        lambda: (h.status("cred").get("stableRevision") or {}).get("model") == "laya:tcred2",
        240,
        what="the waiting rollout promoted",
    )
    await eventually(
        lambda: condition(h, "cred", "TemporalReachable") is None, BOUND, what="cred: cleared"
    )
    await eventually(lambda: h.status("fresh").get("phase") == "Ready", 240, what="fresh: Ready")

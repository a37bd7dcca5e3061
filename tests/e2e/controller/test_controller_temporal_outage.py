"""The stable is looked after while Temporal is away (issue 23, point 1).

The controller decides about rollouts through Temporal, but protects what serves with
Kubernetes alone. With the Temporal server stopped for five minutes: the DecisionModel says
that Temporal is unreachable (naming the address) within a reconcile; a deleted stable Pod's
replacement passes the readiness gate; the deleted stable Deployment is restored; a Pod that
serves another digest leaves the Service; a spec change made meanwhile waits. Once Temporal is
back, the condition goes and the waiting rollout runs to its promotion.

``DMROLLOUT_TEMPORAL_OUTAGE_SECONDS`` shortens the outage for a quick local run; it defaults to
the five minutes the scenario is about.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest
from harness.helpers import eventually
from harness.rollout_harness import (
    SIM_PREFIX,
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    put_model,
)

from decisionmodel.engine.render.labels import READINESS_GATE
from localenv.env import LocalEnv

OUTAGE_SECONDS = float(os.environ.get("DMROLLOUT_TEMPORAL_OUTAGE_SECONDS", "300"))
BOUND = 60  # seconds: every protection of the stable shows within one re-inspection and a bit

pytestmark = pytest.mark.timeout(OUTAGE_SECONDS + 900)


def condition(h: RolloutHarness, name: str, type_: str) -> dict[str, Any] | None:
    for c in h.status(name).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def gate(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == READINESS_GATE:
            return dict(c)
    return None


def serving(h: RolloutHarness, dm: str, revision: str) -> list[str]:
    """The stable Pods that pass the gate and are Ready (what the Service sends traffic to)."""
    names = []
    for pod in h.pods(dm, revision):
        if pod["metadata"].get("deletionTimestamp"):
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in pod.get("status", {}).get("conditions") or []
        )
        passed = (gate(pod) or {}).get("status") == "True"
        if ready and passed:
            names.append(pod["metadata"]["name"])
    return names


async def test_with_temporal_away_the_stable_is_looked_after(
    ctl: RolloutHarness,
    controller: ControllerProcess,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
) -> None:
    put_model("laya", "away2", revision="away2")  # the revision the spec moves to meanwhile
    ctl.create_dm("away", {"model": "laya:en", "replicas": 2})
    await eventually(lambda: ctl.status("away").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("away")["stableRevision"]["hash"]
    deployment = f"away-{stable}"
    address = local_env.temporal.address

    await asyncio.to_thread(local_env.temporal.stop)
    stopped = time.monotonic()
    try:
        # Said on the DecisionModel, naming where Temporal was asked.
        down = await eventually(
            lambda: (
                (c := condition(ctl, "away", "TemporalReachable"))
                and c["status"] == "False"
                and c["reason"] == "TemporalUnavailable"
                and address in c["message"]
                and c
            ),
            BOUND,
            what="TemporalReachable=False naming the address",
        )
        assert "stable revision is looked after" in down["message"]

        # A stable Pod deleted: its replacement is inspected and passes the gate.
        first = ctl.pods("away", stable)[0]["metadata"]["name"]
        ctl.kubectl("delete", "pod", first, "--wait=false")
        await eventually(
            lambda: len(s := serving(ctl, "away", stable)) == 2 and first not in s,
            BOUND,
            what="the replacement Pod through the gate",
        )

        # The stable Deployment deleted: restored, its own new Pods through the gate again. The
        # old Pods go by garbage collection after the Deployment has gone, so until then they
        # still look serving: only Pods that did not exist before the delete count.
        before = {p["metadata"]["name"] for p in ctl.pods("away", stable)}
        ctl.kubectl("delete", "deployment", deployment, "--wait=true")

        def new_pods_serving() -> list[str]:
            if ctl.get("deployment", deployment) is None:
                return []
            names = serving(ctl, "away", stable)
            return names if len(names) == 2 and not before & set(names) else []

        restored = await eventually(
            new_pods_serving,
            BOUND,
            what="the stable Deployment restored and its new Pods serving",
        )

        # A Pod that serves another digest leaves the Service (its gate turns False).
        wrong = restored[0]
        ctl.kubectl("annotate", "pod", wrong, f"{SIM_PREFIX}digest={'e' * 64}")
        await eventually(
            lambda: (
                wrong not in serving(ctl, "away", stable)
                and (gate(ctl.get("pod", wrong) or {}) or {}).get("reason") == "DigestMismatch"
            ),
            BOUND,
            what="the wrong-digest Pod out of the Service",
        )
        ctl.kubectl("annotate", "pod", wrong, f"{SIM_PREFIX}digest-")
        await eventually(
            lambda: wrong in serving(ctl, "away", stable), BOUND, what="the Pod back, right again"
        )

        # A spec change waits for Temporal; the stable keeps serving.
        ctl.update_spec("away", {"model": "laya:away2"})
        await eventually(
            lambda: (
                ctl.status("away").get("observedGeneration")
                == ctl.dm("away")["metadata"]["generation"]
            ),
            BOUND,
            what="the change observed",
        )
        assert ctl.status("away")["stableRevision"]["hash"] == stable
        # The outage lasts the length the scenario is about.
        await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped)))
        assert ctl.status("away")["stableRevision"]["hash"] == stable
        assert len(serving(ctl, "away", stable)) == 2
    finally:
        await asyncio.to_thread(local_env.temporal.start)
        if ctl_worker.proc is not None and ctl_worker.proc.poll() is not None:
            ctl_worker.start()  # a worker that gave up on the server: another one

    if controller.proc is not None and controller.proc.poll() is not None:
        # A controller that lost its Lease exits so a standby can lead, and its Deployment
        # starts it again. Seen once, in make chaos, when the machine was frozen and resumed
        # mid-test: the wall clock jumped past the renew deadline. Any other exit fails.
        assert controller.lost_its_lease(), "the controller exited during the outage"
        controller.start()

    # Temporal back: the rollout that waited runs to its promotion, and the condition goes.
    await eventually(
        lambda: (ctl.status("away").get("stableRevision") or {}).get("model") == "laya:away2",
        240,
        what="the waiting rollout promoted",
    )
    await eventually(
        lambda: condition(ctl, "away", "TemporalReachable") is None, BOUND, what="condition gone"
    )

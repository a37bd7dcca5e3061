"""--max-concurrent-rollouts against the real Temporal visibility (issue 5, fleet budget).

A controller of its own, scoped to one namespace with a budget of one rollout, on the shared
worker: DecisionModels applied together roll one after another in arrival order, the others wait
in Pending/RolloutQueued, and a promoted rollout that only waits out its grace frees its slot.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, ControllerProcess, RolloutHarness, WorkerProcess
from temporalio.client import Client, WorkflowExecution

from controller.temporal.rollouts import dm_query
from localenv.cluster import LocalCluster
from localenv.env import LocalEnv

NAMESPACE = "budget-0"
GRACE_SECONDS = 25


@pytest.fixture
def budget(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
    temporal_client: Client,
) -> Iterator[RolloutHarness]:
    harness = RolloutHarness(crd, temporal_client, ctl_queue, NAMESPACE)
    c = ControllerProcess(
        crd,
        local_env.temporal.address,
        ctl_queue,
        ctl_logs,
        health_port=18095,
        identity="budget",
        extra_args=("--watch-namespaces", NAMESPACE, "--max-concurrent-rollouts", "1"),
        extra_env={
            "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-budget",  # not the session controller's
            "DMROLLOUT_CONTROLLER_PROMOTION_GRACE_SECONDS": str(GRACE_SECONDS),
            "DMROLLOUT_CONTROLLER_QUEUED_RECHECK_SECONDS": "1",
        },
    )
    c.start()
    yield harness
    c.stop()


def phase(h: RolloutHarness, name: str) -> str | None:
    return ((h.get("dm", name) or {}).get("status") or {}).get("phase")


def queued(h: RolloutHarness, name: str) -> bool:
    conditions = ((h.get("dm", name) or {}).get("status") or {}).get("conditions") or []
    return phase(h, name) == "Pending" and any(
        c.get("reason") == "RolloutQueued" for c in conditions
    )


async def rollouts_of(h: RolloutHarness, name: str) -> list[WorkflowExecution]:
    found = [wf async for wf in h.client.list_workflows(dm_query(h.namespace, name))]
    return sorted(found, key=lambda wf: wf.start_time)


async def test_budget_queues_in_arrival_order_and_a_promoted_rollout_frees_its_slot(
    budget: RolloutHarness,
) -> None:
    h = budget
    names = ["first", "second", "third"]
    # Each warmup takes 4 s (simulator fault on the namespace), so `first` is still rolling
    # while the others arrive one by one: arrival order is then unambiguous. (DecisionModels the
    # controller finds all at once, at start-up, queue in whatever order its workers reach them.)
    h.cluster.kubectl(
        "annotate", "namespace", NAMESPACE, f"{SIM_PREFIX}load-delay-seconds=4", "--overwrite"
    )
    h.create_dm("first", {"model": "laya:en"})
    await eventually(lambda: h.status("first").get("candidateRevision"), 60, what="first rolling")
    for name in names[1:]:
        h.create_dm(name, {"model": "laya:en"})
        await eventually(lambda n=name: queued(h, n), 60, what=f"{name} queued")
    await eventually(lambda: all(phase(h, n) == "Ready" for n in names), 240, what="all Ready")

    # One at a time, in arrival order: each starts only once the one before it was promoted
    # (the slot frees at promotion; the workflow's last status write may still be running).
    # lastPromotionTime has second precision, so this catches any start during a rollout's
    # steps (each takes seconds: the 4 s warmup alone).
    promoted_at = {
        n: datetime.fromisoformat(h.status(n)["lastPromotionTime"].replace("Z", "+00:00"))
        for n in names
    }
    runs = {n: (await rollouts_of(h, n))[0] for n in names}
    for earlier, later in itertools.pairwise(names):
        assert runs[later].start_time >= promoted_at[earlier], (earlier, later)
        assert runs[later].start_time >= runs[earlier].start_time

    # A second revision of `first`: promoted, then its workflow waits out the grace before it
    # deletes the previous revision. It is no longer rolling out, so a new DecisionModel starts
    # while that workflow still runs.
    h.update_spec("first", {"model": "laya:multilingual"})
    await eventually(
        lambda: (h.status("first").get("stableRevision") or {}).get("model") == "laya:multilingual",
        90,
        what="second revision of first promoted",
    )
    h.create_dm("fourth", {"model": "laya:en"})
    await eventually(lambda: phase(h, "fourth") == "Ready", 120, what="fourth Ready")

    deadline = asyncio.get_running_loop().time() + GRACE_SECONDS + 60
    while True:
        upgrade_runs = await rollouts_of(h, "first")
        if len(upgrade_runs) == 2 and upgrade_runs[1].close_time:
            break
        assert asyncio.get_running_loop().time() < deadline, "upgrade of first never ended"
        await asyncio.sleep(0.5)
    upgrade = upgrade_runs[1]
    fourth = (await rollouts_of(h, "fourth"))[0]
    assert upgrade.close_time is not None
    assert fourth.start_time < upgrade.close_time, "fourth waited for first's grace"

"""A tag not found (ModelNotFound) is resolved again with a backoff that holds across a controller
restart and a leader failover (issue 34: a restart at 126 s started 3 runs in 6 s, and past the
10-minute cap the waits shrank to seconds; each run is a registry call and a Warning Event).

Two controller processes of their own on one Lease, scoped to one namespace, the first wait
shortened to BASE seconds. The runs are counted in Temporal (every attempt is a run of the
revision's workflow ID). After each restart the test waits for the new leader to have
reconciled, then asserts that no run was started, and that the next one starts no earlier than
the doubled wait after the one before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import ControllerProcess, RolloutHarness, WorkerProcess
from temporalio.client import Client, WorkflowExecution

from controller.temporal.rollouts import dm_query
from localenv.cluster import LocalCluster
from localenv.env import LocalEnv

NAMESPACE = "reresolve-0"
BASE = 15  # seconds: the first wait; then 30, 60, ...
# Run start times come from Temporal, lastAttemptTime is written in whole seconds just before.
SLACK = timedelta(seconds=1)

Pair = tuple[RolloutHarness, ControllerProcess, ControllerProcess]


@pytest.fixture
def pair(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
    temporal_client: Client,
) -> Iterator[Pair]:
    harness = RolloutHarness(crd, temporal_client, ctl_queue, NAMESPACE)
    env = {
        "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-reresolve",  # not the session controller's
        "DMROLLOUT_CONTROLLER_RE_RESOLVE_BACKOFF_SECONDS": str(BASE),
    }

    def process(identity: str, port: int) -> ControllerProcess:
        return ControllerProcess(
            crd,
            local_env.temporal.address,
            ctl_queue,
            ctl_logs,
            health_port=port,
            identity=identity,
            extra_args=("--watch-namespaces", NAMESPACE),
            extra_env=env,
        )

    first, second = process("reresolve-a", 18096), process("reresolve-b", 18097)
    first.start()
    yield harness, first, second
    first.stop()
    second.stop()


async def runs_of(h: RolloutHarness, name: str) -> list[WorkflowExecution]:
    found = [wf async for wf in h.client.list_workflows(dm_query(h.namespace, name))]
    return sorted(found, key=lambda wf: wf.start_time)


def reconciles(c: ControllerProcess) -> float:
    """Reconciles this process finished (its own counters: 0 in a new process)."""
    total = 0.0
    for line in c.metrics().splitlines():
        if line.startswith("controller_runtime_reconcile_total{") and (
            'controller="decisionmodel"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def all_closed(h: RolloutHarness, name: str, n: int) -> list[WorkflowExecution]:
    """Once ``n`` runs exist and all closed (the last attempt failed again): the runs."""

    async def check() -> list[WorkflowExecution]:
        runs = await runs_of(h, name)
        assert len(runs) == n and all(r.close_time for r in runs), [
            (r.start_time, r.close_time) for r in runs
        ]
        return runs

    return await async_assert_eventually(check, 4 * BASE * 2 ** (n - 1) + 60, 0.5, f"{n} runs")


async def no_run_until_due(
    h: RolloutHarness, leader: ControllerProcess, runs: list[WorkflowExecution]
) -> None:
    """``leader`` (new) has reconciled; no run started since, before the next one is due;
    the next run starts no earlier than the doubled wait after the last one."""
    await eventually(lambda: reconciles(leader) >= 1, 60, what="the new leader reconciled")
    n, last = len(runs), runs[-1].start_time
    due = last + timedelta(seconds=BASE * 2 ** (n - 1))
    early = [r.start_time for r in (await runs_of(h, "missing"))[n:] if r.start_time < due - SLACK]
    assert not early, f"run(s) started after the restart before {due}: {early}"
    nxt = (await all_closed(h, "missing", n + 1))[-1]
    assert nxt.start_time >= due - SLACK, (nxt.start_time, due)


async def test_the_backoff_holds_across_a_restart_and_a_failover(pair: Pair) -> None:
    h, first, second = pair
    h.create_dm("missing", {"model": f"laya:nowhere-{uuid.uuid4().hex[:8]}"})
    # The first rollout fails (ModelNotFound); BASE s later the first re-resolve fails too.
    runs = await all_closed(h, "missing", 2)
    assert runs[1].start_time - runs[0].start_time >= timedelta(seconds=BASE) - SLACK, runs

    # A restart (the Deployment rolled): the next attempt is still due 2*BASE after the last.
    first.stop()
    first.start()
    await no_run_until_due(h, first, runs)
    # The schedule is on the DecisionModel, where the next leader finds it, and Ready says
    # which attempt is next and when.
    record = h.status("missing").get("reResolve") or {}
    assert record.get("attempts") == 2, record
    await eventually(
        lambda: "attempt 3" in h.condition("missing", "Ready").get("message", ""),
        30,
        what="Ready names the next attempt",
    )

    # A failover (the leader's node died; the standby takes the Lease once it expires).
    second.start()
    runs = await runs_of(h, "missing")
    first.kill()
    await no_run_until_due(h, second, runs)
    assert (h.status("missing").get("reResolve") or {}).get("attempts") == 3

    # A spec change is a new revision: it starts at once, whatever the backoff (due in 4*BASE).
    changed = time.monotonic()
    h.update_spec("missing", {"model": "laya:en"})
    await async_assert_eventually(
        lambda: _started_since(h, 5), 30, 0.5, "the new revision's rollout started"
    )
    assert time.monotonic() - changed < 4 * BASE
    await eventually(
        lambda: h.condition("missing", "Ready").get("reason") == "Serving", 120, what="Serving"
    )
    # Its failure is gone, and so is the backoff record.
    await eventually(lambda: "reResolve" not in h.status("missing"), 30, what="record removed")


async def _started_since(h: RolloutHarness, n: int) -> bool:
    return len(await runs_of(h, "missing")) >= n

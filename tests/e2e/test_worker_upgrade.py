"""Upgrading the worker with rollouts in flight under the Pinned behavior, the draining list
kept (issue 23, docs/operations.md "Upgrades and workflow versioning").

Build v1 runs 20 rollouts: 10 wait for a manual approval, 10 are mid-evaluation (every decision
slowed). Build v2, whose RolloutWorkflow code differs (harness/next_build.py: a timer before the
first activity), starts and makes itself the Worker Deployment's current version while v1 keeps
running as a draining build; v1 restarting then does not take the new rollouts back. Every one
of the 20 stays pinned to v1 and ends with its verdict, with no failed workflow task (a
non-determinism error would be one); a rollout started after the upgrade runs on v2's code; v1
then drains and its worker stops polling. The same v1 history replayed on v2's code fails:
without pinning, the upgrade would have broken the rollouts in flight.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import temporalio.api.workflowservice.v1 as wsv1
from harness.helpers import async_assert_eventually, eventually
from harness.next_build import NextRolloutWorkflow
from harness.rollout_harness import RolloutHarness, WorkerProcess, golden_jsonl, put_model
from temporalio.api.enums.v1 import EventType, WorkerDeploymentVersionStatus
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from decisionmodel.rollout.contracts import Phase, RolloutOutcome, RolloutProgress, RolloutResult
from localenv.cluster import LocalCluster
from localenv.env import Simulators
from localenv.temporal import TemporalDevServer
from workflows.rollout import RolloutWorkflow

ROOT = Path(__file__).resolve().parents[2]
EACH = 10
EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.80",
}
# 40 cases at 1 s a decision, candidate then baseline: the evaluations outlast the upgrade by
# far; the fault is lifted once v2 is current, and they finish.
SLOW = "sim.dmrollout.dev/latency-ms"


@pytest.fixture
def deployment() -> str:
    return f"upgrade-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def builds(
    crd: LocalCluster, temporal_server: TemporalDevServer, deployment: str, tmp_path: Path
) -> Iterator[dict[str, WorkerProcess]]:
    """Build v1 (the product's worker) and v2 (the next build), one Worker Deployment."""
    queue = deployment
    env = {
        "DMROLLOUT_WORKER_DEPLOYMENT_NAME": deployment,
        # Pinned, as with the chart's worker.versioning.behavior: Pinned (the default,
        # AutoUpgrade, is tests/e2e/test_worker_plain_upgrade.py).
        "DMROLLOUT_WORKER_VERSIONING_BEHAVIOR": "Pinned",
        "DMROLLOUT_WORKER_DRAIN_CHECK_SECONDS": "2",
        "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}",
    }
    for build in ("v1", "v2"):
        (tmp_path / build).mkdir()
    made = {
        "v1": WorkerProcess(
            crd, temporal_server.address, queue, tmp_path / "v1",
            extra_env={**env, "DMROLLOUT_WORKER_BUILD_ID": "v1"},
        ),
        "v2": WorkerProcess(
            crd, temporal_server.address, queue, tmp_path / "v2",
            extra_env={**env, "DMROLLOUT_WORKER_BUILD_ID": "v2"},
            module="harness.next_build",
        ),
    }  # fmt: skip
    yield made
    for w in made.values():
        w.stop()


async def current_build(client: Client, deployment: str) -> str:
    """The build new rollouts go to ("" before the deployment exists)."""
    try:
        described = await client.workflow_service.describe_worker_deployment(
            wsv1.DescribeWorkerDeploymentRequest(
                namespace=client.namespace, deployment_name=deployment
            )
        )
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return ""
        # Busy while it registers a build (seen under load): ask again.
        raise AssertionError(f"describe {deployment}: {e.status.name} {e.message}") from e
    return described.worker_deployment_info.routing_config.current_deployment_version.build_id


async def pinned_build(handle: WorkflowHandle[Any, Any]) -> str:
    info = (await handle.describe()).raw_description.workflow_execution_info
    return info.versioning_info.deployment_version.build_id


async def phase_is(handle: WorkflowHandle[Any, Any], phase: Phase) -> RolloutProgress:
    p: RolloutProgress = await handle.query(RolloutWorkflow.progress)
    assert p.phase == phase, (handle.id, p.phase)
    return p


async def test_upgrade_keeps_rollouts_in_flight_on_their_build(
    crd: LocalCluster,
    simulators: Simulators,
    temporal_client: Client,
    builds: dict[str, WorkerProcess],
    deployment: str,
) -> None:
    held = RolloutHarness(crd, temporal_client, deployment)
    slow = RolloutHarness(crd, temporal_client, deployment)
    builds["v1"].start()
    await async_assert_eventually(
        lambda: _equal(current_build(temporal_client, deployment), "v1"), 120, what="v1 current"
    )

    # 10 with a stable and a candidate waiting for approval, 10 in a slowed evaluation.
    for i in range(EACH):
        held.create_dm(f"held-{i}", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    firsts = await asyncio.gather(*(held.rollout(f"held-{i}", timeout=300) for i in range(EACH)))
    assert {o.result for o in firsts} == {RolloutResult.PROMOTED}, firsts
    tag = f"next-{deployment}"
    put_model("laya", tag, accuracy=0.95, revision=tag)
    held.golden_configmap("golden", golden_jsonl(20))
    manual = {"promotion": "Manual", "evaluation": EVALUATION}
    waiting = []
    for i in range(EACH):
        held.update_spec(f"held-{i}", {"model": f"laya:{tag}", "rollout": manual})
        waiting.append(await held.start(held.input_for(f"held-{i}")))
    slow.golden_configmap("golden", golden_jsonl(40))
    slow.kubectl("annotate", "namespace", slow.namespace, "--overwrite", f"{SLOW}=1000")
    evaluating = []
    for i in range(EACH):
        slow.create_dm(f"eval-{i}", {"model": "laya:en", "rollout": {"evaluation": EVALUATION}})
        evaluating.append(await slow.start(slow.input_for(f"eval-{i}")))
    for h in waiting:
        await async_assert_eventually(
            lambda h=h: phase_is(h, Phase.AWAITING_PROMOTION), 240, what="awaiting approval"
        )
    for h in evaluating:
        await async_assert_eventually(
            lambda h=h: phase_is(h, Phase.EVALUATING), 240, what="evaluating"
        )

    # The upgrade: v2 starts and takes new rollouts; v1 keeps running, draining.
    builds["v2"].start()
    await async_assert_eventually(
        lambda: _equal(current_build(temporal_client, deployment), "v2"), 120, what="v2 current"
    )
    for h in evaluating:  # the upgrade happened mid-evaluation
        await phase_is(h, Phase.EVALUATING)
    # A v1 container restarting now (as during a rolling upgrade) does not take new rollouts
    # back; it goes on with the ones pinned to it.
    builds["v1"].stop()
    builds["v1"].start()
    v1_log = builds["v1"].log_dir / "worker-2.log"
    await eventually(
        lambda: "is older than the current build v2" in v1_log.read_text(), 60, what="v1 back"
    )
    assert await current_build(temporal_client, deployment) == "v2"
    held.create_dm("after", {"model": "laya:en"})
    after = await held.start(held.input_for("after"))

    # Approve the 10 held ones and let the evaluations finish.
    for h in waiting:
        expected = (await phase_is(h, Phase.AWAITING_PROMOTION)).expected_approval
        assert expected is not None
        await h.execute_update(RolloutWorkflow.approve, expected)
    slow.kubectl("annotate", "namespace", slow.namespace, f"{SLOW}-")
    in_flight = waiting + evaluating
    outcomes = await asyncio.wait_for(asyncio.gather(*(h.result() for h in in_flight)), 600)
    assert {o.result for o in outcomes} == {RolloutResult.PROMOTED}, outcomes
    for h in in_flight:
        assert await pinned_build(h) == "v1", h.id
        assert await _event_types(h) & {EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED} == set(), h.id

    # New rollouts ran v2's code; v1 takes none and is draining.
    result: RolloutOutcome = await asyncio.wait_for(after.result(), 300)
    assert result.result == RolloutResult.PROMOTED, result
    assert await pinned_build(after) == "v2"
    assert EventType.EVENT_TYPE_TIMER_STARTED in await _event_types(after)
    # v1 drains (nothing pinned to it is open) and its worker stops polling by itself.
    await async_assert_eventually(
        lambda: _drained(temporal_client, deployment, "v1"), 120, what="v1 drained"
    )
    await eventually(lambda: "is drained" in v1_log.read_text(), 60, what="v1 stops polling")
    assert builds["v1"].proc is not None and builds["v1"].proc.poll() is None  # until removed

    # Without pinning: v2's code replaying a v1 history is a non-determinism error.
    replay = await Replayer(
        workflows=[NextRolloutWorkflow], data_converter=pydantic_data_converter
    ).replay_workflow(await waiting[0].fetch_history(), raise_on_replay_failure=False)
    assert replay.replay_failure is not None
    assert "nondetermin" in str(replay.replay_failure).lower(), replay.replay_failure


async def _equal(value: Any, expected: str) -> str:
    got = await value
    assert got == expected, got
    return str(got)


async def _event_types(handle: WorkflowHandle[Any, Any]) -> set[int]:
    history = await handle.fetch_history()
    return {e.event_type for e in history.events}


async def _drained(client: Client, deployment: str, build: str) -> bool:
    status = await _version_status(client, deployment, build)
    assert status == WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED, status
    return True


async def _version_status(client: Client, deployment: str, build: str) -> int:
    from temporalio.api.deployment.v1 import WorkerDeploymentVersion

    described = await client.workflow_service.describe_worker_deployment_version(
        wsv1.DescribeWorkerDeploymentVersionRequest(
            namespace=client.namespace,
            deployment_version=WorkerDeploymentVersion(deployment_name=deployment, build_id=build),
        )
    )
    return described.worker_deployment_version_info.status

"""Whether a worker serves a rollout's run (controller/temporal/worker_presence.py)."""

from __future__ import annotations

import temporalio.api.workflow.v1 as workflow_pb
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.deployment.v1 import WorkerDeploymentOptions, WorkerDeploymentVersion
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.taskqueue.v1 import PollerInfo

from controller.temporal.worker_presence import (
    AUTO_UPGRADE,
    PINNED,
    RunBuild,
    run_build,
    stranded_message,
)

NOW = 1_000_000.0
STALE = 120.0
WID = "rollout/ns/app/abc"


def poller(build: str, age: float, deployment: str = "dmrollout") -> PollerInfo:
    return PollerInfo(
        last_access_time=Timestamp(seconds=int(NOW - age)),
        deployment_options=WorkerDeploymentOptions(deployment_name=deployment, build_id=build),
    )


def info(behavior: int, build: str, **override: object) -> workflow_pb.WorkflowExecutionInfo:
    version = WorkerDeploymentVersion(deployment_name="dmrollout", build_id=build)
    return workflow_pb.WorkflowExecutionInfo(
        versioning_info=workflow_pb.WorkflowExecutionVersioningInfo(
            behavior=behavior,  # type: ignore[arg-type]
            deployment_version=version,
            versioning_override=workflow_pb.VersioningOverride(**override),  # type: ignore[arg-type]
        )
    )


def test_a_pinned_run_whose_build_polls_no_more_is_stranded_naming_the_fixes() -> None:
    build = RunBuild(PINNED, "dmrollout", "1.4.0")
    pollers = [poller("1.5.0", 1), poller("1.4.0", 300)]
    message = stranded_message(WID, build, pollers, "q", NOW, STALE)
    assert message is not None
    assert "pinned to build 1.4.0 of Worker Deployment dmrollout" in message
    assert "for 300 s" in message
    assert "worker.versioning.draining[0].buildId=1.4.0" in message
    assert f"update-options --workflow-id {WID}" in message


def test_a_pinned_run_whose_build_polls_is_served() -> None:
    build = RunBuild(PINNED, "dmrollout", "1.4.0")
    assert stranded_message(WID, build, [poller("1.4.0", 59)], "q", NOW, STALE) is None


def test_a_pinned_run_on_a_build_the_server_no_longer_lists() -> None:
    build = RunBuild(PINNED, "dmrollout", "1.4.0")
    message = stranded_message(WID, build, [poller("1.5.0", 1)], "q", NOW, STALE)
    assert message is not None and "in the last minutes" in message


def test_an_auto_upgrade_run_is_served_by_any_build_and_stranded_by_none() -> None:
    build = RunBuild(AUTO_UPGRADE, "dmrollout", "1.4.0")
    assert stranded_message(WID, build, [poller("1.5.0", 5)], "q", NOW, STALE) is None
    message = stranded_message(WID, build, [poller("1.5.0", 200)], "rollouts", NOW, STALE)
    assert message is not None and "no worker has polled task queue rollouts" in message


def test_run_build_reads_the_behavior_and_a_pinned_override_wins() -> None:
    pinned = run_build(info(VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "1.4.0"))
    assert pinned == RunBuild(PINNED, "dmrollout", "1.4.0")
    auto = run_build(info(VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE, "1.5.0"))
    assert auto == RunBuild(AUTO_UPGRADE, "dmrollout", "1.5.0")
    moved = run_build(
        info(VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "1.4.0", auto_upgrade=True)
    )
    assert moved.behavior == AUTO_UPGRADE
    target = WorkerDeploymentVersion(deployment_name="dmrollout", build_id="1.5.0")
    repinned = run_build(
        info(
            VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE,
            "1.4.0",
            pinned=workflow_pb.VersioningOverride.PinnedOverride(version=target),
        )
    )
    assert repinned == RunBuild(PINNED, "dmrollout", "1.5.0")
    assert run_build(workflow_pb.WorkflowExecutionInfo()) == RunBuild("")
    assert RunBuild("").text() == "unversioned"

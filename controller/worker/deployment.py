"""The rollouts' worker under Temporal's Worker Deployment versioning (issues 23 and 34).

A rollout can wait days for an approval, so an upgrade always finds rollouts in flight. By
default they **auto-upgrade**: each moves to the deployment's current build at its next
workflow task, so a plain rolling ``helm upgrade`` (the old build's Pods stopped, nothing
draining) never strands one. Workflow code changes then go behind ``workflow.patched`` and the
replay test (tests/integration/test_workflow_replay.py) is the guard. **Pinned**
(``worker_versioning_behavior``) keeps each rollout on the build that started it; the old
build must then keep running until Temporal reports it drained (the chart's
``worker.versioning.draining``), and the controller says so on a DecisionModel whose rollout
is pinned to a build no worker serves (controller/temporal/worker_presence.py).

The build that is to take new rollouts makes itself the deployment's current version once its
pollers are known to the server, unless a newer build (one the server has known for less
time) is current and served; a draining build never does. So a restarted old Pod cannot take
the new rollouts back during a rolling upgrade, while after a ``helm rollback`` (the newer
build's workers gone) the older build does take over.
"""

from __future__ import annotations

import asyncio
import logging
import time

import temporalio.api.deployment.v1 as deployment_pb
import temporalio.api.workflowservice.v1 as wsv1
from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError
from temporalio.worker import WorkerDeploymentConfig

from controller.temporal.runs import RPC_TIMEOUT
from controller.temporal.worker_presence import (
    DEFAULT_STALE_SECONDS,
    PINNED,
    RunBuild,
    WorkerPresence,
)
from decisionmodel.rollout.settings import RolloutSettings, worker_build

log = logging.getLogger("dmrollout.worker")

IDENTITY = "dmrollout-worker"
# How long a promoting build waits for the server to list its version (its first poll) and
# to accept it as current; a Pod that cannot is restarted and tries again.
PROMOTE_TIMEOUT_SECONDS = 120.0
_PROMOTE_RETRY_SECONDS = 1.0


def build_id(settings: RolloutSettings) -> str:
    """This worker's build: the setting (the chart passes the image tag), else the package's."""
    return worker_build(settings)


def deployment_version(settings: RolloutSettings) -> WorkerDeploymentVersion | None:
    if not settings.worker_deployment_name:
        return None
    return WorkerDeploymentVersion(settings.worker_deployment_name, build_id(settings))


BEHAVIORS = {
    "AutoUpgrade": VersioningBehavior.AUTO_UPGRADE,
    "Pinned": VersioningBehavior.PINNED,
}


def deployment_config(settings: RolloutSettings) -> WorkerDeploymentConfig | None:
    """Versioned: rollouts auto-upgrade to the current build, or stay pinned to their own."""
    current = deployment_version(settings)
    if current is None:
        return None
    return WorkerDeploymentConfig(
        version=current,
        use_worker_versioning=True,
        default_versioning_behavior=BEHAVIORS[settings.worker_versioning_behavior],
    )


class _NotPolledYet(Exception):
    """The server lists no worker of this build yet (its first poll is on the way)."""


async def make_current(
    client: Client,
    wanted: WorkerDeploymentVersion,
    timeout: float = PROMOTE_TIMEOUT_SECONDS,
    task_queue: str = "",
) -> bool:
    """Make ``wanted`` the current version of its deployment; False if it already was, or if
    a newer build is current and its workers poll ``task_queue``.

    The server knows a version only after one of its workers has polled, so this retries
    (bounded by ``timeout``) until the version is listed and the change accepted."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await _set_current(client, wanted, task_queue) == MADE
        except (RPCError, _NotPolledYet) as e:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Worker Deployment {wanted.deployment_name}: build {wanted.build_id} not "
                    f"made current within {timeout:.0f} s (last error: {e}); check the "
                    "worker's Temporal permissions (worker deployment write) and that the "
                    "server supports Worker Deployments"
                ) from e
            log.debug("build %s not current yet: %s", wanted.build_id, e)
        await asyncio.sleep(_PROMOTE_RETRY_SECONDS)


# What _set_current did.
ALREADY, MADE, REFUSED = "already current", "made current", "refused"


async def _set_current(
    client: Client, wanted: WorkerDeploymentVersion, task_queue: str, quiet: bool = False
) -> str:
    described = await client.workflow_service.describe_worker_deployment(
        wsv1.DescribeWorkerDeploymentRequest(
            namespace=client.namespace, deployment_name=wanted.deployment_name
        ),
        timeout=RPC_TIMEOUT,
    )
    current = described.worker_deployment_info.routing_config.current_deployment_version
    if current.build_id == wanted.build_id:
        return ALREADY
    created = {
        s.deployment_version.build_id: s.create_time.ToNanoseconds()
        for s in described.worker_deployment_info.version_summaries
    }
    if wanted.build_id not in created:
        raise _NotPolledYet(f"build {wanted.build_id} has not polled yet")
    newer = current.build_id and created.get(current.build_id, 0) > created[wanted.build_id]
    if newer and await _served(client, task_queue, current):
        # An older build restarting (a Pod of the previous release during a rolling upgrade)
        # must not take new rollouts back from the build that replaced it, while that one runs.
        if not quiet:
            _log_refused(wanted, current.build_id)
        return REFUSED
    if newer:
        # The newer build's workers are all gone (a helm rollback): its rollouts would wait.
        log.warning(
            "Worker Deployment %s: the current build %s has no worker polling %s any more; "
            "build %s (older) takes new rollouts and the auto-upgrading ones in flight",
            wanted.deployment_name,
            current.build_id,
            task_queue,
            wanted.build_id,
        )
    await client.workflow_service.set_worker_deployment_current_version(
        wsv1.SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace,
            deployment_name=wanted.deployment_name,
            build_id=wanted.build_id,
            conflict_token=described.conflict_token,
            identity=IDENTITY,
        ),
        timeout=RPC_TIMEOUT,
    )
    log.info(
        "Worker Deployment %s: build %s is current (was %s); new rollouts go to it",
        wanted.deployment_name,
        wanted.build_id,
        current.build_id or "unversioned",
    )
    return MADE


def _log_refused(wanted: WorkerDeploymentVersion, current: str) -> None:
    log.warning(
        "Worker Deployment %s: build %s is older than the current build %s, whose workers "
        "poll, and is not made current (it takes over if they all go, as after a helm "
        "rollback); to roll back to it now: temporal worker deployment set-current-version "
        "--deployment-name %s --build-id %s",
        wanted.deployment_name,
        wanted.build_id,
        current,
        wanted.deployment_name,
        wanted.build_id,
    )


async def _served(
    client: Client, task_queue: str, version: deployment_pb.WorkerDeploymentVersion
) -> bool:
    """Whether a worker of ``version`` has polled ``task_queue`` lately (unknown queue: yes)."""
    if not task_queue:
        return True
    presence = WorkerPresence(client, task_queue, DEFAULT_STALE_SECONDS, RPC_TIMEOUT)
    build = RunBuild(PINNED, version.deployment_name, version.build_id)
    return await presence.stranded("", build) is None


DRAINED = WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED


async def watch_build(
    client: Client, wanted: WorkerDeploymentVersion, period: float, task_queue: str, promote: bool
) -> None:
    """What a build waits for before it stops polling. A draining build (``promote`` false):
    Temporal reporting it drained. A build that takes new rollouts never stops: every
    ``period`` it makes itself current again if a newer current build has no worker left (a
    ``helm rollback`` removed them), so no rollout waits for a build that is gone."""
    if not promote:
        return await wait_drained(client, wanted, period)
    told = False
    while True:
        await asyncio.sleep(period)
        try:
            done = await _set_current(client, wanted, task_queue, quiet=True)
            drained = done == REFUSED and await _status(client, wanted) == DRAINED
        except (RPCError, _NotPolledYet) as e:
            log.debug("build %s not checked: %s", wanted.build_id, e)
            continue
        if drained and not told:
            told = True
            log.info(
                "Worker Deployment %s: build %s is drained (no rollout is pinned to it); it "
                "keeps polling, to take new rollouts back if the current build's workers "
                "all go",
                wanted.deployment_name,
                wanted.build_id,
            )


async def _status(client: Client, wanted: WorkerDeploymentVersion) -> int:
    described = await client.workflow_service.describe_worker_deployment_version(
        wsv1.DescribeWorkerDeploymentVersionRequest(
            namespace=client.namespace,
            deployment_version=deployment_pb.WorkerDeploymentVersion(
                deployment_name=wanted.deployment_name, build_id=wanted.build_id
            ),
        ),
        timeout=RPC_TIMEOUT,
    )
    return int(described.worker_deployment_version_info.status)


async def wait_drained(client: Client, wanted: WorkerDeploymentVersion, period: float) -> None:
    """Return once Temporal reports ``wanted`` drained: not current, not ramping, and no open
    workflow pinned to it (the server re-checks a draining version every few minutes). A
    failed check (Temporal unreachable) is tried again next ``period``."""
    request = wsv1.DescribeWorkerDeploymentVersionRequest(
        namespace=client.namespace,
        deployment_version=deployment_pb.WorkerDeploymentVersion(
            deployment_name=wanted.deployment_name, build_id=wanted.build_id
        ),
    )
    while True:
        await asyncio.sleep(period)
        try:
            described = await client.workflow_service.describe_worker_deployment_version(
                request, timeout=RPC_TIMEOUT
            )
        except RPCError as e:
            log.debug("drainage of build %s not known: %s", wanted.build_id, e)
            continue
        if described.worker_deployment_version_info.status == DRAINED:
            log.info(
                "Worker Deployment %s: build %s is drained (no rollout is pinned to it); it "
                "stops polling: remove it from worker.versioning.draining",
                wanted.deployment_name,
                wanted.build_id,
            )
            return

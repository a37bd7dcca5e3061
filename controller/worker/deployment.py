"""The rollouts' worker under Temporal's Worker Deployment versioning (issue 23).

A rollout can wait days for an approval; a worker upgraded meanwhile with changed workflow code
would replay its history and fail with a non-determinism error. Versioned, every rollout is
pinned to the build that started it: the old build's worker keeps running (the chart's
``worker.versioning.draining``) and finishes what it started, new rollouts go to the current
build, and the old one is removed once Temporal reports it drained (docs/operations.md
"Upgrades and workflow versioning").

The build that is to take new rollouts makes itself the deployment's current version once its
pollers are known to the server, unless a newer build (one the server has known for less
time) is current; a draining build never does. So a restarted old Pod cannot take the new
rollouts back; rolling back to an older build is one explicit ``set-current-version``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from importlib.metadata import PackageNotFoundError, version

import temporalio.api.deployment.v1 as deployment_pb
import temporalio.api.workflowservice.v1 as wsv1
from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError
from temporalio.worker import WorkerDeploymentConfig

from controller.temporal.rollouts import RPC_TIMEOUT
from decisionmodel.rollout.settings import RolloutSettings

log = logging.getLogger("dmrollout.worker")

IDENTITY = "dmrollout-worker"
# How long a promoting build waits for the server to list its version (its first poll) and
# to accept it as current; a Pod that cannot is restarted and tries again.
PROMOTE_TIMEOUT_SECONDS = 120.0
_PROMOTE_RETRY_SECONDS = 1.0


def build_id(settings: RolloutSettings) -> str:
    """This worker's build: the setting (the chart passes the image tag), else the package's."""
    if settings.worker_build_id:
        return settings.worker_build_id
    try:
        return version("dmrollout")
    except PackageNotFoundError:  # a source tree run without installing
        return "dev"


def deployment_version(settings: RolloutSettings) -> WorkerDeploymentVersion | None:
    if not settings.worker_deployment_name:
        return None
    return WorkerDeploymentVersion(settings.worker_deployment_name, build_id(settings))


def deployment_config(settings: RolloutSettings) -> WorkerDeploymentConfig | None:
    """Versioned with every workflow pinned: a rollout never moves to another build."""
    current = deployment_version(settings)
    if current is None:
        return None
    return WorkerDeploymentConfig(
        version=current,
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


class _NotPolledYet(Exception):
    """The server lists no worker of this build yet (its first poll is on the way)."""


async def make_current(
    client: Client, wanted: WorkerDeploymentVersion, timeout: float = PROMOTE_TIMEOUT_SECONDS
) -> bool:
    """Make ``wanted`` the current version of its deployment; False if it already was.

    The server knows a version only after one of its workers has polled, so this retries
    (bounded by ``timeout``) until the version is listed and the change accepted."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await _set_current(client, wanted)
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


async def _set_current(client: Client, wanted: WorkerDeploymentVersion) -> bool:
    described = await client.workflow_service.describe_worker_deployment(
        wsv1.DescribeWorkerDeploymentRequest(
            namespace=client.namespace, deployment_name=wanted.deployment_name
        ),
        timeout=RPC_TIMEOUT,
    )
    current = described.worker_deployment_info.routing_config.current_deployment_version
    if current.build_id == wanted.build_id:
        return False
    created = {
        s.deployment_version.build_id: s.create_time.ToNanoseconds()
        for s in described.worker_deployment_info.version_summaries
    }
    if wanted.build_id not in created:
        raise _NotPolledYet(f"build {wanted.build_id} has not polled yet")
    if current.build_id and created.get(current.build_id, 0) > created[wanted.build_id]:
        # An older build restarting (a Pod of the previous release during a rolling upgrade)
        # must not take new rollouts back from the build that replaced it.
        log.warning(
            "Worker Deployment %s: build %s is older than the current build %s and is not made "
            "current; to roll back to it: temporal worker deployment set-current-version "
            "--deployment-name %s --build-id %s",
            wanted.deployment_name,
            wanted.build_id,
            current.build_id,
            wanted.deployment_name,
            wanted.build_id,
        )
        return False
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
    return True


DRAINED = WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED


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

"""Whether any worker serves a rollout's run: a run nobody can take a task of is stranded
(issue 34).

A rollout pinned to a build whose workers are gone (a plain ``helm upgrade`` under the Pinned
behavior, without ``worker.versioning.draining``) or on a task queue no worker polls at all
waits without a word: an approval cannot reach it, its evaluation never resumes. Temporal keeps
every poller of a task queue for a few minutes with the time of its last poll; a live worker's
pollers poll again at least once a long poll (about 60 s, measured on the dev server), so a
build whose last poll is older than ``stale_seconds`` has no worker. One DescribeTaskQueue
answers for every run on the queue, and is asked only for runs the controller re-inspects
anyway (at most once per ``CACHE_SECONDS``): an idle fleet costs Temporal nothing more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import temporalio.api.workflow.v1 as workflow_pb
import temporalio.api.workflowservice.v1 as wsv1
from temporalio.api.enums.v1 import TaskQueueType, VersioningBehavior
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.client import Client

# A live worker's pollers poll again within a long poll (~60 s); two of them without a poll
# from a build means no worker of it runs (DMROLLOUT_CONTROLLER_WORKER_POLL_STALE_SECONDS).
DEFAULT_STALE_SECONDS: Final = 120.0
# Pollers are read once for all the runs re-inspected within this long.
CACHE_SECONDS: Final = 5.0
PINNED: Final = "Pinned"
AUTO_UPGRADE: Final = "AutoUpgrade"


@dataclass(frozen=True)
class RunBuild:
    """Which workers may take a run's next task, from its describe."""

    behavior: str  # Pinned, AutoUpgrade, or "" (unversioned, or no task completed yet)
    deployment: str = ""
    build_id: str = ""

    def text(self) -> str:
        """As ``dmrollout status`` shows it."""
        if not self.build_id:
            return "unversioned"
        how = "pinned to it" if self.behavior == PINNED else "moves to the current build"
        return f"{self.build_id} of {self.deployment} ({how})"


def run_build(info: workflow_pb.WorkflowExecutionInfo) -> RunBuild:
    """The run's effective versioning: an override (``temporal workflow update-options``)
    wins over the behavior its last workflow task reported."""
    versioning = info.versioning_info
    override = versioning.versioning_override
    version = versioning.deployment_version
    kind = override.WhichOneof("override")
    if kind == "pinned":
        pinned = override.pinned.version
        return RunBuild(PINNED, pinned.deployment_name, pinned.build_id)
    if kind == "auto_upgrade":
        return RunBuild(AUTO_UPGRADE, version.deployment_name, version.build_id)
    behavior = {
        VersioningBehavior.VERSIONING_BEHAVIOR_PINNED: PINNED,
        VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE: AUTO_UPGRADE,
    }.get(versioning.behavior, "")
    return RunBuild(behavior, version.deployment_name, version.build_id)


def _serves(poller: PollerInfo, build: RunBuild) -> bool:
    if build.behavior != PINNED:
        return True  # the current build, or any unversioned worker, takes its next task
    options = poller.deployment_options
    return (options.deployment_name, options.build_id) == (build.deployment, build.build_id)


def stranded_message(
    wid: str,
    build: RunBuild,
    pollers: list[PollerInfo],
    task_queue: str,
    now: float,
    stale_seconds: float,
) -> str | None:
    """Why nobody can take the run's next task, naming the fix; None when a worker can. Pure."""
    seen = [p.last_access_time.ToSeconds() for p in pollers if _serves(p, build)]
    last = max(seen, default=None)
    if last is not None and now - last < stale_seconds:
        return None
    since = f"for {now - last:.0f} s" if last is not None else "in the last minutes"
    if build.behavior == PINNED:
        return (
            f"rollout workflow {wid} is pinned to build {build.build_id} of Worker Deployment "
            f"{build.deployment}, and no worker of that build has polled task queue "
            f"{task_queue} {since}: it cannot go on (nor take an approval). Run that build "
            "again until it is drained: list it under worker.versioning.draining (helm upgrade "
            f"--reuse-values --set 'worker.versioning.draining[0].buildId={build.build_id}'); "
            "or, if the current build's workflow code replays it (changes behind "
            f"workflow.patched), move it: temporal workflow update-options --workflow-id {wid} "
            "--versioning-override-behavior auto_upgrade"
        )
    return (
        f"no worker has polled task queue {task_queue} {since}: rollout workflow {wid} waits "
        "there (nor can it take an approval); check the worker Deployment (kubectl get pods "
        "-l app.kubernetes.io/component=worker in dmrollout's namespace, and its log) and that "
        "it uses this task queue and Temporal namespace"
    )


class WorkerPresence:
    """The pollers of the rollouts' task queue, read at most once per CACHE_SECONDS."""

    def __init__(
        self, client: Client, task_queue: str, stale_seconds: float, rpc_timeout: timedelta
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self.stale_seconds = stale_seconds
        self.rpc_timeout = rpc_timeout
        self._pollers: list[PollerInfo] = []
        self._read_at = -1e9

    async def pollers(self) -> list[PollerInfo]:
        if time.monotonic() - self._read_at < CACHE_SECONDS:
            return self._pollers
        answer = await self.client.workflow_service.describe_task_queue(
            wsv1.DescribeTaskQueueRequest(
                namespace=self.client.namespace,
                task_queue=TaskQueue(name=self.task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            ),
            timeout=self.rpc_timeout,
        )
        self._pollers = list(answer.pollers)
        self._read_at = time.monotonic()
        return self._pollers

    async def stranded(self, wid: str, build: RunBuild) -> str | None:
        """Why the run ``wid`` cannot go on, or None. Raises RPCError as Temporal does."""
        pollers = await self.pollers()
        return stranded_message(
            wid, build, pollers, self.task_queue, time.time(), self.stale_seconds
        )

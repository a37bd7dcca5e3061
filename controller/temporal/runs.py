"""The one way the controller starts, finds, signals and stops workflow runs (issue 37, item 4).

Every call is bounded (``RPC_TIMEOUT``: a frontend that accepts and never answers must not hang a
reconcile or a CLI command; a timed-out call raises RPCError DEADLINE_EXCEEDED). Starting is
idempotent: a workflow ID names what the run is for, and starting an ID that is already running
answers "already started" instead of a second run, so a controller restart never duplicates one.
How often an ID may run is a word of ``Reuse``, not an SDK enum picked at each call site.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from enum import Enum
from typing import Any, Final, TypeAlias

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

log = logging.getLogger("dmrollout.controller.runs")

RPC_TIMEOUT: Final = timedelta(seconds=10)
# The client as the rooms above this door name it (they import no temporalio module).
TemporalClient: TypeAlias = Client


class Reuse(Enum):
    """How often one workflow ID may run."""

    # One run per ID, ever: an ended run is not started again by a resync (a pipeline revision).
    ONCE = WorkflowIDReusePolicy.REJECT_DUPLICATE
    # A closed run may run again (the spec came back to a revision after a supersede, a store
    # lost a second time); a running one is never started twice.
    AFTER_CLOSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE


class RunState(Enum):
    RUNNING = "Running"
    COMPLETED = "Completed"
    ENDED_OTHERWISE = "Ended"  # failed, cancelled, terminated, timed out, continued


async def start_once(
    client: Client,
    run: Callable[[Any, Any], Awaitable[Any]],
    arg: Any,
    *,
    wid: str,
    task_queue: str,
    reuse: Reuse,
    summary: str,
    details: str | None = None,
    attributes: TypedSearchAttributes | None = None,
    task_timeout: timedelta | None = None,
) -> bool:
    """Start ``run(arg)`` as workflow ``wid``; False when that workflow was already running (or,
    with ``Reuse.ONCE``, ever ran)."""
    try:
        await client.start_workflow(
            run,
            arg,
            id=wid,
            task_queue=task_queue,
            id_reuse_policy=reuse.value,
            search_attributes=attributes or TypedSearchAttributes.empty,
            static_summary=summary,
            static_details=details,
            execution_timeout=None,
            task_timeout=task_timeout,
            rpc_timeout=RPC_TIMEOUT,
        )
    except WorkflowAlreadyStartedError:
        return False
    log.info("started %s", wid)
    return True


async def state_of(client: Client, wid: str) -> RunState | None:
    """The latest run's state; None when no run of ``wid`` is known."""
    try:
        desc = await client.get_workflow_handle(wid).describe(rpc_timeout=RPC_TIMEOUT)
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if desc.status == WorkflowExecutionStatus.RUNNING:
        return RunState.RUNNING
    if desc.status == WorkflowExecutionStatus.COMPLETED:
        return RunState.COMPLETED
    return RunState.ENDED_OTHERWISE


async def result_of(client: Client, wid: str, result_type: type[Any]) -> Any:
    """The result of a completed run (``state_of`` said COMPLETED)."""
    handle = client.get_workflow_handle(wid, result_type=result_type)
    return await handle.result(rpc_timeout=RPC_TIMEOUT)


async def signal_if_running(client: Client, wid: str, signal: Any, arg: Any) -> bool:
    """Send ``signal(arg)`` to the running run of ``wid``; False when none runs."""
    if await state_of(client, wid) != RunState.RUNNING:
        return False
    await client.get_workflow_handle(wid).signal(signal, arg, rpc_timeout=RPC_TIMEOUT)
    return True


async def running(
    client: Client, query: str, limit: int | None = None
) -> AsyncIterator[tuple[str, TypedSearchAttributes]]:
    """(workflow ID, search attributes) of each run the visibility ``query`` finds."""
    async for wf in client.list_workflows(query, limit=limit, rpc_timeout=RPC_TIMEOUT):
        yield wf.id, wf.typed_search_attributes


async def polled(client: Client, task_queue: str) -> bool:
    """Whether a worker polled ``task_queue``'s workflow tasks lately (Temporal keeps the
    pollers of the last few minutes)."""
    answer = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        timeout=RPC_TIMEOUT,
    )
    return bool(answer.pollers)


# A call's failure answered by (or timed out at) the frontend, named for the rooms above this
# door: ``except TemporalCallError``.
TemporalCallError: TypeAlias = RPCError
# Those and the SDK's connection failures (a lazy client raises RuntimeError while the frontend
# cannot be reached), for callers that keep going on Kubernetes alone: ``except
# TEMPORAL_ERRORS``.
TEMPORAL_ERRORS: Final = (RPCError, RuntimeError)

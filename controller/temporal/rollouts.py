"""The controller's side of Temporal: start, cancel, approve and find rollouts.

Starting is idempotent: a workflow ID names the revision (and retry generation), and starting an
ID that is already running answers "already started" instead of a second run, so a controller
restart never duplicates a rollout. Search attributes are set at start, so visibility finds a
rollout from its first moment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from controller.temporal import runs
from controller.temporal.errors import (
    TemporalUnavailable,
    away_reason,
    is_away,
    is_unreachable,
)
from controller.temporal.runs import RPC_TIMEOUT
from controller.temporal.worker_presence import (
    DEFAULT_STALE_SECONDS,
    RunBuild,
    WorkerPresence,
    run_build,
)
from decisionmodel.rollout.contracts import (
    EVALUATE,
    Phase,
    RolloutInput,
    RolloutProgress,
    workflow_id,
)
from decisionmodel.vocabulary import Reason
from workflows import search_attributes as sa
from workflows.pipeline_details import ui_path
from workflows.rollout import RolloutWorkflow

log = logging.getLogger("dmrollout.controller.rollouts")

# An approval's answer waits for the candidate's check (check_candidate: at most 60 s with its
# retries, e.g. while the runtime's Secret is being fixed): longer, so the answer arrives
# (explorer seed 6013: 10 s ended in "internal error" while the check retried).
APPROVAL_RPC_TIMEOUT: Final = timedelta(seconds=75)
# How long a worker may hold one workflow task (the server's default is 10 s). A task takes
# milliseconds of CPU, but on a saturated host (600 rollouts at once on 2 cores, issue 14) a
# taken task waited past 10 s for the process, timed out and was redone from scratch: more
# load, more timeouts. The worker bounds the tasks it takes at once (worker_max_concurrent_
# workflow_tasks), so what it took finishes well inside this; a worker killed mid-task delays
# that one workflow by it once (activities' heartbeat timeout is 30 s too).
WORKFLOW_TASK_TIMEOUT: Final = timedelta(seconds=30)


# After Temporal did not answer, calls fail at once for this long instead of each waiting its
# own timeout: with Temporal away, reconciles go on looking after the stable without delay.
UNREACHABLE_HOLD_SECONDS: Final = 10.0


@dataclass(frozen=True)
class ClosedRun:
    """A closed run of a workflow ID, as the restart discipline reads it."""

    status: str  # WorkflowExecutionStatus name
    close_time: datetime


@dataclass(frozen=True)
class RunningRollout:
    workflow_id: str
    run_id: str | None
    revision: str | None
    # The policy digest of what the run enforces, from its own input (None: not known).
    policy: str | None = None
    # Which workers may take its next task (None: not described).
    build: RunBuild | None = None


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def dm_query(dm_namespace: str, dm_name: str) -> str:
    return f"DmNamespace = {_quote(dm_namespace)} AND DmName = {_quote(dm_name)}"


def revision_query(dm_namespace: str, dm_name: str, revision: str) -> str:
    """The rollouts of one revision of a DecisionModel (DmRevision is the resolved hash)."""
    return f"{dm_query(dm_namespace, dm_name)} AND DmRevision = {_quote(revision)}"


class Rollouts:
    def __init__(
        self,
        client: Client,
        task_queue: str,
        ui_url: str = "",
        where: str = "",
        poll_stale_seconds: float = DEFAULT_STALE_SECONDS,
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self.presence = WorkerPresence(client, task_queue, poll_stale_seconds, RPC_TIMEOUT)
        self.ui_url = ui_url.rstrip("/")
        # How a TemporalUnavailable names Temporal: address and namespace.
        self.where = where or f"Temporal namespace {getattr(client, 'namespace', '?')!r}"
        # run ID → policy digest of its input: a run's input never changes, so it is read once.
        self.policies: dict[str, str] = {}
        self._down_until = 0.0
        self._down_why = ""
        self._down_reason = Reason.TEMPORAL_UNAVAILABLE
        # Called when Temporal refuses the credential (controller.temporal.client.ApiKeyReload:
        # a rotated API key is read again, bounded).
        self.on_refused: Callable[[Reason], None] | None = None

    @asynccontextmanager
    async def reachable(self) -> AsyncIterator[None]:
        """Run Temporal calls; their failure to reach Temporal, or Temporal's refusal of the
        controller's credential, raises TemporalUnavailable (its ``reason`` says which), and for
        UNREACHABLE_HOLD_SECONDS after it every call does so at once."""
        if time.monotonic() < self._down_until:
            raise TemporalUnavailable(self._down_why, self._down_reason)
        try:
            yield
        except (RPCError, RuntimeError) as e:
            reason = away_reason(e)
            if reason is None:
                raise
            raise self._went_away(e, reason) from None

    def _went_away(self, error: RPCError | RuntimeError, reason: Reason) -> TemporalUnavailable:
        detail = error.message if isinstance(error, RPCError) else str(error)
        detail = (detail.splitlines() or [""])[0][:200]
        if reason == Reason.TEMPORAL_UNAVAILABLE:
            self._down_why = f"{self.where} did not answer ({detail})"
        elif reason == Reason.TEMPORAL_PERMISSION_DENIED:
            self._down_why = f"{self.where} denied the controller's identity ({detail})"
        else:
            self._down_why = f"{self.where} refused the controller's credential ({detail})"
        self._down_reason = reason
        self._down_until = time.monotonic() + UNREACHABLE_HOLD_SECONDS
        if reason != Reason.TEMPORAL_UNAVAILABLE and self.on_refused is not None:
            self.on_refused(reason)
        return TemporalUnavailable(self._down_why, reason)

    async def start(self, inp: RolloutInput) -> bool:
        """Start the rollout of ``inp``; False when that workflow was already running."""
        return await runs.start_once(
            self.client,
            RolloutWorkflow.run,
            inp,
            wid=workflow_id(inp.dm, inp.requested_revision, inp.retry_token),
            task_queue=self.task_queue,
            # A closed run of the same revision may run again (the spec came back to it after a
            # supersede); a running one is never started twice.
            reuse=runs.Reuse.AFTER_CLOSE,
            attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(sa.DM_NAMESPACE, inp.dm.namespace),
                    SearchAttributePair(sa.DM_NAME, inp.dm.name),
                    SearchAttributePair(sa.DM_REVISION, inp.requested_revision),
                    SearchAttributePair(sa.DM_MODEL, inp.revision.model),
                    SearchAttributePair(sa.DM_PHASE, Phase.PENDING.value),
                ]
            ),
            summary=f"Rollout of {inp.revision.model} to DecisionModel "
            f"{inp.dm.namespace}/{inp.dm.name}",
            details=f"requested revision `{inp.requested_revision}`, "
            f"{inp.replicas} replica(s), device {inp.revision.device}, promotion "
            f"{inp.promotion}" + (f", retry {inp.retry_token!r}" if inp.retry_token else ""),
            task_timeout=WORKFLOW_TASK_TIMEOUT,
        )

    async def running(self, dm_namespace: str, dm_name: str) -> list[RunningRollout]:
        query = f"{dm_query(dm_namespace, dm_name)} AND ExecutionStatus = 'Running'"
        found: list[RunningRollout] = []
        async for wf in self.client.list_workflows(query, rpc_timeout=RPC_TIMEOUT):
            revision = wf.typed_search_attributes.get(sa.DM_REVISION)
            policy = await self.policy_of(wf.id, wf.run_id)
            found.append(RunningRollout(wf.id, wf.run_id, revision, policy))
        return found

    async def describe_running(self, wid: str) -> RunningRollout | None:
        """The workflow ``wid`` when it runs (one bounded describe, no visibility list); None
        when it is closed or unknown. Temporal away: TemporalUnavailable."""
        async with self.reachable():
            try:
                desc = await self.client.get_workflow_handle(wid).describe(rpc_timeout=RPC_TIMEOUT)
            except RPCError as e:
                if e.status == RPCStatusCode.NOT_FOUND:
                    return None
                raise
            if desc.status != WorkflowExecutionStatus.RUNNING:
                return None
            revision = desc.typed_search_attributes.get(sa.DM_REVISION)
            policy = await self.policy_of(wid, desc.run_id)
        build = run_build(desc.raw_description.workflow_execution_info)
        return RunningRollout(wid, desc.run_id, revision, policy, build)

    async def build_of(self, wid: str) -> RunBuild | None:
        """Which workers may take the run's next task (one describe); None when unknown."""
        try:
            desc = await self.client.get_workflow_handle(wid).describe(rpc_timeout=RPC_TIMEOUT)
        except RPCError:
            return None
        return run_build(desc.raw_description.workflow_execution_info)

    async def stranded(self, wid: str, build: RunBuild | None = None) -> str | None:
        """Why no worker can take the run's next task, naming the fix (issue 34); None when
        one can, or when that cannot be told now."""
        build = build or await self.build_of(wid)
        if build is None:
            return None
        try:
            return await self.presence.stranded(wid, build)
        except RPCError as e:
            if is_unreachable(e):
                raise
            log.info("pollers of %s: %s", self.task_queue, e.message)
            return None

    async def policy_of(self, wid: str, run_id: str) -> str | None:
        """The policy digest of the run's own input (its first history event), not of anything
        its starter declared (a memo, a search attribute): what its steps will enforce. None
        when the history cannot be read now (the run is then left as it is)."""
        if run_id in self.policies:
            return self.policies[run_id]
        handle = self.client.get_workflow_handle(wid, run_id=run_id)
        try:
            async for event in handle.fetch_history_events(page_size=1):
                started = event.workflow_execution_started_event_attributes
                decoded = await self.client.data_converter.decode(
                    started.input.payloads, [RolloutInput]
                )
                break
            else:
                return None
        except (RPCError, ValueError, TypeError) as e:
            if is_away(e):
                raise
            log.info("policy of %s: %s", wid, e)
            return None
        if not decoded or not isinstance(decoded[0], RolloutInput):
            return None
        digest = decoded[0].policy().digest()
        if len(self.policies) > 10_000:  # closed runs are not pruned one by one: bound it
            self.policies.clear()
        self.policies[run_id] = digest
        return digest

    async def in_flight(self, namespaces: list[str] | None = None) -> set[str]:
        """IDs of rollouts in flight, within the watched namespaces when the controller is scoped.

        AwaitingPromotion counts (it holds a candidate's resources and is not decided). A
        promoted rollout whose workflow still waits out the grace before deleting the previous
        revision does not (DmPhase Ready): it is no longer rolling out, `kubectl get dm` says
        Ready, and counting it made a fleet wave wait a grace per slot while fewer than the
        budget were visibly rolling (measured with bench/fleet.py).
        """
        query = (
            "WorkflowType = 'RolloutWorkflow' AND ExecutionStatus = 'Running' "
            f"AND DmPhase != {_quote(Phase.READY.value)}"
        )
        if namespaces:
            query += f" AND DmNamespace IN ({', '.join(_quote(n) for n in namespaces)})"
        return {wf.id async for wf in self.client.list_workflows(query, rpc_timeout=RPC_TIMEOUT)}

    async def closed_runs(self, wid: str) -> list[ClosedRun]:
        """The closed runs of one workflow ID (visibility), for the restart discipline."""
        query = f"WorkflowId = {_quote(wid)} AND ExecutionStatus != 'Running'"
        runs: list[ClosedRun] = []
        async for wf in self.client.list_workflows(query, rpc_timeout=RPC_TIMEOUT):
            if wf.status is not None and wf.close_time is not None:
                runs.append(ClosedRun(wf.status.name, wf.close_time))
        return runs

    async def cancel(self, wid: str) -> None:
        """Cancel (never terminate): the workflow cleans up its own candidate objects."""
        async with self.reachable():
            try:
                await self.client.get_workflow_handle(wid).cancel(rpc_timeout=RPC_TIMEOUT)
                log.info("cancelled %s", wid)
            except RPCError as e:
                if is_away(e):
                    raise
                log.info("cancel %s: %s", wid, e.message)

    async def abort(self, wid: str, reason: str) -> None:
        """Ask the run to stop and roll back (the stable keeps serving)."""
        handle = self.client.get_workflow_handle(wid)
        await handle.signal(RolloutWorkflow.abort, reason, rpc_timeout=RPC_TIMEOUT)

    async def progress(self, wid: str) -> RolloutProgress | None:
        try:
            answer: RolloutProgress = await self.client.get_workflow_handle(wid).query(
                RolloutWorkflow.progress, rpc_timeout=RPC_TIMEOUT
            )
        except RPCError:
            return None
        return answer

    async def evaluation_live(self, wid: str) -> tuple[int, int] | None:
        """(cases done, cases that will run) of the evaluate step running now, from its last
        heartbeat (counts only; one bounded describe). None when no evaluate runs or it has not
        heartbeated yet. Both lanes count when the stable is evaluated beside the candidate."""
        try:
            desc = await self.client.get_workflow_handle(wid).describe(rpc_timeout=RPC_TIMEOUT)
        except RPCError:
            return None
        for pending in desc.raw_description.pending_activities:
            if pending.activity_type.name != EVALUATE or not pending.heartbeat_details.payloads:
                continue
            details = await self.client.data_converter.decode(pending.heartbeat_details.payloads)
            beat: dict[str, Any] = details[0] if details and isinstance(details[0], dict) else {}
            total = int(beat.get("cases_total") or 0)
            lanes: list[dict[str, Any]] = [
                lane for k in ("candidate", "baseline") if isinstance(lane := beat.get(k), dict)
            ]
            if not total or not lanes:
                return None
            done: int = sum(int(lane.get("next_case_index") or 0) for lane in lanes)
            return done, total * len(lanes)
        return None

    async def approve(self, wid: str, approval: str, *, reject: bool = False) -> str | None:
        """Send the approval (or, with ``reject``, the rejection of a candidate held on
        inconclusive evidence) as an update; None when applied, else the refusal."""
        update = RolloutWorkflow.reject if reject else RolloutWorkflow.approve
        try:
            await self.client.get_workflow_handle(wid).execute_update(
                update, approval, rpc_timeout=APPROVAL_RPC_TIMEOUT
            )
        except WorkflowUpdateFailedError as e:
            return str(e.cause) if e.cause else str(e)
        return None

    def ui_link(self, wid: str, namespace: str = "default") -> str:
        return f"{self.ui_url}{ui_path(namespace, wid)}"

"""PipelineStageWorkflow: one stage of a pipeline, run by the stage cluster's own worker.

A child of PipelineWorkflow on the task queue ``dmrollout-stage-<cluster>``: only a worker of
that cluster polls it, with that cluster's in-cluster credentials, so no component holds
another cluster's. It applies the DecisionModel (the template, digest pinned to the freight),
finds the rollout that cluster's controller started for it, and returns that rollout's
verdict. The cluster's RolloutWorkflow is unchanged: its gates decide. While the cluster's API
server is away the activities retry (its stage waits, nothing fails); a killed worker's
activities are retried on the next one, and applying is idempotent (server-side apply), so no
second rollout starts. Cancelled (the pipeline aborted or was superseded), it aborts the
cluster's rollout it found, which rolls back; a stage already promoted keeps serving.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from functools import partial
from typing import Final, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from decisionmodel.pipeline.contracts import (
        ABORT_STAGE_ROLLOUT,
        APPLY_STAGE,
        AWAIT_STAGE_ROLLOUT,
        AWAIT_STAGE_VERDICT,
        AbortStageRollout,
        AppliedStage,
        StageInput,
        StageRollout,
        StageVerdict,
    )
    from workflows import retry_policies
    from workflows.pipeline_details import stage_details

APPLY_BOUND: Final = timedelta(seconds=30)
HEARTBEAT: Final = timedelta(seconds=60)
# Finding the rollout: the controller starts it within one reconcile of the apply.
ROLLOUT_BOUND: Final = timedelta(minutes=10)
# The verdict: the rollout's own deadlines end it, a Manual promotion in the template can wait
# for its approval up to a week (RolloutPolicy's default approval wait); a day more of slack.
VERDICT_BOUND: Final = timedelta(days=8)
# Runs started before a cancelled apply was finished (and its rollout aborted) replay as
# they ran.
APPLY_SHIELD_PATCH: Final = "stage-apply-shielded"
# The change id of "a cancelled stage stops retrying its apply": the attempt in flight ends
# (and what it applied is aborted), no further attempt starts. Before it, the shielded apply
# went on retrying while the stage's cluster was away and applied the stopped run's spec when
# the cluster came back, possibly over a newer run's (pipeline explorer, seed 21).
APPLY_STOPS_ON_CANCEL_PATCH: Final = "stage-apply-stops-on-cancel"
# Cancelled before the rollout was found: how long the cleanup looks for it.
ABORT_FIND_BOUND: Final = timedelta(minutes=2)

T = TypeVar("T")
TRY_CANCEL: Final = workflow.ActivityCancellationType.TRY_CANCEL
WAIT_CANCELLED: Final = workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED


@workflow.defn(name="PipelineStageWorkflow")
class PipelineStageWorkflow:
    @workflow.run
    async def run(self, inp: StageInput) -> StageVerdict:
        where = f"{inp.namespace}/{inp.name} on {workflow.info().task_queue}"
        details = partial(stage_details, inp.stage, where)
        workflow.set_current_details(details(None, None, "applying"))
        applied = await self._apply(inp)
        workflow.set_current_details(details(None, None, "waiting for its rollout"))
        rollout: StageRollout | None = None
        try:
            rollout = await self._step(AWAIT_STAGE_ROLLOUT, applied, StageRollout, ROLLOUT_BOUND)
            namespace = rollout.temporal_namespace or None
            workflow.set_current_details(details(_id(rollout), namespace, "rolling out"))
            verdict = await self._step(AWAIT_STAGE_VERDICT, rollout, StageVerdict, VERDICT_BOUND)
        except asyncio.CancelledError:
            await self._abort_applied(inp, applied, rollout)
            raise
        verdict = verdict.model_copy(
            update={
                "rollout_workflow_id": verdict.rollout_workflow_id or _id(rollout),
                "rollout_namespace": verdict.rollout_namespace or namespace,
            }
        )
        ended = f"{verdict.state} ({verdict.reason})" if verdict.reason else str(verdict.state)
        rid, rns = verdict.rollout_workflow_id, verdict.rollout_namespace
        workflow.set_current_details(details(rid, rns, ended))
        return verdict

    async def _apply(self, inp: StageInput) -> AppliedStage:
        """Apply; when cancelled meanwhile, let the attempt in flight end first: it may have
        reached the cluster, whose controller would then roll it out with nobody left to
        abort it. What it applied is aborted (its rollout rolls back), then the cancellation
        goes on. No attempt starts after the cancel (APPLY_STOPS_ON_CANCEL_PATCH)."""
        if not workflow.patched(APPLY_SHIELD_PATCH):
            return await self._step(APPLY_STAGE, inp, AppliedStage, APPLY_BOUND, beat=False)
        stops = workflow.patched(APPLY_STOPS_ON_CANCEL_PATCH)
        applying = asyncio.ensure_future(
            self._step(
                APPLY_STAGE, inp, AppliedStage, APPLY_BOUND, beat=False,
                cancel=WAIT_CANCELLED if stops else TRY_CANCEL,
            )
        )  # fmt: skip
        try:
            return await asyncio.shield(applying)
        except asyncio.CancelledError:
            if stops:
                applying.cancel()  # no retry; the attempt in flight ends as it ends
            try:
                applied = await applying
            except (ApplicationError, asyncio.CancelledError):
                raise asyncio.CancelledError() from None  # nothing was applied
            await self._abort_applied(inp, applied, None)
            raise

    async def _abort_applied(
        self, inp: StageInput, applied: AppliedStage, rollout: StageRollout | None
    ) -> None:
        """Cancelled once the spec was applied: the cluster's controller starts (or started)
        its rollout, so find it (bounded) and abort it; it rolls back."""
        if rollout is None:
            try:
                rollout = await self._step(
                    AWAIT_STAGE_ROLLOUT,
                    applied,
                    StageRollout,
                    ABORT_FIND_BOUND,
                    total=ABORT_FIND_BOUND,
                )
            except (ApplicationError, asyncio.CancelledError) as e:
                workflow.logger.warning("no rollout of %s to abort: %s", applied.name, e)
                return
        if rollout.workflow_id:
            await _abort_rollout(rollout, inp)

    async def _step(
        self,
        name: str,
        arg: object,
        result_type: type[T],
        bound: timedelta,
        *,
        beat: bool = True,
        total: timedelta | None = None,
        cancel: workflow.ActivityCancellationType = workflow.ActivityCancellationType.TRY_CANCEL,
    ) -> T:
        try:
            result: T = await workflow.execute_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=bound,
                schedule_to_close_timeout=total,
                heartbeat_timeout=HEARTBEAT if beat else None,
                retry_policy=retry_policies.STEP,
                cancellation_type=cancel,
            )
        except ActivityError as e:
            cause = e.cause
            if isinstance(cause, CancelledError):  # the stage was cancelled, not failed
                raise asyncio.CancelledError() from e
            kind = cause.type if isinstance(cause, ApplicationError) and cause.type else name
            raise ApplicationError(str(cause or e), type=kind, non_retryable=True) from None
        return result


def _id(rollout: StageRollout | None) -> str | None:
    return rollout.workflow_id if rollout is not None and rollout.workflow_id else None


async def _abort_rollout(rollout: StageRollout, inp: StageInput) -> None:
    """Abort the cluster's rollout (it compensates itself), through the cluster's worker: the
    rollout lives in the cluster's own Temporal namespace. Best effort, bounded."""
    reason = f"pipeline {inp.pipeline.namespace}/{inp.pipeline.name} stopped stage {inp.stage}"
    try:
        await workflow.execute_activity(
            ABORT_STAGE_ROLLOUT,
            AbortStageRollout(
                workflow_id=rollout.workflow_id, run_id=rollout.run_id, reason=reason
            ),
            result_type=bool,
            start_to_close_timeout=APPLY_BOUND,
            schedule_to_close_timeout=ABORT_FIND_BOUND,
            retry_policy=retry_policies.STEP,
        )
    except ActivityError as e:
        workflow.logger.warning("could not abort %s: %s", rollout.workflow_id, e.cause or e)

"""PipelineWorkflow: one revision of a DecisionModelPipeline through its stages (issue 25).

One workflow per (pipeline, revision), ID ``pipeline/<namespace>/<name>/<revision>``, on the
hub's task queue. It pins the freight once (the template's tag resolved to a digest by the hub's
worker, or the template's own pin), then runs every stage as soon as its dependencies allow:
independent stages in parallel, each through soak (a durable timer from its dependencies'
promotions), change window (a timer to the next opening), approval (Manual stages wait for an
update bound to the freight) and its rollout. The rollout is a child workflow
(``PipelineStageWorkflow``) on the stage cluster's own task queue, run by that cluster's worker,
so the hub never holds another cluster's credentials and the history links every stage. A
cluster that is away leaves its child waiting in its queue; nothing else waits on it but its
dependents. A failed stage blocks everything downstream; ``abort`` cancels the stages in
flight (their rollouts are aborted; promoted stages keep serving).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from decisionmodel.api.pipeline import Approval as ApprovalMode
    from decisionmodel.api.pipeline import Stage
    from decisionmodel.pipeline.contracts import (
        CHECK_STAGE,
        RECORD_PIPELINE,
        RESOLVE_FREIGHT,
        Approval,
        Freight,
        FreightProblem,
        PipelineInput,
        PipelineRecord,
        ResolveFreightInput,
        StageHealth,
        StageHealthInput,
        StageInput,
    )
    from decisionmodel.pipeline.stages import (
        StageProgress,
        blocked_by,
        dependencies_promoted,
        soaked_at,
        upstream_verdicts,
    )
    from decisionmodel.pipeline.windows import describe, next_opening
    from decisionmodel.vocabulary import PERMANENT_REASONS, Reason, StageReason, StageState
    from workflows import pipeline_attributes as attrs
    from workflows import retry_policies
    from workflows.pipeline_details import pipeline_details
    from workflows.pipeline_stage import PipelineStageWorkflow

HUB_STEP = timedelta(seconds=30)
# Runs started before the run upserted its phase and stage states replay without it.
ATTRIBUTES_PATCH = "pipeline-progress-attributes"
# Runs started before the approval wait was bounded, or the window re-checked after a late
# approval, replay as they ran.
APPROVAL_BOUND_PATCH = "pipeline-approval-bound"
WINDOW_AFTER_APPROVAL_PATCH = "pipeline-window-after-approval"
# Every wait bounded: as a rollout's manual promotion (RolloutPolicy's default), a week.
APPROVAL_BOUND = timedelta(days=7)
# Runs started before a stage checked that the tag still serves the freight replay as they ran.
FREIGHT_SERVED_PATCH = "pipeline-freight-served"
# A tag re-published after the freight was pinned: how often the stage looks again, how long.
FREIGHT_RECHECK = timedelta(seconds=30)
FREIGHT_BOUND = APPROVAL_BOUND
# Runs started before the run showed its own (pending) stages before resolving, and bounded
# the resolve, replay as they ran (issue 34: the previous run's stages showed as the new
# revision's while the resolve failed or hung, and a hung registry was retried forever).
FREIGHT_SHOWN_PATCH = "pipeline-freight-shown"
# One try per activity, retried by the run so each failure shows on FreightPinned at once:
# 1 s doubling to a minute, for at most ten minutes (then Failed; a retry starts again).
RESOLVE_PAUSE_FIRST = timedelta(seconds=1)
RESOLVE_PAUSE_MAX = timedelta(minutes=1)
RESOLVE_BOUND = timedelta(minutes=10)
# Runs started before the soak watched its dependencies replay as they ran (a bare timer:
# a staging that degraded or rolled back during its soak still let production go).
SOAK_WATCH_PATCH = "pipeline-soak-watch"
# How often a soak looks at its dependencies: every minute, or 1/60 of a long soak (the
# history stays bounded); always once more at its end, which gates the stage.
SOAK_CHECK_MIN = timedelta(minutes=1)
SOAK_CHECKS = 60
CHECK_STEP = timedelta(seconds=30)
CHECK_BOUND = timedelta(minutes=2)
# Runs started before an approval was re-confirmed against the upstream verdicts it bound
# (the dependencies asked again just before the approved stage rolls out) replay as they ran.
APPROVAL_VERDICTS_PATCH = "pipeline-approval-verdicts"
# Runs started before the rechecks backed off and were bounded replay as they ran. A tag
# re-published (looked at every 30 s) or a dependency's cluster away (asked every minute, or
# every 2 min of timed-out checks after a soak) added about ten history events a look, without
# end: Temporal terminates a run past 51,200 events, so about two days of a moved tag ended the
# run with no verdict (the pipeline explorer found it). Now each pause doubles up to
# RECHECK_MAX, and a dependency that cannot be asked for UNCONFIRMED_BOUND fails the stage.
RECHECK_BACKOFF_PATCH = "pipeline-recheck-backoff"
RECHECK_MAX = timedelta(minutes=30)
UNCONFIRMED_BOUND = APPROVAL_BOUND


def _longer(pause: timedelta) -> timedelta:
    """The next wait before asking again: doubled, at most RECHECK_MAX."""
    return min(pause * 2, RECHECK_MAX)


@workflow.defn(name="PipelineWorkflow")
class PipelineWorkflow:
    def __init__(self) -> None:
        self._inp: PipelineInput | None = None
        self._progress: dict[str, StageProgress] = {}
        self._freight: Freight | None = None
        self._approvals: dict[str, Approval] = {}
        self._aborted: str | None = None
        self._dirty = False
        self._done = False
        self._attributes: dict[str, object] = {}
        self._freight_problem: FreightProblem | None = None
        self._pinned_at: datetime | None = None

    @workflow.run
    async def run(self, inp: PipelineInput) -> PipelineRecord:
        self._inp = inp
        now = workflow.now()
        self._progress = {s.name: StageProgress(since=now) for s in inp.spec.stages}
        for name, at in inp.promoted.items():  # a retry: what the failed run promoted stays
            if name in self._progress:
                self._progress[name] = StageProgress(
                    state=StageState.PROMOTED,
                    reason=StageReason.PROMOTED_BY_EARLIER_RUN,
                    message=f"promoted by {inp.retry_of}",
                    since=at,
                    promoted_at=at,
                )
        self._show_details()
        if workflow.patched(FREIGHT_SHOWN_PATCH):
            # This run's stages replace the previous run's on the status before anything can
            # fail or hang.
            await self._record()
            self._freight = await self._pin_freight_shown(inp)
            if self._freight is None:  # aborted while resolving
                return self._snapshot()
            self._pinned_at = workflow.now()
        else:
            self._freight = await self._pin_freight(inp)
        self._show_details()
        await self._record()
        stages = [asyncio.create_task(self._run_stage(s)) for s in inp.spec.stages]
        recorder = asyncio.create_task(self._keep_recording())
        await asyncio.gather(*stages)
        self._done = True
        await recorder
        return self._snapshot()

    # --- the messages a person (or the CLI, or the Temporal UI) sends ---------------------

    @workflow.update
    async def approve(self, approval: Approval) -> str:
        """A Manual stage may start; bound to the freight pinned for this run, the run and
        its upstream verdicts (recorded: those the approver named, or those shown now)."""
        stage = next(s for s in self._require().spec.stages if s.name == approval.stage)
        upstream = upstream_verdicts(stage, self._progress)
        self._approvals[approval.stage] = approval.model_copy(
            update={"run_id": workflow.info().workflow_id, "upstream": upstream}
        )
        verdicts = ", ".join(f"{k}={v}" for k, v in upstream.items()) or "no dependency"
        return f"stage {approval.stage} approved for {approval.digest[:12]} on {verdicts}"

    @approve.validator
    def _check_approval(self, approval: Approval) -> None:
        progress = self._progress.get(approval.stage)
        if progress is None:
            raise ValueError(f"no stage {approval.stage!r} in this pipeline")
        if progress.state != StageState.AWAITING_APPROVAL:
            # Not before its dependencies verified the freight, nor for an Automatic stage.
            raise ValueError(
                f"stage {approval.stage} is {progress.state}, not AwaitingApproval: approve it "
                "once its dependencies have promoted and soaked"
            )
        self._check_bound_to_run(approval)
        if self._freight is None or approval.digest != self._freight.digest:
            pinned = self._freight.digest if self._freight else "not yet pinned"
            raise ValueError(
                f"the approval is for digest {approval.digest[:12]}, this run's freight is "
                f"{pinned[:12]}: approve what was verified upstream"
            )

    def _check_bound_to_run(self, approval: Approval) -> None:
        """Refuse an approval for another run (a retry is a new one) or for other upstream
        verdicts than this run's now: the approver saw something else."""
        wid = workflow.info().workflow_id
        if approval.run_id and approval.run_id != wid:
            raise ValueError(
                f"the approval is for run {approval.run_id}, this run is {wid}: approve what "
                "this run verified (`dmrollout pipeline status`)"
            )
        stage = next(s for s in self._require().spec.stages if s.name == approval.stage)
        now = upstream_verdicts(stage, self._progress)
        if approval.upstream and approval.upstream != now:
            raise ValueError(
                f"the approval is for upstream verdicts {approval.upstream}, this run's are "
                f"{now}: approve what was verified upstream"
            )

    @workflow.signal
    def abort(self, reason: str) -> None:
        """Stop the stages in flight (their rollouts roll back) and start no other."""
        self._aborted = reason or "aborted"

    @workflow.query
    def progress(self) -> PipelineRecord:
        return self._snapshot()

    # --- the stages ---------------------------------------------------------------------

    async def _run_stage(self, stage: Stage) -> None:
        if self._progress[stage.name].state == StageState.PROMOTED:
            return  # a retry's: promoted by the failed run, with this freight
        if not await self._dependencies(stage):
            return
        if not await self._soak(stage) or not await self._window(stage):
            return
        if stage.approval == ApprovalMode.MANUAL:
            if not await self._approval(stage):
                return
            # Approved after the window closed: the stage still starts only inside one.
            if workflow.patched(WINDOW_AFTER_APPROVAL_PATCH) and not await self._window(stage):
                return
            if workflow.patched(APPROVAL_VERDICTS_PATCH) and not await self._still_approved(stage):
                return
        if workflow.patched(FREIGHT_SERVED_PATCH) and not await self._freight_served(stage):
            return
        await self._roll_out(stage)

    async def _dependencies(self, stage: Stage) -> bool:
        def settled() -> bool:
            return (
                self._aborted is not None
                or dependencies_promoted(stage, self._progress)
                or blocked_by(stage, self._progress) is not None
            )

        await workflow.wait_condition(settled)
        dep = blocked_by(stage, self._progress)
        if dep is not None:
            why = self._progress[dep]
            self._set(
                stage, StageState.BLOCKED, StageReason.DEPENDENCY_FAILED, f"{dep}: {why.state}"
            )
            return False
        return self._not_aborted(stage)

    async def _soak(self, stage: Stage) -> bool:
        until = soaked_at(stage, self._progress)
        if until is None or until <= workflow.now():
            return True
        self._set(stage, StageState.SOAKING, StageReason.SOAKING, f"until {until.isoformat()}")
        if not workflow.patched(SOAK_WATCH_PATCH):
            await self._sleep_until(until)
            return self._not_aborted(stage)
        every = max(SOAK_CHECK_MIN, (stage.soak_time or SOAK_CHECK_MIN) / SOAK_CHECKS)
        bounded = workflow.patched(RECHECK_BACKOFF_PATCH)
        pause = every
        while True:
            if bounded and workflow.now() >= until:  # soaked, a cluster unconfirmed: back off
                await self._sleep_until(workflow.now() + pause)
                pause = _longer(pause)
            else:
                await self._sleep_until(min(workflow.now() + every, until))
            if not self._not_aborted(stage):
                return False
            confirmed = await self._dependencies_serve(stage)
            if blocked_by(stage, self._progress) is not None:
                return await self._dependencies(stage)  # Blocked, naming the dependency
            if confirmed and workflow.now() >= until:
                return True
            if bounded and workflow.now() >= until + UNCONFIRMED_BOUND:
                return self._unconfirmed(stage)
            if not confirmed and workflow.now() >= until:
                why = (
                    "soaked; waits until every dependency's cluster confirms it still serves "
                    "the freight (a cluster did not answer; it is asked again)"
                )
                if self._progress[stage.name].message != why:
                    self._set(stage, StageState.SOAKING, StageReason.SOAKING, why)

    async def _still_approved(self, stage: Stage) -> bool:
        """Just before an approved stage rolls out (an approval may wait for a window for
        days): its dependencies are asked again, and the verdicts the approval bound must
        still hold; one that changed (a dependency no longer serving is Failed) invalidates
        it: the stage is Blocked, naming the verdicts approved and those now."""
        approved = self._approvals[stage.name].upstream
        bounded = workflow.patched(RECHECK_BACKOFF_PATCH)
        pause, give_up = SOAK_CHECK_MIN, workflow.now() + UNCONFIRMED_BOUND
        while not await self._dependencies_serve(stage):
            if blocked_by(stage, self._progress) is not None:
                break
            if bounded and workflow.now() >= give_up:
                return self._unconfirmed(stage)
            await self._sleep_until(workflow.now() + pause)  # a cluster did not answer
            if bounded:
                pause = _longer(pause)
            if not self._not_aborted(stage):
                return False
        now = upstream_verdicts(stage, self._progress)
        if now == approved:
            return self._not_aborted(stage)
        why = f"the approval was for {approved}, upstream is now {now}: {_fix_upstream(stage)}"
        self._set(stage, StageState.BLOCKED, StageReason.DEPENDENCY_FAILED, why)
        return False

    def _unconfirmed(self, stage: Stage) -> bool:
        """Failed: a dependency's cluster could not be asked for UNCONFIRMED_BOUND whether it
        still serves the freight (its worker away all that time)."""
        days = UNCONFIRMED_BOUND.days
        deps = ", ".join(stage.depends_on)
        why = (
            f"{deps}: no answer within {days} days whether it still serves the freight (its "
            f"cluster's worker is away); bring it back, then `dmrollout pipeline retry "
            f"{self._require().pipeline.name}` (the freight and the promoted stages stay)"
        )
        self._set(stage, StageState.FAILED, StageReason.DEPENDENCY_UNCONFIRMED, why)
        return False

    async def _dependencies_serve(self, stage: Stage) -> bool:
        """Ask each dependency's cluster whether it still serves the freight, healthy: one
        that does not is Failed (its dependents never start). False: a cluster could not be
        asked (away): the soak does not end before it is."""
        confirmed = True
        for name in stage.depends_on:
            dep = next(s for s in self._require().spec.stages if s.name == name)
            if self._progress[name].state != StageState.PROMOTED:
                continue
            health = await self._check(dep)
            if health is None:
                confirmed = False
            elif not health.serving:
                self._set(dep, StageState.FAILED, health.reason, health.message)
        return confirmed

    async def _check(self, dep: Stage) -> StageHealth | None:
        inp, freight = self._require(), self._freight
        assert freight is not None
        try:
            health: StageHealth = await workflow.execute_activity(
                CHECK_STAGE,
                StageHealthInput(
                    namespace=dep.namespace, name=inp.model_name, digest=freight.digest
                ),
                result_type=StageHealth,
                task_queue=dep.task_queue,
                start_to_close_timeout=CHECK_STEP,
                schedule_to_close_timeout=CHECK_BOUND,
                retry_policy=retry_policies.STEP,
                summary=f"does {dep.name} still serve the freight?",
            )
        except ActivityError as e:
            workflow.logger.warning("could not check stage %s: %s", dep.name, e.cause or e)
            return None
        return health

    async def _window(self, stage: Stage) -> bool:
        opens = next_opening(stage.windows, workflow.now())
        if opens <= workflow.now():
            return True
        message = f"opens {opens.isoformat()} ({describe(stage.windows)})"
        self._set(stage, StageState.WAITING_FOR_WINDOW, StageReason.OUTSIDE_CHANGE_WINDOW, message)
        await self._sleep_until(opens)
        return self._not_aborted(stage)

    async def _approval(self, stage: Stage) -> bool:
        inp = self._require()
        digest = self._freight.digest if self._freight else ""
        hint = f"dmrollout pipeline promote {inp.pipeline.name} --stage {stage.name}"
        self._set(
            stage,
            StageState.AWAITING_APPROVAL,
            StageReason.AWAITING_APPROVAL,
            f"`{hint}` ({digest})",
        )
        bound = APPROVAL_BOUND if workflow.patched(APPROVAL_BOUND_PATCH) else None
        try:
            await workflow.wait_condition(
                lambda: stage.name in self._approvals or self._aborted is not None,
                timeout=bound,
            )
        except TimeoutError:
            days = APPROVAL_BOUND.days
            fix = (
                f"`dmrollout pipeline retry {inp.pipeline.name}` (the freight stays), or change "
                "the pipeline (a new revision starts a new run) to try again"
            )
            why = f"no approval within {days} days of the freight being verified upstream: {fix}"
            self._set(stage, StageState.FAILED, StageReason.APPROVAL_EXPIRED, why)
            return False
        return self._not_aborted(stage)

    async def _freight_served(self, stage: Stage) -> bool:
        """The runtime pulls by tag (RUNTIME_API.md), so a stage can only fetch the freight
        while the tag serves it: re-published meanwhile, the stage waits (its cluster keeps
        its stable) until the verified bytes are back under the tag, never taking others."""
        freight = self._freight
        if freight is None or not freight.resolved_from_registry:
            return True  # pinned by the template: its prefetch verifies the pin
        give_up = workflow.now() + FREIGHT_BOUND
        bounded = workflow.patched(RECHECK_BACKOFF_PATCH)
        pause = FREIGHT_RECHECK
        while True:
            served = await self._served_digest(freight.model)
            if served == freight.digest:
                return self._not_aborted(stage)
            if workflow.now() >= give_up:
                why = _not_served(freight, served, expired=True)
                self._set(stage, StageState.FAILED, StageReason.FREIGHT_NOT_SERVED, why)
                return False
            message = _not_served(freight, served, expired=False)
            if self._progress[stage.name].message != message:
                self._set(stage, StageState.PENDING, StageReason.FREIGHT_NOT_SERVED, message)
            await self._sleep_until(min(workflow.now() + pause, give_up))
            if bounded:
                pause = _longer(pause)
            if not self._not_aborted(stage):
                return False

    async def _served_digest(self, model: str) -> str | None:
        """What the tag serves now (None: the registry does not serve it, or is away)."""
        inp = self._require()
        try:
            served: Freight = await workflow.execute_activity(
                RESOLVE_FREIGHT,
                ResolveFreightInput(pipeline=inp.pipeline, model=model),
                result_type=Freight,
                start_to_close_timeout=HUB_STEP,
                schedule_to_close_timeout=FREIGHT_RECHECK * 4,
                retry_policy=retry_policies.STEP,
                summary=f"does {model} still serve the freight?",
            )
        except ActivityError as e:
            workflow.logger.warning("could not resolve %s: %s", model, e.cause or e)
            return None
        return served.digest

    async def _roll_out(self, stage: Stage) -> None:
        inp = self._require()
        self._set(
            stage, StageState.ROLLING_OUT, StageReason.ROLLING_OUT, f"in cluster {stage.cluster}"
        )
        child = asyncio.create_task(
            workflow.execute_child_workflow(
                PipelineStageWorkflow.run,
                self._stage_input(stage),
                id=f"{workflow.info().workflow_id}/{stage.name}",
                task_queue=stage.task_queue,
                static_summary=f"{stage.name}: {inp.model_name} in {stage.cluster}",
                search_attributes=attrs.for_stage(inp, stage.name),
                # A run cancelled or terminated from the Temporal UI still stops its stages
                # (each aborts its cluster's rollout).
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            )
        )
        await workflow.wait_condition(lambda: child.done() or self._aborted is not None)
        if not child.done():
            child.cancel()  # the child aborts its cluster's rollout, then ends
        try:
            verdict = await child
        except (ChildWorkflowError, asyncio.CancelledError) as e:
            self._set(stage, *_stage_failure(e, self._aborted))
            return
        promoted = verdict.state == StageState.PROMOTED
        self._set(
            stage,
            verdict.state,
            verdict.reason,
            verdict.message,
            rollout=verdict.rollout_workflow_id,
            rollout_namespace=verdict.rollout_namespace,
            promoted_at=workflow.now() if promoted else None,
        )

    def _stage_input(self, stage: Stage) -> StageInput:
        inp = self._require()
        spec = inp.spec.template.spec.to_wire()
        if self._freight is not None:
            spec["digest"] = self._freight.digest
        return StageInput(
            pipeline=inp.pipeline,
            pipeline_revision=inp.revision,
            stage=stage.name,
            namespace=stage.namespace,
            name=inp.model_name,
            spec=spec,
        )

    # --- helpers --------------------------------------------------------------------------

    async def _pin_freight(self, inp: PipelineInput) -> Freight:
        template = inp.spec.template.spec
        if template.digest:
            return Freight(
                model=template.model, digest=template.digest, resolved_from_registry=False
            )
        try:
            freight: Freight = await workflow.execute_activity(
                RESOLVE_FREIGHT,
                ResolveFreightInput(pipeline=inp.pipeline, model=template.model),
                result_type=Freight,
                start_to_close_timeout=HUB_STEP,
                retry_policy=retry_policies.STEP,
                summary=f"resolve {template.model} once for every stage",
            )
        except ActivityError as e:
            raise _failed(e) from None
        return freight

    async def _pin_freight_shown(self, inp: PipelineInput) -> Freight | None:
        """The freight, each failed resolve shown on ``FreightPinned`` (reason and fix) at
        once; bounded by ``RESOLVE_BOUND``, then (or on a permanent reason) the run fails.
        None: aborted meanwhile (every stage Aborted)."""
        template = inp.spec.template.spec
        if inp.freight is not None:
            return inp.freight  # a retry: what its stages verified, whatever the tag does now
        if template.digest:
            return Freight(
                model=template.model, digest=template.digest, resolved_from_registry=False
            )
        give_up = workflow.now() + RESOLVE_BOUND
        pause = RESOLVE_PAUSE_FIRST
        while True:
            try:
                freight: Freight = await workflow.execute_activity(
                    RESOLVE_FREIGHT,
                    ResolveFreightInput(pipeline=inp.pipeline, model=template.model),
                    result_type=Freight,
                    start_to_close_timeout=HUB_STEP,
                    retry_policy=retry_policies.ONCE,
                    summary=f"resolve {template.model} once for every stage",
                )
            except ActivityError as e:
                await self._resolve_failed(inp, e, give_up)  # raises once final
                await self._sleep_until(min(workflow.now() + pause, give_up))
                pause = min(pause * 2, RESOLVE_PAUSE_MAX)
                if self._aborted is not None:
                    for stage in inp.spec.stages:
                        self._not_aborted(stage)
                    await self._record()
                    return None
                continue
            self._freight_problem = None
            return freight

    async def _resolve_failed(
        self, inp: PipelineInput, error: ActivityError, give_up: datetime
    ) -> None:
        """Show the failed resolve on the status; the run's failure once it is final (a
        permanent reason, or the bound reached)."""
        reason, why = _resolve_failure(error)
        final = reason in PERMANENT_REASONS or workflow.now() >= give_up
        before = self._freight_problem
        self._freight_problem = FreightProblem(
            reason=reason,
            message=_freight_message(inp, why, final, give_up),
            final=final,
            since=before.since if before else workflow.now(),  # one transition, not one a try
        )
        await self._record()
        if final:
            raise ApplicationError(self._freight_problem.message, type=reason, non_retryable=True)

    async def _sleep_until(self, when: datetime) -> None:
        """A durable timer that an abort cuts short."""
        left = (when - workflow.now()).total_seconds()
        if left > 0:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._aborted is not None, timeout=left)

    def _not_aborted(self, stage: Stage) -> bool:
        if self._aborted is None:
            return True
        self._set(stage, StageState.ABORTED, StageReason.ABORTED, self._aborted)
        return False

    def _set(
        self,
        stage: Stage,
        state: StageState,
        reason: str,
        message: str,
        *,
        rollout: str | None = None,
        rollout_namespace: str | None = None,
        promoted_at: datetime | None = None,
    ) -> None:
        before = self._progress[stage.name]
        self._progress[stage.name] = StageProgress(
            state=state,
            reason=reason,
            message=message,
            rollout_workflow_id=rollout or before.rollout_workflow_id,
            rollout_namespace=rollout_namespace or before.rollout_namespace,
            since=workflow.now(),
            promoted_at=promoted_at,
        )
        self._dirty = True
        self._show_details()

    def _show_details(self) -> None:
        """The stages with links to their runs and rollouts, on the UI's User Metadata tab
        (not a command: replay needs no patch)."""
        info = workflow.info()
        table = pipeline_details(self._snapshot(), info.namespace, info.workflow_id)
        workflow.set_current_details(table)

    async def _keep_recording(self) -> None:
        """Write the hub's status whenever a stage moved (one activity per batch of changes),
        and once more at the end."""
        while True:
            await workflow.wait_condition(lambda: self._dirty or self._done)
            if self._dirty:
                await self._record()  # changes made while it ran set _dirty again
            elif self._done:
                return

    def _upsert_progress(self) -> None:
        """The run's phase and stage states in its search attributes, what changed only."""
        if not workflow.patched(ATTRIBUTES_PATCH):
            return
        changed = {
            name: update
            for name, update in attrs.progress(self._snapshot()).items()
            if self._attributes.get(name) != update.value
        }
        if changed:
            workflow.upsert_search_attributes(list(changed.values()))
            self._attributes.update({name: u.value for name, u in changed.items()})

    async def _record(self) -> None:
        self._dirty = False
        self._upsert_progress()
        try:
            await workflow.execute_activity(
                RECORD_PIPELINE,
                self._snapshot(),
                start_to_close_timeout=HUB_STEP,
                retry_policy=retry_policies.FEW,
                summary="record the pipeline's status on the hub",
            )
        except ActivityError as e:
            # Best effort: the next change writes it again; the query always has it.
            workflow.logger.warning("could not record the pipeline's status: %s", e.cause or e)

    def _snapshot(self) -> PipelineRecord:
        inp = self._require()
        return PipelineRecord(
            pipeline=inp.pipeline,
            revision=inp.revision,
            freight=self._freight,
            stages=dict(self._progress),
            clusters={s.name: s.cluster for s in inp.spec.stages},
            message=f"aborted: {self._aborted}" if self._aborted else "",
            freight_problem=self._freight_problem,
            pinned_at=self._pinned_at,
            workflow_id=workflow.info().workflow_id,
        )

    def _require(self) -> PipelineInput:
        assert self._inp is not None
        return self._inp


def _stage_failure(error: BaseException, aborted: str | None) -> tuple[StageState, str, str]:
    """The state, reason and message of a stage whose child did not return a verdict."""
    cause = error.cause if isinstance(error, ChildWorkflowError) else error
    if aborted is not None and isinstance(cause, (CancelledError, asyncio.CancelledError)):
        return StageState.ABORTED, StageReason.ABORTED, aborted
    reason = (
        cause.type
        if isinstance(cause, ApplicationError) and cause.type
        else StageReason.STAGE_FAILED
    )
    return StageState.FAILED, reason, str(cause or error)


def _not_served(freight: Freight, served: str | None, *, expired: bool) -> str:
    now = f"sha256:{served[:12]}" if served else "nothing it can resolve"
    wait = (
        f"failed: the tag did not serve them again within {FREIGHT_BOUND.days} days"
        if expired
        else "waits until the tag serves them again"
    )
    return (
        f"{freight.model} now serves {now}, not the sha256:{freight.digest[:12]} the earlier "
        f"stages verified; this stage {wait}, its cluster serving its stable meanwhile: "
        f"re-publish the verified bytes under {freight.model}, or change the pipeline (a new "
        "revision resolves the tag again and goes through every stage from the first)"
    )


def _fix_upstream(stage: Stage) -> str:
    deps = ", ".join(stage.depends_on)
    return (
        f"the approval no longer holds; fix {deps}, then retry the run (`dmrollout pipeline retry`)"
    )


def _resolve_failure(error: ActivityError) -> tuple[str, str]:
    """The reason and the why of one failed resolve: the activity's typed error, or a registry
    that did not answer within the step's timeout."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type:
        return cause.type, str(cause)
    if isinstance(cause, ActivityTimeout):
        return Reason.REGISTRY_UNAVAILABLE, f"the registry did not answer within {HUB_STEP}"
    return StageReason.FREIGHT_FAILED, str(cause or error)


def _freight_message(inp: PipelineInput, why: str, final: bool, give_up: datetime) -> str:
    model = inp.spec.template.spec.model
    head = f"{model} could not be resolved to the digest every stage rolls out: {why}"
    if not final:
        return f"{head}; resolving again until {give_up.isoformat()}, no stage starts meanwhile"
    name = inp.pipeline.name
    return (
        f"{head}; the run failed before any stage: fix the template's model or the registry, "
        f"then `dmrollout pipeline retry {name}` (a new decisionmodel.io/retry value on the "
        "pipeline), or change the pipeline"
    )


def _failed(error: ActivityError) -> ApplicationError:
    cause = error.cause
    kind = (
        cause.type
        if isinstance(cause, ApplicationError) and cause.type
        else StageReason.FREIGHT_FAILED
    )
    return ApplicationError(str(cause or error), type=kind, non_retryable=True)

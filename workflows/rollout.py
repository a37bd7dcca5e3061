"""RolloutWorkflow: one durable workflow per DecisionModel revision.

Deterministic orchestration only: every side effect is an activity scheduled by name (see
``decisionmodel.rollout.contracts``), every wait is a Temporal timer or condition. The history this
workflow leaves is the rollout's audit trail: each activity carries a summary, each phase change
upserts the ``DmPhase`` search attribute. Each step activity writes its own status (its phase
when it starts, its outcome when it ends: ``StepStatus`` in its input), so that a rollout's
history is its steps and little else; waits and compensation write through ``record_status``.

Steps (REFERENCE.md "Rollout steps"), one method each, in the order ``_steps`` runs them:
resolve → prefetch → start → warmup_inspect → [evaluate] → [AwaitingPromotion] → promote →
(grace timer) → delete the previous revision. Failure (``_fail``): record failedRevision and
the reason first, then delete the candidate's objects (RolledBack with a stable, Failed without).
Cancellation (``_superseded``: a newer revision superseded this one): delete this candidate's
objects and end with result Superseded. What the workflow knows lives in one ``RolloutState``
(``workflows/rollout_state.py``), which the ``progress`` query reads.

Versioning: changes to the command sequence go behind ``workflow.patched(<id>)``; the replay
test (tests/integration/test_workflow_replay.py) runs recorded histories through the Replayer
and fails on an unversioned change.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    RetryState,
    TimeoutError,
)

from decisionmodel.vocabulary import ConditionStatus

with workflow.unsafe.imports_passed_through():
    from decisionmodel.api.spec import format_duration
    from decisionmodel.engine.render.labels import revision_objects, store_pvc_name
    from decisionmodel.evaluation.decision import undecided_point_failures
    from decisionmodel.rollout import step_status
    from decisionmodel.rollout.contracts import (
        CHECK_CANDIDATE,
        CHECK_EVALUATION_DESIGN,
        DELETE_REVISION,
        EVALUATE,
        PREFETCH,
        PROMOTE,
        RECORD_STATUS,
        RESOLVE,
        START,
        WARMUP_INSPECT,
        WATCH_PROMOTED,
        WRITE_DECISION_RECORD,
        CandidateReadiness,
        CleanupProgress,
        ConditionUpdate,
        DecisionKind,
        DecisionRecordInput,
        DecisionRecordResult,
        DeleteRevisionInput,
        DeleteRevisionResult,
        EvaluateInput,
        EvaluationDesign,
        EvaluationDesignInput,
        EvaluationOutcome,
        EvaluationPolicy,
        Phase,
        PrefetchResult,
        PromoteInput,
        PromoteResult,
        RejectedApproval,
        ResolveInput,
        ResolveResult,
        RevisionObjectsInput,
        RevisionRecord,
        RolloutInput,
        RolloutOutcome,
        RolloutProgress,
        RolloutResult,
        StartResult,
        StatusUpdate,
        StepStatus,
        WarmupInput,
        WarmupResult,
        WatchPromotedInput,
        WatchPromotedResult,
        approval_token,
    )
    from decisionmodel.rollout.evaluation_status import evaluation_details
    from decisionmodel.vocabulary import (
        GUARD_REASONS,
        ConditionType,
        EvaluationResult,
        EventReason,
        Reason,
    )
    from workflows import cleanup_status, retry_policies
    from workflows import search_attributes as sa
    from workflows.rollout_state import RolloutState


# The change id of "a guard holding a step stops its deadline" (see ``_activity``).
GUARD_HOLDS_THE_DEADLINE = "guard-holds-the-deadline"
# The change id of "compensation is never given up" (see ``_until_done``).
CLEANUP_NEVER_GIVEN_UP = "cleanup-never-given-up"
# The change id of "each step writes its own status; search attributes upserted together"
# (issue 14: a rollout without evaluation went from 91 history events to 42). Rollouts
# started before it keep scheduling record_status at every phase change when they replay.
STATUS_IN_STEPS = "status-in-steps"
# The change id of "a foreign Service met before the promotion is recorded holds the rollout,
# stoppable, until it is gone, and the promotion then runs again" (issue 34; before, it failed
# the rollout for good). Histories from before fail the rollout there, as they did.
PROMOTION_WAITS_FOR_GUARD = "promotion-waits-for-guard"
# The change id of "an approval first checks that the held candidate is model-ready, and is
# refused (not turned into a rollback by promote's re-check) when it is not" (issue 34).
APPROVAL_CHECKS_CANDIDATE = "approval-checks-candidate"
# The change id of "a step that fails after the run was asked to stop (supersede or abort) is
# the stop, not a failure of the revision" (issue 34, explorer seed 3524: a superseded run whose
# step was on a killed worker waited out the step's heartbeat timeout and ended Failed/
# StartTimeout, recording a failure of a revision nobody asked for any more).
STOP_WINS_OVER_A_STEP_FAILURE = "stop-wins-over-a-step-failure"
# onInconclusive Promote promotes only when every undecided gate's estimate passes (the point
# gate); otherwise the candidate is held for a person as with Hold (issue 35).
PROMOTE_NEEDS_POINT_PASS = "inconclusive-promote-needs-point-pass"
# The change id of "an approval is refused once the run is asked to stop" when the stop comes
# while the approval's check runs (issue 34, explorer seed 6013: a run superseded by a policy
# change took approvals, and refused them for Pods its cancelled hold no longer warmed).
APPROVAL_REFUSED_WHEN_STOPPING = "approval-refused-when-stopping"
# The change id of "each promote, rollback and hold writes a signed decision record" (issue
# 38, docs/audit.md): a promotion waits for its record (shown on Promoted, bounded by
# timeouts.decision); a rollback's or a hold's is best effort (a Warning Event when it fails).
DECISION_RECORDS = "decision-records"
# The change id of "the golden set's power is checked before anything is made" (issue 35 item
# 6): a gate the dataset can never decide fails the rollout at once, too little power is said.
EVALUATION_DESIGN = "evaluation-design"
# The change id of "a hold shown to a person keeps its record when a stop comes while the hold's
# status is written" (CI, stop 46: the phase answers queries from its first moment, so an abort
# could arrive before the Hold record was asked for, and the chain lacked the hold).
HOLD_RECORD_ON_STOP = "hold-record-on-stop"
# The change id of "a status write cancelled by a stop is the stop" (found with the one above:
# an abort that cancelled a wait's status write failed the whole run with "Activity cancelled",
# instead of rolling back). Histories from before failed as they ran.
STATUS_WRITE_CANCEL_IS_A_STOP = "status-write-cancel-is-a-stop"
# Failures of that check that end the rollout; any other (a timeout, the API server away)
# leaves the dataset to the evaluation step, which judges it again anyway.
_DESIGN_REFUSALS = frozenset(
    {Reason.INVALID_EVALUATION_POLICY, Reason.DATASET_INVALID, Reason.DECISION_MODEL_GONE}
)
# How long a rollback's or a hold's record is retried before the Warning Event: short, since
# the run stays open meanwhile and the next revision waits for it (explorer seed 7020: a
# rollback's record retried for 5 minutes with the key gone, and the next spec's run started
# beside it after the controller's 120 s).
_RECORD_BEST_EFFORT = timedelta(seconds=30)
# One round of a status write's retries outside compensation: the old fixed window.
_ROUND = timedelta(minutes=10)


class RolloutFailure(Exception):
    """A rollout step failed for good: record it, then roll back. ``refused``: the step refused
    at once (a non-retryable error), rather than running out of retries or time."""

    def __init__(self, reason: str, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.refused = refused


@workflow.defn(name="RolloutWorkflow")
class RolloutWorkflow:
    def __init__(self) -> None:
        self._state = RolloutState()
        # The task running the steps (not state: the handle abort cancels).
        self._main: asyncio.Task[RolloutOutcome] | None = None
        # The evaluation's line in the Temporal UI's details, kept under every later step's
        # (details are not history: changing them never affects a replay).
        self._evaluation_details = ""
        # STATUS_IN_STEPS: steps write their own status, search attributes wait in
        # ``_attributes`` and go out together before the next command (``_flush_attributes``).
        self._lean = False
        self._attributes: dict[str, SearchAttributeUpdate[Any]] = {}
        # Decision records still being written when a stop came (``_record_best_effort``).
        self._records_in_flight: list[asyncio.Future[None]] = []

    # -- entry point -----------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: RolloutInput) -> RolloutOutcome:
        self._state.inp = inp
        self._lean = workflow.patched(STATUS_IN_STEPS)
        self._upsert(
            sa.DM_NAMESPACE.value_set(inp.dm.namespace),
            sa.DM_NAME.value_set(inp.dm.name),
            sa.DM_REVISION.value_set(inp.requested_revision),
            sa.DM_MODEL.value_set(inp.revision.model),
            sa.DM_PHASE.value_set(Phase.PENDING.value),
        )
        self._main = asyncio.create_task(self._rollout(inp))
        try:
            outcome = await self._main
        except asyncio.CancelledError:
            outcome = await self._stopped()
        evaluated = self._state.evaluation
        if evaluated is not None and evaluated.decision is not None:
            outcome = outcome.model_copy(update={"decision": evaluated.decision})
        if self._records_in_flight:
            await asyncio.gather(*self._records_in_flight)
        self._finish(outcome)
        # Signals/updates in flight (e.g. a rejected approval being recorded) complete first.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return outcome

    async def _rollout(self, inp: RolloutInput) -> RolloutOutcome:
        try:
            return await self._steps(inp)
        except RolloutFailure as failure:
            try:
                return await self._fail(failure.reason, failure.message)
            except RolloutFailure as gone:  # the DecisionModel went away while recording
                return await self._fail(gone.reason, gone.message)

    async def _stopped(self) -> RolloutOutcome:
        """The steps were cancelled: by the ``abort`` signal, or the workflow's cancellation."""
        abort_reason = self._state.abort_reason
        if abort_reason is not None:
            return await self._fail(Reason.ABORTED, f"aborted: {abort_reason}")
        # The workflow itself was cancelled: a newer revision superseded this one.
        try:
            return await self._superseded()
        except RolloutFailure as gone:
            return await self._fail(gone.reason, gone.message)

    async def _steps(self, inp: RolloutInput) -> RolloutOutcome:
        """The steps in order; a step that fails for good raises RolloutFailure."""
        if inp.evaluation is not None and inp.evaluation.confidence is not None:
            await self._check_design(inp, inp.evaluation)
        resolved = await self._resolve(inp)
        objects = _revision_objects(inp, resolved)
        await self._prefetch(inp, objects)
        record = await self._start(inp, objects)
        if inp.evaluation is not None:
            await self._evaluate(inp, inp.evaluation, record)
        # Manual promotion: the first revision of a DecisionModel is never held; a candidate a
        # person already approved on inconclusive evidence is not held twice.
        held = self._state.approved
        if inp.promotion == "Manual" and inp.stable is not None and not held:
            await self._await_approval(inp, record)
        promoted = await self._promote_committed(inp, record)
        if promoted.previous and promoted.previous != record.hash:
            kept = _watched_previous(inp, promoted.previous)
            if kept is not None:
                await self._watch_promoted(inp, record, kept)
            await self._retire_previous(inp, promoted.previous)
        return RolloutOutcome(result=RolloutResult.PROMOTED, revision=record.hash)

    # -- the steps ---------------------------------------------------------------------------
    async def _check_design(self, inp: RolloutInput, policy: EvaluationPolicy) -> None:
        """0. What the golden set can decide with its gates' intervals, before anything of the
        revision is made (the step writes status.evaluationDesign and any warning itself)."""
        if not workflow.patched(EVALUATION_DESIGN):
            return
        try:
            await self._activity(
                CHECK_EVALUATION_DESIGN,
                EvaluationDesignInput(dm=inp.dm, policy=policy, status=StepStatus(report=True)),
                EvaluationDesign,
                summary=f"check what {policy.dataset.kind} {policy.dataset.name} can decide",
                start_to_close=timedelta(seconds=60),
                schedule_to_close=timedelta(minutes=2),
            )
        except RolloutFailure as failure:
            if failure.reason in _DESIGN_REFUSALS:
                raise

    async def _resolve(self, inp: RolloutInput) -> ResolveResult:
        """1. resolve: tag → digest, guards, revision identity."""
        status = await self._enter(Phase.RESOLVING, "resolve")
        resolved: ResolveResult = await self._activity(
            RESOLVE,
            ResolveInput(dm=inp.dm, revision=inp.revision, status=status),
            ResolveResult,
            summary=f"resolve {inp.revision.model}",
            start_to_close=timedelta(seconds=60),
            schedule_to_close=timedelta(minutes=5),
        )
        self._state.record = resolved.record
        self._upsert(sa.DM_REVISION.value_set(resolved.record.hash))
        await self._reported(status, step_status.resolved(inp.dm, resolved))
        return resolved

    async def _prefetch(self, inp: RolloutInput, objects: RevisionObjectsInput) -> None:
        """2. prefetch: per-revision store PVC + Job that pulls and verifies the digest."""
        dm, record = inp.dm, objects.record
        status = await self._enter(Phase.CACHING, "prefetch")
        caching = timedelta(seconds=inp.timeouts.caching)
        await self._activity(
            PREFETCH,
            objects.model_copy(update={"status": status}),
            PrefetchResult,
            summary=f"prefetch {inp.revision.model} into {store_pvc_name(dm.name, record.hash)}",
            start_to_close=caching,
            schedule_to_close=caching,
            heartbeat=True,
            timeout_reason=Reason.CACHE_TIMEOUT,
        )
        await self._reported(status, step_status.cached(dm, record))

    async def _start(self, inp: RolloutInput, objects: RevisionObjectsInput) -> RevisionRecord:
        """3. start + warmup_inspect, both under the starting deadline.

        Returns the candidate as warmup saw it (with the precision its Pods report).
        """
        dm, record = inp.dm, objects.record
        status = await self._enter(Phase.STARTING, "start", report=False)
        deadline = workflow.now() + timedelta(seconds=inp.timeouts.starting)
        await self._activity(
            START,
            objects.model_copy(update={"status": status}),
            StartResult,
            summary=f"start Deployment {dm.name}-{record.hash} "
            f"({inp.replicas} replicas, no traffic)",
            start_to_close=deadline - workflow.now(),
            schedule_to_close=deadline - workflow.now(),
            heartbeat=True,
            timeout_reason=Reason.START_TIMEOUT,
        )
        return await self._warm_up(inp, record, deadline)

    async def _warm_up(
        self, inp: RolloutInput, record: RevisionRecord, deadline: datetime
    ) -> RevisionRecord:
        """3b. warmup_inspect: load the model in every Pod, inspect digest, device, pinning."""
        self._state.step = "warmup_inspect"
        status = StepStatus(report=True) if self._lean else None
        warm: WarmupResult = await self._activity(
            WARMUP_INSPECT,
            WarmupInput(
                dm=inp.dm,
                record=record,
                model=inp.revision.model,
                **inp.in_place(),
                warmup_timeout_seconds=inp.tuning.warmup_timeout_seconds,
                status=status,
            ),
            WarmupResult,
            summary=f"warm up and inspect Pods of {record.hash}: digest, device, pinned",
            start_to_close=max(deadline - workflow.now(), timedelta(seconds=1)),
            schedule_to_close=max(deadline - workflow.now(), timedelta(seconds=1)),
            heartbeat=True,
            timeout_reason=Reason.START_TIMEOUT,
        )
        ready = step_status.model_ready(inp.dm, record, warm, inp.replicas)
        if warm.precision:
            record = step_status.warmed(record, warm)
            self._state.record = record
        await self._reported(status, ready)
        return record

    async def _evaluate(
        self, inp: RolloutInput, policy: EvaluationPolicy, record: RevisionRecord
    ) -> None:
        """4. evaluate (optional): golden set against the candidate, baseline against the stable."""
        status = await self._enter(Phase.EVALUATING, "evaluate")
        evaluating = timedelta(seconds=inp.timeouts.evaluating)
        outcome: EvaluationOutcome = await self._activity(
            EVALUATE,
            EvaluateInput(
                dm=inp.dm,
                candidate=record,
                model=inp.revision.model,
                stable=inp.stable,
                policy=policy,
                api_key=inp.api_key,
                promotion=inp.promotion,
                status=status,
            ),
            EvaluationOutcome,
            summary=f"evaluate {record.hash} on {policy.dataset.kind} "
            f"{policy.dataset.name} (≤{policy.max_cases} cases)",
            start_to_close=evaluating,
            schedule_to_close=evaluating,
            heartbeat=True,
            timeout_reason=Reason.EVALUATION_TIMEOUT,
        )
        self._state.evaluation = outcome
        self._evaluation_details = evaluation_details(
            outcome, inp.dm.namespace, inp.dm.name, record.hash
        )
        self._details(f"**{Phase.EVALUATING.value}**: evaluated")
        await self._reported(status, step_status.evaluated(inp.dm, policy, outcome))
        if outcome.result == EvaluationResult.INCONCLUSIVE:
            await self._inconclusive(inp, policy, record, outcome)
        elif outcome.result != EvaluationResult.PASSED:
            raise RolloutFailure(Reason.EVALUATION_FAILED, outcome.message)

    async def _inconclusive(
        self,
        inp: RolloutInput,
        policy: EvaluationPolicy,
        record: RevisionRecord,
        outcome: EvaluationOutcome,
    ) -> None:
        """4b. The intervals decided no gate: spec.rollout.evaluation.onInconclusive says what
        happens. Promote goes on when every undecided gate's estimate passes, else holds; Reject
        rolls back; Hold waits for a person, bound to the evidence shown, until
        timeouts.decision rejects it."""
        action = policy.inconclusive_action
        why = ""
        if action == "Promote":
            short = undecided_point_failures(outcome.decision) if outcome.decision else []
            if not short or not workflow.patched(PROMOTE_NEEDS_POINT_PASS):
                return
            why = (
                "onInconclusive Promote promotes only when every undecided gate's estimate "
                f"passes, and {'; '.join(short)}: held for a person. "
            )
        if action == "Reject":
            raise RolloutFailure(
                Reason.INCONCLUSIVE_REJECTED, f"onInconclusive Reject: {outcome.message}"
            )
        await self._hold_inconclusive(inp, policy, record, outcome, why)

    async def _hold_inconclusive(
        self,
        inp: RolloutInput,
        policy: EvaluationPolicy,
        record: RevisionRecord,
        outcome: EvaluationOutcome,
        why: str = "",
    ) -> None:
        """onInconclusive Hold: AwaitingPromotion until promote, reject or timeouts.decision;
        ``why`` says why a Promote policy holds instead."""
        state = self._state
        evidence = outcome.decision.evidence if outcome.decision else None
        state.expected_approval = approval_token(
            record.hash, policy, outcome.dataset_digest, evidence
        )
        state.held_inconclusive = True
        deadline = timedelta(seconds=inp.timeouts.decision)
        how = (
            f"inconclusive: decide with dmrollout promote {inp.dm.name} or dmrollout reject "
            f"{inp.dm.name} "
            f"(approval {state.expected_approval}); rejected by itself after "
            f"{format_duration(deadline)}"
        )
        await self._enter_held(
            "awaiting decision (inconclusive)",
            Reason.EVALUATION_INCONCLUSIVE,
            event_message=f"candidate {record.hash} held, evaluation {how}",
            message=f"{why}candidate {record.hash} held, evaluation {how}. {outcome.message}",
        )
        await self._wait_for_decision(deadline, outcome.message)

    async def _wait_for_decision(self, deadline: timedelta, evidence: str) -> None:
        state = self._state
        try:
            await workflow.wait_condition(
                lambda: state.approved or state.rejected_by is not None,
                timeout=deadline,
                # The timer in the UI's timeline names the gates that left it undecided.
                timeout_summary=f"decision on inconclusive evidence: {evidence}"[:400],
            )
        except builtins.TimeoutError:  # wait_condition's (the name here is temporalio's)
            raise RolloutFailure(
                Reason.DECISION_TIMEOUT,
                f"nobody decided within timeouts.decision ({format_duration(deadline)}) on an "
                f"inconclusive evaluation: {evidence}",
            ) from None
        self._stop_if_requested()
        if state.rejected_by is not None:
            raise RolloutFailure(Reason.INCONCLUSIVE_REJECTED, state.rejected_by)

    async def _await_approval(self, inp: RolloutInput, record: RevisionRecord) -> None:
        """5. manual promotion: hold the candidate until the approval bound to it arrives."""
        state = self._state
        state.expected_approval = approval_token(
            record.hash,
            inp.evaluation,
            state.evaluation.dataset_digest if state.evaluation else None,
        )
        how = (
            f"approve with: kubectl annotate dm {inp.dm.name} "
            f"decisionmodel.io/promote={state.expected_approval} (or the candidate's hash "
            f"{record.hash}), or dmrollout promote"
        )
        await self._enter_held(
            "awaiting promotion",
            Reason.AWAITING_PROMOTION,
            event_message=f"candidate {record.hash} awaits approval {state.expected_approval}",
            message=f"candidate {record.hash} awaits approval; {how}",
        )
        # No timeout (reference): a rollout may wait for a human as long as it takes.
        await workflow.wait_condition(lambda: self._state.approved)
        self._stop_if_requested()

    async def _enter_held(
        self, step: str, reason: Reason, *, event_message: str, message: str
    ) -> None:
        """Phase AwaitingPromotion with Promoted=False saying why and how to decide."""
        held = ConditionUpdate(
            type=ConditionType.PROMOTED,
            status=ConditionStatus.FALSE,
            reason=reason,
            message=message[:1000],
        )
        try:
            await self._enter(
                Phase.AWAITING_PROMOTION,
                step,
                event_reason=EventReason.AWAITING_PROMOTION,
                event_message=event_message,
                conditions=[held],
                by_step=False,  # a wait, not an activity: record_status writes it
            )
        except asyncio.CancelledError:
            # Queries show the hold from the phase's first moment: a stop sent while its status
            # is written still leaves the hold's record (written beside the stop).
            if workflow.patched(HOLD_RECORD_ON_STOP):
                arg = self._decision_arg("Hold", reason, message)
                if arg is not None:
                    self._records_in_flight.append(self._start_record(arg, _summary(arg)))
            raise
        await self._record_decision("Hold", reason, message)

    async def _promote_committed(self, inp: RolloutInput, record: RevisionRecord) -> PromoteResult:
        """6. promote: persist stableRevision, PDB, switch the Service; then phase Ready. A
        guard the step meets before it records anything (a foreign Service of the
        DecisionModel's name) is waited for outside the commitment, then it runs again. The
        signed decision record comes first: no record, no switch."""
        await self._record_decision("Promote", Reason.PROMOTED, self._promotion_why(inp))
        while True:
            try:
                promoted = await self._promote_shielded(inp, record)
                break
            except RolloutFailure as failure:
                held = failure.refused and failure.reason == Reason.RESOURCE_CONFLICT
                if not held or not workflow.patched(PROMOTION_WAITS_FOR_GUARD):
                    raise
            await self._await_promotion_guard(inp, record)
        self._state.phase = Phase.READY
        self._state.step = "promoted"
        self._upsert(sa.DM_PHASE.value_set(Phase.READY.value))
        if not self._lean:  # else promote emitted the Event itself
            await self._write_status(step_status.promoted(inp.dm, record))
        return promoted

    async def _promote_shielded(self, inp: RolloutInput, record: RevisionRecord) -> PromoteResult:
        # From the moment the phase says Promoting the rollout is committed (abort is refused
        # from then on, see `abort`): a promotion half done (stable recorded, Service not yet
        # switched) is worse than a finished one. A cancel lets it finish; a newer revision rolls
        # from this stable. Entering the phase is inside the shield too, so status never shows
        # Promoting for a rollout that then backs out (seen: a cancel landing during that
        # status write). The one way back out is a refusal before anything is recorded
        # (``_await_promotion_guard``).
        self._state.stoppable = False
        promotion = asyncio.create_task(self._promote(inp, record))
        try:
            promoted: PromoteResult = await asyncio.shield(promotion)
        except asyncio.CancelledError:
            promoted = await promotion
        return promoted

    async def _await_promotion_guard(self, inp: RolloutInput, record: RevisionRecord) -> None:
        """The promote step refused a foreign Service before recording anything: the rollout is
        stoppable again (an abort, a newer revision) while promote's ``await_guards`` waits for
        the user to remove it, shown on Promoted (seed 001: "then the next reconcile
        proceeds"), up to timeouts.decision like any guard; the stable, if any, serves."""
        self._state.stoppable = True
        self._stop_if_requested()  # a cancel that came while the promotion was shielded
        self._state.step = "promotion held by a foreign Service"
        self._details(f"**{Phase.PROMOTING.value}**: held by a foreign Service {inp.dm.name}")
        try:
            await self._activity(
                PROMOTE,
                PromoteInput(
                    dm=inp.dm,
                    candidate=record,
                    **inp.in_place(),
                    stable=inp.stable,
                    await_guards=True,
                ),
                PromoteResult,
                summary=f"wait until Service {inp.dm.name} is not a foreign object",
                start_to_close=timedelta(seconds=60),
                schedule_to_close=timedelta(minutes=10),
            )
        except RolloutFailure:
            # A step cancelled while its attempt ran may end as that attempt's failure.
            if self._state.abort_reason is not None or _cancel_requested():
                raise asyncio.CancelledError() from None
            raise

    async def _promote(self, inp: RolloutInput, record: RevisionRecord) -> PromoteResult:
        """The shielded part of 6: phase Promoting, then the promote activity."""
        dm, state = inp.dm, self._state
        status = await self._enter(Phase.PROMOTING, "promote")
        promoted: PromoteResult = await self._activity(
            PROMOTE,
            PromoteInput(
                dm=dm,
                candidate=record,
                **inp.in_place(),
                stable=inp.stable,
                model=inp.revision.model,
                # What promote re-checks against the live DecisionModel (activity inputs are
                # not part of the determinism check: no patch needed).
                policy=inp.policy(),
                approval=state.expected_approval if state.approved else None,
                dataset_digest=state.evaluation.dataset_digest if state.evaluation else None,
                status=status,
                probe_error_window_seconds=inp.tuning.probe_error_window_seconds,
            ),
            PromoteResult,
            summary=f"promote {record.hash}: record stable, PDB, switch Service {dm.name}",
            start_to_close=timedelta(seconds=60),
            schedule_to_close=timedelta(minutes=10),
        )
        return promoted

    async def _watch_promoted(
        self, inp: RolloutInput, record: RevisionRecord, previous: RevisionRecord
    ) -> None:
        """7a. spec.rollout.postPromotionWatch: the previous revision stays while the new
        stable's gate is watched; a failure inside the window switches the Service back and
        rolls the new revision back (RolloutFailure). A newer revision superseding this one, or
        a watch that cannot run to its end, leaves the promotion as it is."""
        self._state.step = "post-promotion watch"
        watch = _watch_input(inp, record, previous)
        window = watch.window_seconds
        # A judgement still open at the window's end goes on past it (issue 34: a window
        # shorter than the probe-error window never judged Pods that went silent). Timeouts
        # are no part of the replayed commands.
        longest = window + watch.overtime_seconds()
        try:
            watched: WatchPromotedResult = await self._activity(
                WATCH_PROMOTED,
                watch,
                WatchPromotedResult,
                summary=f"watch {record.hash} for {window}s; revision {previous.hash} kept",
                start_to_close=timedelta(seconds=longest + 120),
                schedule_to_close=timedelta(seconds=longest + 600),
                heartbeat=True,
            )
        except (asyncio.CancelledError, RolloutFailure):
            return
        if watched.held:
            return
        self._state.step = "revert promotion"
        revert = asyncio.create_task(self._switch_back(inp, record, previous))
        try:
            await asyncio.shield(revert)
        except asyncio.CancelledError:
            await revert  # committed, as a promotion is: a half-done switch back is worse
        raise RolloutFailure(
            Reason.POST_PROMOTION_GATE_FAILED,
            f"{watched.message}; the Service selects revision {previous.hash} again",
        )

    async def _switch_back(
        self, inp: RolloutInput, record: RevisionRecord, previous: RevisionRecord
    ) -> None:
        """The promote activity run for the previous revision: stable recorded, PDB, Service."""
        await self._activity(
            PROMOTE,
            PromoteInput(
                dm=inp.dm,
                candidate=previous,
                **inp.in_place(),
                stable=record,
                switch_back=True,
            ),
            PromoteResult,
            summary=f"switch Service {inp.dm.name} back to revision {previous.hash}",
            start_to_close=timedelta(seconds=60),
            schedule_to_close=timedelta(minutes=10),
        )

    async def _retire_previous(self, inp: RolloutInput, previous: str) -> None:
        """7. the previous revision keeps running for the grace, then goes (a durable timer)."""
        self._state.step = "grace"
        self._flush_attributes()
        grace_ends = workflow.now() + timedelta(seconds=inp.tuning.promotion_grace_seconds)
        try:
            await workflow.sleep(
                timedelta(seconds=inp.tuning.promotion_grace_seconds),
                summary=f"grace before deleting revision {previous}",
            )
        except asyncio.CancelledError:
            # Promoted already: a newer rollout must not orphan the previous revision. Let
            # the grace run out (requests in flight drain), then delete it all the same.
            remaining = grace_ends - workflow.now()
            if remaining > timedelta(0):
                await workflow.sleep(remaining, summary="rest of the grace after a cancel")
        self._state.step = "delete previous"
        await self._delete_revision(previous, "superseded by promotion", keep_if_rolling_out=True)

    # -- failure, cancellation -------------------------------------------------------------
    async def _fail(self, reason: str, message: str) -> RolloutOutcome:
        """Record the failure first (status and Event), then delete the candidate's objects."""
        state = self._state
        state.stoppable = False
        inp = state.require_input()
        if reason == Reason.DECISION_MODEL_GONE:
            # Deleted (or re-created under another UID) mid-rollout: there is no status to
            # write, and garbage collection removes what it owned. End with a result all the
            # same, so history and visibility say what happened.
            state.reason, state.message = reason, message
            return RolloutOutcome(
                result=RolloutResult.ABORTED,
                revision=state.record.hash if state.record else inp.requested_revision,
                reason=reason,
                message=message,
            )
        return await self._roll_back(inp, reason, message)

    async def _roll_back(self, inp: RolloutInput, reason: str, message: str) -> RolloutOutcome:
        """Failed (no stable) or RolledBack (the stable keeps serving): record, then delete."""
        state = self._state
        has_stable = inp.stable is not None
        phase = Phase.ROLLED_BACK if has_stable else Phase.FAILED
        failed = state.record or _unresolved_record(inp)
        failed_step = state.step
        state.phase = phase
        state.step = "rollback"
        state.reason, state.message = reason, message
        self._upsert(sa.DM_PHASE.value_set(phase.value))
        await self._record_status(
            phase=phase,
            failed=failed,
            failed_reason=reason,
            failed_message=message,
            clear_candidate=True,
            conditions=_failure_conditions(failed_step, failed, reason, message, has_stable),
            event_reason=EventReason.ROLLED_BACK if has_stable else EventReason.FAILED,
            event_message=f"revision {failed.hash} {reason}: {message}",
            event_type="Warning",
            must_finish=True,
        )
        if state.record is not None:
            # Kept when a newer run has made this revision its candidate since the failure was
            # recorded (explorer seed 3458: a pinned spec's run aborted, the spec back to the
            # same model by tag: a second run of the same revision, whose objects this cleanup
            # deleted under it). The record above cleared our own candidate first.
            await self._delete_revision(
                state.record.hash, f"rollback: {reason}", keep_if_rolling_out=True
            )
        # After the cleanup, which a missing record must not delay.
        await self._record_decision("RollBack", reason, message)
        result = RolloutResult.ROLLED_BACK if has_stable else RolloutResult.FAILED
        return RolloutOutcome(result=result, revision=failed.hash, reason=reason, message=message)

    async def _superseded(self) -> RolloutOutcome:
        """Cancelled by the controller for a newer revision: remove only our own objects.

        Status is left to the newer rollout (it already owns candidateRevision); only an Event
        records what happened here.
        """
        state = self._state
        state.stoppable = False
        state.step = "superseded cleanup"
        if state.record is not None:
            await self._delete_revision(state.record.hash, "superseded by a newer revision")
        inp = state.require_input()
        revision = state.record.hash if state.record else inp.requested_revision
        await self._record_status(
            event_reason=EventReason.SUPERSEDED,
            event_message=f"rollout of {revision} cancelled: a newer revision supersedes it",
            write_status=False,
            must_finish=True,
        )
        return RolloutOutcome(
            result=RolloutResult.SUPERSEDED,
            revision=state.record.hash if state.record else None,
            reason=Reason.SUPERSEDED,
        )

    async def _record_decision(self, decision: DecisionKind, reason: str, message: str) -> None:
        """The signed decision record (activities/decision_record.py; a worker without a
        records namespace answers at once that records are off). Only for a resolved
        candidate: its model digest is the record's subject."""
        arg = self._decision_arg(decision, reason, message)
        if arg is None:
            return
        if self._records_in_flight and workflow.patched(HOLD_RECORD_ON_STOP):
            # A hold's record written beside a stop comes first: the chain keeps the order.
            await asyncio.gather(*self._records_in_flight)
        summary = _summary(arg)
        if not arg.blocking:
            await self._record_best_effort(arg, summary)
            return
        await self._activity(
            WRITE_DECISION_RECORD, arg, DecisionRecordResult, summary=summary,
            start_to_close=timedelta(seconds=60),
            schedule_to_close=timedelta(seconds=self._state.require_input().timeouts.decision),
            timeout_reason=Reason.DECISION_RECORD_UNWRITTEN,
        )  # fmt: skip

    def _decision_arg(
        self, decision: DecisionKind, reason: str, message: str
    ) -> DecisionRecordInput | None:
        """The record's input, or None when this run writes none."""
        state = self._state
        record = state.record
        if state.require_input().decision_records is False or record is None or not record.digest:
            return None
        if not workflow.patched(DECISION_RECORDS):
            return None
        return _decision_input(state, record, decision, reason, message)

    async def _record_best_effort(self, arg: DecisionRecordInput, summary: str) -> None:
        """A rollback's or a hold's record: retried for a while, then a Warning Event (the
        rollback or the hold never waits for its record). A stop that comes meanwhile (an
        abort right after the hold was shown) does not lose it: it is written beside the
        stop, and the run ends only after it."""
        writing = self._start_record(arg, summary)
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            self._records_in_flight.append(writing)
            raise

    def _start_record(self, arg: DecisionRecordInput, summary: str) -> asyncio.Future[None]:
        """Start writing a best-effort record (the attributes kept go out first, as before
        every command); the caller keeps the future when a stop must not lose it."""
        self._flush_attributes()
        return asyncio.ensure_future(self._write_best_effort(arg, summary))

    async def _write_best_effort(self, arg: DecisionRecordInput, summary: str) -> None:
        try:
            await workflow.execute_activity(
                WRITE_DECISION_RECORD, arg, result_type=DecisionRecordResult,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=_RECORD_BEST_EFFORT, retry_policy=retry_policies.STEP,
                summary=summary,
            )  # fmt: skip
        except ActivityError as e:
            why = f"the {arg.decision} of revision {arg.candidate.hash} has no signed record: "
            with contextlib.suppress(RolloutFailure):
                await self._record_status(
                    event_reason=EventReason.DECISION_RECORD_UNWRITTEN,
                    event_message=f"{why}{_cause_message(e)}"[:1000],
                    event_type="Warning",
                    write_status=False,
                )

    def _promotion_why(self, inp: RolloutInput) -> str:
        """What the promotion rests on, in a line for its record."""
        state = self._state
        parts = [f"promotion {inp.promotion}"]
        if state.evaluation is not None:
            parts.append(f"evaluation {state.evaluation.result.value}: {state.evaluation.message}")
        else:
            parts.append("no evaluation (spec.rollout.evaluation unset)")
        if state.approved:
            parts.append(f"approved ({state.expected_approval})")
        return "; ".join(parts)

    def _finish(self, outcome: RolloutOutcome) -> None:
        state = self._state
        state.result = outcome.result
        state.reason = outcome.reason
        state.message = outcome.message
        self._upsert(sa.DM_RESULT.value_set(outcome.result.value))
        self._flush_attributes()
        self._details(f"**{outcome.result.value}** {outcome.reason or ''}")

    def _details(self, line: str) -> None:
        """The Temporal UI's current details: this step, then the evaluation's figures."""
        extra = f"\n\n{self._evaluation_details}" if self._evaluation_details else ""
        workflow.set_current_details(line + extra)

    # -- messages --------------------------------------------------------------------------
    @workflow.signal
    async def promote(self, approval: str) -> None:
        """Manual promotion (Temporal UI, ``temporal workflow signal``, the annotation)."""
        state = self._state
        if state.is_repeated_approval(approval):
            return  # idempotent: the same approval twice
        why = state.approval_problem(approval)
        if why is None and workflow.patched(APPROVAL_CHECKS_CANDIDATE):
            why = await self._candidate_not_ready() or state.approval_problem(approval)
        if why is None or state.is_repeated_approval(approval):
            state.approved = True
            return
        # Never applied; recorded where a user looks: the query, status and an Event.
        state.rejected.append(RejectedApproval(approval=approval, why=why))
        with contextlib.suppress(RolloutFailure):  # the DecisionModel is gone: nothing to show
            await self._record_status(
                conditions=[
                    ConditionUpdate(
                        type=ConditionType.PROMOTED,
                        status=ConditionStatus.FALSE,
                        reason=Reason.APPROVAL_REJECTED,
                        message=why,
                    )
                ],
                event_reason=EventReason.APPROVAL_REJECTED,
                event_message=why,
                event_type="Warning",
            )

    @workflow.update
    async def approve(self, approval: str) -> str:
        """The same operation for callers that want an answer (CLI, controller)."""
        state = self._state
        if not state.approved and workflow.patched(APPROVAL_CHECKS_CANDIDATE):
            # The wait for the check may have let the phase or the approval change: again.
            why = await self._candidate_not_ready() or state.approval_problem(approval)
            stopping = self._stopping()
            if why is None and stopping and workflow.patched(APPROVAL_REFUSED_WHEN_STOPPING):
                why = stopping
            if why is not None and not state.is_repeated_approval(approval):
                raise ApplicationError(why, type=Reason.APPROVAL_REJECTED)
        state.approved = True
        return f"revision {state.record.hash if state.record else '?'} approved for promotion"

    async def _candidate_not_ready(self) -> str | None:
        """Why the held candidate cannot be approved now (fewer than its replicas model-ready
        and passing an inspection: check_candidate), or None. A Pod replaced while it waits is
        warmed up and gated by the controller; until then an approval is refused, saying why,
        rather than promote's re-check rolling the candidate back."""
        state = self._state
        inp, record = state.require_input(), state.record
        if record is None:
            return None
        self._flush_attributes()
        try:
            found: CandidateReadiness = await workflow.execute_activity(
                CHECK_CANDIDATE,
                PromoteInput(
                    dm=inp.dm,
                    candidate=record,
                    **inp.in_place(),
                    stable=inp.stable,
                    model=inp.revision.model,
                ),
                result_type=CandidateReadiness,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(seconds=60),
                retry_policy=retry_policies.STEP,
                summary=f"check that candidate {record.hash} is model-ready for its approval",
            )
        except ActivityError as e:
            return (
                f"approval refused: candidate {record.hash} could not be checked "
                f"({_cause_message(e)[:300]}); approve again"
            )
        if found.ready >= found.desired:
            return None
        pods = "; ".join(found.not_ready) or "no Pod model-ready"
        return (
            f"approval refused: candidate {record.hash} is not model-ready "
            f"({found.ready}/{found.desired}): {pods[:600]}; its Pods are warmed up and "
            "inspected again while it waits (the Reconciling condition says how many are "
            "model-ready): approve again once all are"
        )

    @approve.validator
    def _validate_approve(self, approval: str) -> None:
        # Validators do not run on replay: a refusal here needs no patch.
        if self._state.is_repeated_approval(approval):
            return
        why = self._state.approval_problem(approval) or self._stopping()
        if why is not None:
            raise ValueError(why)

    def _stopping(self) -> str | None:
        """Why an approval cannot promote this run any more although it still shows the
        candidate waiting: it was asked to stop (an abort, or the controller's cancel for a newer
        revision or a changed policy) and is removing its candidate."""
        main = self._main
        if self._state.abort_reason is None and (main is None or main.cancelling() == 0):
            return None
        return (
            "approval refused: this rollout is being stopped (aborted, or superseded by a change "
            "of the spec) and removes its candidate; approve the rollout that follows once it "
            "awaits promotion (dmrollout status)"
        )

    @workflow.update
    async def reject(self, approval: str) -> str:
        """End a candidate held on inconclusive evidence as rejected (rolled back), bound to the
        evidence shown like an approval."""
        state = self._state
        state.rejected_by = f"rejected by a person on the evidence shown (approval {approval})"
        return f"revision {state.record.hash if state.record else '?'} rejected"

    @reject.validator
    def _validate_reject(self, approval: str) -> None:
        state = self._state
        if not state.held_inconclusive:
            raise ValueError(
                "reject refused: no candidate is held on an inconclusive evaluation; "
                "dmrollout abort stops any other rollout"
            )
        why = state.approval_problem(approval)
        if why is not None:
            raise ValueError(why.replace("approval", "reject", 1))

    @workflow.signal
    def abort(self, reason: str) -> None:
        """Stop this rollout and roll back (the stable keeps serving)."""
        state = self._state
        if state.abort_reason is not None or state.result is not None:
            return
        if not state.stoppable:
            return  # promoted (or being promoted), or already failing: nothing left to abort
        state.abort_reason = reason or "no reason given"
        if self._main is not None and not self._main.done():
            self._main.cancel()

    @workflow.query
    def progress(self) -> RolloutProgress:
        return self._state.progress()

    # -- helpers ---------------------------------------------------------------------------
    async def _enter(
        self,
        phase: Phase,
        step: str,
        event_reason: EventReason | None = None,
        event_message: str = "",
        conditions: list[ConditionUpdate] | None = None,
        *,
        report: bool = True,
        by_step: bool = True,
    ) -> StepStatus | None:
        """Enter ``phase``: state, DmPhase, details, and status. A step's phase is written by
        the step itself (the returned StepStatus goes into its input; ``report``: it writes its
        outcome too); a wait (``by_step=False``) and a rollout from before STATUS_IN_STEPS
        write it here through record_status (and get None)."""
        self._state.phase = phase
        self._state.step = step
        self._upsert(sa.DM_PHASE.value_set(phase.value))
        self._details(f"**{phase.value}**: {step}")
        update = StatusUpdate(
            dm=self._state.require_input().dm,
            phase=phase,
            event_reason=event_reason,
            event_message=event_message,
            conditions=conditions or [],
        )
        if self._lean and by_step:
            return StepStatus(enter=update, report=report)
        await self._write_status(update)
        return None

    async def _reported(self, status: StepStatus | None, update: StatusUpdate) -> None:
        """A step's outcome: written by the step when it was asked to (``status``), else here."""
        if status is None:
            await self._write_status(update)

    async def _record_status(
        self, write_status: bool = True, must_finish: bool = False, **fields: Any
    ) -> None:
        """``_write_status`` of these fields (only the Event's when not ``write_status``)."""
        inp = self._state.require_input()
        update = StatusUpdate(dm=inp.dm, **fields)
        if not write_status:
            update = StatusUpdate(
                dm=inp.dm,
                event_reason=update.event_reason,
                event_message=update.event_message,
                event_type=update.event_type,
            )
        await self._write_status(update, must_finish)

    async def _write_status(self, update: StatusUpdate, must_finish: bool = False) -> None:
        """Status and Event through record_status. ``must_finish``: a compensation step, never
        given up (see ``_until_done``); else a final failure fails the rollout (compensated)."""
        self._flush_attributes()
        summary = f"status: {update.phase.value if update.phase else ''} "
        summary = (summary + (update.event_reason or "")).strip()

        async def attempt(window: timedelta) -> None:
            await workflow.execute_activity(
                RECORD_STATUS,
                update,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=window,
                retry_policy=retry_policies.STEP,
                summary=summary,
            )

        try:
            step = f"{summary} (the status write)"
            await (self._until_done(step, attempt) if must_finish else attempt(_ROUND))
        except ActivityError as e:
            if isinstance(e.cause, CancelledError) and workflow.patched(
                STATUS_WRITE_CANCEL_IS_A_STOP
            ):
                raise asyncio.CancelledError() from e
            raise _status_failure(e) from None
        self._stop_if_requested()

    def _upsert(self, *updates: SearchAttributeUpdate[Any]) -> None:
        """Search attributes: at once before STATUS_IN_STEPS (one history event per call, as
        those histories hold them); since, kept until the next command goes out, so that a
        phase and the revision, or Ready and the result, cost one event."""
        if not self._lean:
            workflow.upsert_search_attributes(list(updates))
            return
        for update in updates:
            self._attributes[update.key.name] = update

    def _flush_attributes(self) -> None:
        """Upsert the attributes kept by ``_upsert`` in one call (before every command)."""
        if self._attributes:
            workflow.upsert_search_attributes(list(self._attributes.values()))
            self._attributes.clear()

    async def _delete_revision(
        self, revision: str, why: str, *, keep_if_rolling_out: bool = False
    ) -> None:
        """Delete a revision's objects: compensation, never given up (``_until_done``)."""
        inp = self._state.require_input()
        self._flush_attributes()
        asked = DeleteRevisionInput(
            dm=inp.dm, revision=revision, reason=why, keep_if_rolling_out=keep_if_rolling_out
        )

        async def attempt(window: timedelta) -> None:
            await workflow.execute_activity(
                DELETE_REVISION,
                asked,
                result_type=DeleteRevisionResult,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=window,
                retry_policy=retry_policies.STEP,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"delete revision {revision} ({why})",
            )

        objects = [f"{kind}/{name}" for kind, name in revision_objects(inp.dm.name, revision)]
        await self._until_done(f"delete revision {revision}", attempt, objects)

    async def _until_done(
        self,
        step: str,
        attempt: Callable[[timedelta], Awaitable[None]],
        objects: list[str] | None = None,
    ) -> None:
        """Compensation is never given up: after a round of retries (``cleanup_round_seconds``,
        the old 10-minute deadline) it says so (query, current details) and starts another
        round after a pause, until the step is done. Only a non-retryable failure or a
        cancellation ends it. Histories from before this rule failed the workflow there
        instead; ``workflow.patched`` keeps them replaying that way."""
        tuning = self._state.require_input().tuning
        rounds = 0
        while True:
            try:
                await attempt(timedelta(seconds=tuning.cleanup_round_seconds))
            except ActivityError as e:
                if not _round_ran_out(e) or not workflow.patched(CLEANUP_NEVER_GIVEN_UP):
                    raise
                rounds += 1
                error = _cause_message(e)
                self._state.cleanup = CleanupProgress(step=step, rounds=rounds, last_error=error)
                workflow.set_current_details(
                    f"**{Reason.CLEANUP_PENDING}**: {step} failed for {rounds} round(s); "
                    f"retrying: {error}"
                )
                pause = tuning.cleanup_pause_seconds
                await self._show_cleanup(
                    cleanup_status.pending(
                        self._state.require_input().dm, step, objects or [], rounds, error, pause
                    )
                )
                await workflow.sleep(timedelta(seconds=pause), summary=f"retry {step}")
                continue
            self._state.cleanup = None
            if rounds:
                dm = self._state.require_input().dm
                await self._show_cleanup(cleanup_status.finished(dm, step, rounds))
            return

    async def _show_cleanup(self, update: StatusUpdate) -> None:
        """Best effort: what refuses the cleanup may refuse this write too; the next round
        tries again. Never a compensation step of its own (that would recurse)."""
        if not workflow.patched(cleanup_status.CLEANUP_SHOWN):
            return
        with contextlib.suppress(ActivityError):
            await workflow.execute_activity(
                RECORD_STATUS,
                update,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(seconds=60),
                retry_policy=retry_policies.STEP,
                summary=f"status: {update.conditions[0].reason}",
            )

    async def _activity(
        self,
        name: str,
        arg: Any,
        result_type: type[Any],
        *,
        summary: str,
        start_to_close: timedelta,
        schedule_to_close: timedelta,
        heartbeat: bool = False,
        timeout_reason: Reason | None = None,
    ) -> Any:
        """Run one step; turn its final failure into a RolloutFailure with the reason."""
        inp = self._state.require_input()
        self._flush_attributes()
        held_until = workflow.now() + timedelta(seconds=inp.timeouts.decision)
        beat = timedelta(seconds=inp.tuning.heartbeat_timeout_seconds) if heartbeat else None
        while True:
            try:
                result = await workflow.execute_activity(
                    name,
                    arg,
                    result_type=result_type,
                    start_to_close_timeout=start_to_close,
                    schedule_to_close_timeout=schedule_to_close,
                    heartbeat_timeout=beat,
                    retry_policy=retry_policies.STEP,
                    # Mutating steps: cleanup after a cancel must not race a step still running.
                    cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    summary=summary,
                )
            except ActivityError as e:
                self._stop_if_asked_before(e)
                if not _still_held(e, held_until):
                    raise _failure_of(e, name, timeout_reason) from None
                continue
            break
        self._stop_if_requested()
        return result

    def _stop_if_asked_before(self, error: ActivityError) -> None:
        """A step that failed while the run waited for its cancellation (the step's worker died,
        so the cancel never reached it and the attempt timed out): the stop wins."""
        # patched() last: only a history that meets this case carries the marker.
        if self._stop_asked() and workflow.patched(STOP_WINS_OVER_A_STEP_FAILURE):
            raise asyncio.CancelledError() from error

    def _stop_if_requested(self) -> None:
        """Honour an abort or cancel that a step completing at the same moment swallowed.

        When an activity's completion and a cancel request (the abort signal, or the workflow's
        cancellation) land in the same workflow activation, the SDK resolves the activity with its
        result and the CancelledError is never raised, though the task still counts the request
        (Task.cancelling(), Python 3.11). Seen here: a supersede during `start` went on to
        promote, and an abort during the Caching status write went on to prefetch (and waited
        there forever). Every step of the main task checks after it returns. The request is part
        of history, so the check replays identically.
        """
        if self._stop_asked():
            raise asyncio.CancelledError()

    def _stop_asked(self) -> bool:
        """An abort or a cancel reached the main task while it may still stop."""
        current = asyncio.current_task()
        if current is None or current is not self._main or not self._state.stoppable:
            return False
        return self._state.abort_reason is not None or current.cancelling() > 0


def _cancel_requested() -> bool:
    """The current task was asked to stop (abort or cancel) and has not yet raised it."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _still_held(error: ActivityError, held_until: datetime) -> bool:
    """Seed 001: a guard holds the step until it is fixed; its deadline does not run meanwhile.
    The step gets a new window (the activity shows the guard again), up to timeouts.decision
    in all. Histories from before this rule failed the step at its deadline."""
    if isinstance(error.cause, CancelledError):
        # Cancelled on our request (supersede or abort): not a failure of the step.
        raise asyncio.CancelledError() from error
    held = _held_by_guard(error) and workflow.now() < held_until
    return held and workflow.patched(GUARD_HOLDS_THE_DEADLINE)


def _held_by_guard(error: ActivityError) -> bool:
    """The step's window ran out while a guard (an unlabelled Secret, a foreign object, ...)
    was what failed it: waiting for the user's fix, not a failure of the revision."""
    cause = error.cause
    return (
        _round_ran_out(error)
        and isinstance(cause, ApplicationError)
        and cause.type in GUARD_REASONS
    )


def _round_ran_out(error: ActivityError) -> bool:
    """The step was retried until its window closed (not refused for good, not cancelled)."""
    cause = error.cause
    if isinstance(cause, CancelledError):
        return False
    if isinstance(cause, ApplicationError) and cause.non_retryable:
        return False
    return error.retry_state in (RetryState.TIMEOUT, RetryState.MAXIMUM_ATTEMPTS_REACHED)


def _cause_message(error: ActivityError) -> str:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        return f"{cause.type or Reason.ACTIVITY_FAILED}: {cause.message}"
    return str(cause or error)


def _status_failure(error: ActivityError) -> BaseException:
    """A status write that failed for good: the DecisionModel is gone, or (since the cleanup
    rule) a failure of the rollout, which compensation then records; before it, the error."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type == Reason.DECISION_MODEL_GONE:
        return RolloutFailure(Reason.DECISION_MODEL_GONE, cause.message)
    if isinstance(cause, CancelledError) or not workflow.patched(CLEANUP_NEVER_GIVEN_UP):
        return error
    return _failure_of(error, RECORD_STATUS, None)


def _revision_objects(inp: RolloutInput, resolved: ResolveResult) -> RevisionObjectsInput:
    """What prefetch, start and delete need to name and render the candidate's objects."""
    return RevisionObjectsInput(
        dm=inp.dm,
        record=resolved.record,
        revision=inp.revision,
        store_manifest_path=resolved.store_manifest_path,
        **inp.in_place(),
        caching_timeout_seconds=inp.timeouts.caching,
    )


def _failure_conditions(
    step: str, failed: RevisionRecord, reason: str, message: str, has_stable: bool
) -> list[ConditionUpdate]:
    """Promoted=False always; Resolved=False too when resolve is what failed (seed 001:
    ModelNotFound lands on Resolved=False)."""
    conditions = [
        ConditionUpdate(
            type=ConditionType.PROMOTED,
            status=ConditionStatus.FALSE,
            reason=Reason.CANDIDATE_REJECTED if has_stable else reason,
            message=f"revision {failed.hash} {reason}: {message}",
        )
    ]
    if step == RESOLVE and reason != Reason.ABORTED:
        conditions.append(
            ConditionUpdate(
                type=ConditionType.RESOLVED,
                status=ConditionStatus.FALSE,
                reason=reason,
                message=message,
            )
        )
    return conditions


def _decision_input(
    state: RolloutState,
    record: RevisionRecord,
    decision: DecisionKind,
    reason: str,
    message: str,
) -> DecisionRecordInput:
    inp = state.require_input()
    return DecisionRecordInput(
        dm=inp.dm,
        decision=decision,
        reason=reason,
        message=message[:2000],
        candidate=record,
        stable=inp.stable.hash if inp.stable else None,
        policy=inp.policy(),
        evaluation=state.evaluation,
        approval=state.expected_approval if state.approved else None,
        controller_build=inp.controller_build,
        blocking=decision == "Promote",
    )


def _watch_input(
    inp: RolloutInput, record: RevisionRecord, previous: RevisionRecord
) -> WatchPromotedInput:
    # ``previous`` is part of the activity's input only: the commands are the same (no patch).
    return WatchPromotedInput(
        dm=inp.dm,
        stable=record,
        previous=previous,
        **inp.in_place(),
        window_seconds=inp.post_promotion_watch_seconds or 0,
        period_seconds=inp.tuning.watch_period_seconds,
        probe_error_window_seconds=inp.tuning.probe_error_window_seconds,
    )


def _watched_previous(inp: RolloutInput, previous: str) -> RevisionRecord | None:
    """The revision a post-promotion watch keeps to switch back to: only the recorded stable
    (a Service that selected something else has nothing recorded to return to)."""
    if not inp.post_promotion_watch_seconds or inp.stable is None:
        return None
    return inp.stable if inp.stable.hash == previous else None


def _summary(arg: DecisionRecordInput) -> str:
    return f"signed decision record: {arg.decision} revision {arg.candidate.hash}"


def _unresolved_record(inp: RolloutInput) -> RevisionRecord:
    """The requested revision as failedRevision, for a rollout that failed before resolve."""
    return inp.revision.unresolved_record(inp.requested_revision)


def _failure_of(error: ActivityError, step: str, timeout_reason: Reason | None) -> RolloutFailure:
    cause = error.cause
    if (
        isinstance(cause, ApplicationError)
        and not cause.non_retryable
        and error.retry_state == RetryState.TIMEOUT
        and timeout_reason is not None
    ):
        # Retried until the phase deadline (e.g. a dataset Secret not labelled yet "holds
        # Evaluating until its timeout"): the deadline is the reason, the last error the why.
        return RolloutFailure(timeout_reason, f"{step} did not succeed in time: {cause.message}")
    if isinstance(cause, ApplicationError):
        reason = cause.type or Reason.ACTIVITY_FAILED
        return RolloutFailure(reason, cause.message, refused=cause.non_retryable)
    if isinstance(cause, TimeoutError):
        details = ""
        if cause.last_heartbeat_details:
            details = f"; last progress: {cause.last_heartbeat_details[0]}"
        reason = timeout_reason or Reason.ACTIVITY_TIMEOUT
        return RolloutFailure(reason, f"{step} did not finish within its deadline{details}")
    return RolloutFailure(Reason.ACTIVITY_FAILED, f"{step} failed: {cause or error}")

"""One reconcile of one DecisionModel: which rollout should run, and the stable's steady state.

The decision itself is pure (``controller.reconciler.decide``).

Effects follow the decision in crash-safe order: lastRetryToken is recorded before the retry's
workflow starts, so a crash in between cannot make one token start two runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.machinery.cache import DECISION_MODEL, DirectReader, ObjectReader
from controller.reconciler import re_resolve as re_resolving
from controller.reconciler.decide import Decision, decide
from controller.reconciler.fleet_budget import FleetBudget
from controller.reconciler.guard_status import (
    guard_shown,
    held_by_guard,
    held_phase,
    show_held,
)
from controller.reconciler.placement_guard import (
    already_shown,
    clear_refusal,
    placement_refusal,
    refused_decision,
    show_refusal,
)
from controller.reconciler.re_resolve import Backoff, ReResolves
from controller.reconciler.reaper import Reaper
from controller.reconciler.restarts import (
    RestartPlan,
    RestartPolicy,
    exhausted_message,
    plan_restart,
)
from controller.reconciler.served import served_generations
from controller.reconciler.settings import ControllerSettings
from controller.reconciler.steady import HeldCandidate, SteadyState
from controller.reconciler.superseding import (
    RECHECK_SECONDS,
    Superseding,
    closing_run,
    overdue_message,
    waiting_message,
)
from controller.serve.logs import current_dm
from controller.serve.metrics import transition_memory
from controller.serve.tracing import span
from controller.temporal.errors import TemporalUnavailable
from controller.temporal.probe import TemporalProbe
from controller.temporal.rollouts import Rollouts, RunningRollout
from decisionmodel.api import DecisionModel, DecisionModelInvalid
from decisionmodel.api.conditions import is_condition_true
from decisionmodel.api.status import DecisionModelStatus, FailedRevisionStatus, ReResolveStatus
from decisionmodel.engine.render.labels import (
    ANNOTATION_PROMOTE,
    ANNOTATION_ROLLBACK_TO,
    selector_labels,
)
from decisionmodel.rollout.contracts import (
    ConditionUpdate,
    DMRef,
    Phase,
    RevisionRecord,
    RolloutTuning,
    StatusUpdate,
)
from decisionmodel.rollout.dispatch import (
    DesiredRevision,
    DispatchSettings,
    desired_revision,
    record_of,
    rollback_refusal,
    rollout_input,
    runtime_update_available,
)
from decisionmodel.rollout.rollback_to import RollbackPlan, rollback_condition, rollback_plan
from decisionmodel.rollout.spec_mapping import dm_ref
from decisionmodel.vocabulary import (
    ROLLOUT_PHASES,
    ConditionStatus,
    ConditionType,
    EventReason,
    Reason,
    StatusKey,
)
from kube.client import DecisionModelGone, Kube
from kube.controller_status import Cond, ControllerStatus, apply_controller_status
from kube.errors import Forbidden
from kube.rollout_status import write_status
from kube.status import emit_event

log = logging.getLogger("dmrollout.controller.reconcile")
# After a run this process started closes: how soon to look again if no watch event does first.
JUST_CLOSED_RECHECK_SECONDS = 2.0


@dataclass(frozen=True)
class RolloutStep:
    """What the rollout part of a reconcile decided, for the steady state that follows."""

    requeue: float | None = None
    in_flight: bool = False
    queued: bool = False
    at_stable: bool = False
    refusal: str | None = None
    # The rollouts found running (None: not known, Temporal away: the reaper then waits).
    running: list[RunningRollout] | None = None
    just_closed: bool = False
    temporal_down: str | None = None
    # Why, while ``temporal_down``: unreachable, or the controller's credential refused.
    temporal_reason: Reason = Reason.TEMPORAL_UNAVAILABLE
    # When a ModelNotFound failure is resolved again (controller.reconciler.re_resolve), and
    # which attempt that is; a record of a failure that is gone, to remove.
    re_resolve_at: datetime | None = None
    re_resolve_attempt: int = 0
    clear_re_resolve: bool = False
    # Why no worker can take a running rollout's next task, naming the fix (None: one can).
    stranded: str | None = None
    # A run of the revision enforcing another policy was cancelled; the revision starts again
    # once it has closed (explorer seed 6013: meanwhile the DecisionModel still said
    # AwaitingPromotion, and approvals went to the run being stopped).
    replaced: bool = False
    # The new revision waits for the runs it replaces to close (controller.reconciler.
    # superseding): what Reconciling says meanwhile.
    superseding: str | None = None


@dataclass
class ReResolveDue:
    """The failed revision's re-resolve schedule as this reconcile sees it (``tried`` is
    replaced when this reconcile records an attempt)."""

    failed: FailedRevisionStatus | None
    tried: ReResolveStatus | None
    at: datetime | None
    now: datetime
    due: bool

    @property
    def ahead(self) -> datetime | None:
        """The next re-resolve, when it is still to come."""
        return self.at if self.at is not None and self.at > self.now else None

    def next_attempt(self) -> int:
        return re_resolving.attempts_of(self.tried, self.failed) + 1 if self.failed else 0

    def sooner(self, requeue: float | None) -> float | None:
        """``requeue``, or the wait until the next re-resolve when that comes first."""
        if self.ahead is None:
            return requeue
        wait = (self.ahead - self.now).total_seconds()
        return min(requeue, wait) if requeue is not None else wait


@dataclass(frozen=True)
class Started:
    """What starting (or forwarding) did: when to look again, whether the start waits for
    the fleet's budget, whether the restart discipline gave up."""

    requeue: float | None
    queued: bool
    exhausted: bool


@dataclass
class Reconciler:
    kube: Kube
    rollouts: Rollouts
    steady: SteadyState
    settings: ControllerSettings
    dispatch: DispatchSettings
    metrics: Any  # controller.serve.metrics.ControllerMetrics
    # Re-queues a DecisionModel (the work queue's add): wakes the first queued ones when a
    # budget slot frees (controller.reconciler.fleet_budget).
    wake: Callable[[str], None] | None = None
    # Rollouts this process started and believes running: covers visibility's short lag.
    started: dict[str, str] = field(default_factory=dict)
    # The last status seen per DecisionModel, for metrics transitions.
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Budget check and start happen under one lock: reconciles run concurrently (`workers`), and
    # two that both saw a free slot would both start (the budget exceeded by a race).
    budget_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    re_resolves: ReResolves = field(default_factory=ReResolves)
    budget: FleetBudget = field(init=False)
    reaper: Reaper | None = None
    # When each DecisionModel was last reaped (monotonic): a reap lists four kinds, so it runs
    # once per reap grace, not on every reconcile.
    reaped_at: dict[str, float] = field(default_factory=dict)
    # Runs already said to be replaced for their policy: a cancelled run closes a few seconds
    # later, and every reconcile in between sees it again; one Event per run is enough.
    replaced_told: OrderedDict[str, None] = field(default_factory=OrderedDict)
    superseding: Superseding = field(default_factory=Superseding)
    # Runs already said (by an Event) to be stranded; the condition says it on every reconcile.
    stranded_told: OrderedDict[str, None] = field(default_factory=OrderedDict)
    # Where the DecisionModel is read: the controller's watch-fed cache
    # (controller/machinery/cache.py).
    reader: ObjectReader | None = None
    # Whether Temporal answers, for the DecisionModels that make no call of their own to it.
    temporal: TemporalProbe | None = None

    def __post_init__(self) -> None:
        if self.reader is None:
            self.reader = DirectReader(self.kube)
        namespaces = self.settings.watch_namespaces

        async def in_flight() -> set[str]:
            return await self.rollouts.in_flight(namespaces)

        self.budget = FleetBudget(
            self.settings.max_concurrent_rollouts,
            in_flight,
            resync_seconds=self.settings.budget_resync_seconds,
            wake=self.wake,
        )
        if self.reaper is None:
            grace = timedelta(seconds=self.settings.reap_grace_seconds)
            on_reaped = self.metrics.record_reaped if self.metrics is not None else None
            self.reaper = Reaper(self.kube, grace, on_reaped, reader=self.reader)

    def restart_policy(self) -> RestartPolicy:
        return RestartPolicy(
            max_restarts=self.settings.max_rollout_restarts,
            backoff=timedelta(seconds=self.settings.restart_backoff_seconds),
        )

    def re_resolve_backoff(self) -> Backoff:
        return Backoff(
            first=timedelta(seconds=self.settings.re_resolve_backoff_seconds),
            longest=timedelta(seconds=self.settings.re_resolve_max_backoff_seconds),
        )

    def tuning(self) -> RolloutTuning:
        return RolloutTuning(
            heartbeat_timeout_seconds=self.settings.heartbeat_timeout_seconds,
            promotion_grace_seconds=self.settings.promotion_grace_seconds,
            cleanup_round_seconds=self.settings.cleanup_round_seconds,
            cleanup_pause_seconds=self.settings.cleanup_pause_seconds,
            watch_period_seconds=self.settings.post_promotion_watch_period_seconds,
            probe_error_window_seconds=self.settings.probe_error_window_seconds,
        )

    async def reconcile(self, namespace: str, name: str) -> float | None:
        """Returns seconds until the next re-check (None = only on events)."""
        key = f"{namespace}/{name}"
        token = current_dm.set(key)  # its log lines name it (controller/serve/logs.py)
        try:
            # With tracing on, the rollout this reconcile starts is a child of this span.
            with span("reconcile", **reconcile_attributes(namespace, name)):
                return await self._reconcile_key(namespace, name)
        finally:
            current_dm.reset(token)

    async def _reconcile_key(self, namespace: str, name: str) -> float | None:
        key = f"{namespace}/{name}"
        if not self.settings.watches(namespace):
            log.warning("refusing %s: namespace %s is not watched", key, namespace)
            return None
        assert self.reader is not None
        obj = await Kube.run(self.reader.get, DECISION_MODEL, namespace, name)
        if obj is None:
            self.metrics.forget(namespace, name)
            self.seen.pop(key, None)
            self.budget.dequeue(key)
            self.started.pop(key, None)
            self.re_resolves.forget(key)
            self.superseding.forget(key)
            return None
        try:
            dm = DecisionModel.from_k8s(obj)
        except DecisionModelInvalid as e:
            log.error("%s is invalid: %s", key, e)
            return None
        ref = dm_ref(dm)
        try:
            return await self._reconcile(ref, dm, obj)
        except DecisionModelGone:
            return None

    async def _reconcile(self, ref: DMRef, dm: DecisionModel, obj: dict[str, Any]) -> float | None:
        # The stable is looked after whatever Temporal does: a rollout decision that cannot be
        # made now (Temporal away) leaves every rollout as it is and says so on the
        # DecisionModel; the steady state below needs Kubernetes alone.
        try:
            async with self.rollouts.reachable():
                step = await self._rollouts(ref, dm)
        except TemporalUnavailable as e:
            status = dm.status
            phase = status.phase if status else None
            step = RolloutStep(
                requeue=self.settings.reinspect_seconds,
                in_flight=phase in ROLLOUT_PHASES,
                at_stable=self._at_stable(dm),
                temporal_down=str(e),
                temporal_reason=e.reason,
            )
        if step.just_closed:
            return JUST_CLOSED_RECHECK_SECONDS
        if step.running is not None:
            await self._reap(ref, dm, obj, step.running)
        short = await self._steady(ref, dm, obj, step)
        if short and step.requeue is not None:
            # A stable Pod not model-ready (a runtime fault fixed, a Pod replaced) is looked at
            # again sooner than every reinspect period: no Pod event says that the runtime
            # recovered, and the reference's 60 s left a fixed stable unserved for a minute.
            return min(step.requeue, self.settings.unready_reinspect_seconds)
        return step.requeue

    def _at_stable(self, dm: DecisionModel) -> bool:
        stable = dm.status.stable_revision if dm.status else None
        return stable is not None and desired_revision(dm, self.dispatch).is_revision(stable)

    async def _running(self, key: str, dm: DecisionModel) -> list[RunningRollout]:
        """The rollouts of this DecisionModel that may run, without a visibility list: the run
        its status names while a rollout phase or a guard holds (a rollout's steps record it,
        hand-started ones too) and the run this process started; each confirmed by one bounded
        describe. An idle DecisionModel costs Temporal nothing.

        A guard holding a step puts the phase to Degraded (seed 001), no rollout phase: left
        out, a guard-held run was invisible to a restarted controller, and a spec change then
        started a second run beside it, which nothing cancelled (issue 34)."""
        status = dm.status
        wids: list[str] = []
        if status is not None and status.rollout is not None and _may_run(status):
            wids.append(status.rollout.workflow_id)
        if key in self.started:
            wids.append(self.started[key])
        found: list[RunningRollout] = []
        for wid in dict.fromkeys(wids):
            run = await self.rollouts.describe_running(wid)
            if run is not None:
                found.append(run)
        return found

    async def _rollouts(self, ref: DMRef, dm: DecisionModel) -> RolloutStep:
        """Which rollout should run, and the effects: cancel, start (within the budget, after
        the restart discipline), forward an approval. Every Temporal call is in here."""
        key = ref.key
        desired = desired_revision(dm, self.dispatch)
        running = await self._running(key, dm)
        known = self.started.get(key)
        if known and all(r.workflow_id != known for r in running):
            # The run this process started has just closed, and its last status write may
            # not be in the cache yet (its watch event is on the way). Deciding on this
            # snapshot started the same revision again (1 DecisionModel in a 300-wave);
            # that event, or this requeue, reconciles with the outcome.
            self.started.pop(key, None)
            return RolloutStep(just_closed=True)
        stranded = await self._stranded(ref, running)
        stable = dm.status.stable_revision if dm.status else None
        self.budget.observe(key, running, stable.hash if stable else None)
        retry = self._re_resolve_due(key, dm, desired, running)
        decision = decide(dm, desired, running, re_resolve=retry.due)
        decision = await self._after_the_stopping(
            ref, dm, desired, running, decision, retry.due, stranded
        )
        refusal = placement_refusal(dm, self.steady.rollout.placement_policy())
        if refusal is not None:
            decision = refused_decision(decision)
        await self._stop_what_goes(ref, key, decision)
        started = await self._start_or_forward(ref, dm, desired, decision, retry)
        stale = re_resolving.stale(dm.status.re_resolve if dm.status else None, retry.failed)
        if stale:
            self.re_resolves.forget(key)
        return RolloutStep(
            re_resolve_at=retry.ahead,
            re_resolve_attempt=retry.next_attempt(),
            clear_re_resolve=stale,
            requeue=retry.sooner(started.requeue),
            in_flight=bool(decision.target_id) and not started.queued and not started.exhausted,
            queued=started.queued,
            at_stable=decision.at_stable,
            refusal=refusal,
            running=running,
            stranded=stranded,
            # A refused spec restarts nothing (refused_decision): not "rolled out again".
            replaced=bool(decision.replaced) and refusal is None,
            superseding=waiting_message(decision.waiting) if decision.waiting else None,
        )

    def _re_resolve_due(
        self,
        key: str,
        dm: DecisionModel,
        desired: DesiredRevision,
        running: list[RunningRollout],
    ) -> ReResolveDue:
        """When the failed revision's tag is resolved again (ModelNotFound's backoff), and
        whether that is now."""
        failed = dm.status.failed_revision if dm.status else None
        tried = self.re_resolves.latest(key, dm.status.re_resolve if dm.status else None)
        at = re_resolving.due_at(failed, tried, self.re_resolve_backoff())
        now = datetime.now(UTC)
        due = at is not None and now >= at and not running and desired.is_revision(failed)
        return ReResolveDue(failed, tried, at, now, due)

    async def _stop_what_goes(self, ref: DMRef, key: str, decision: Decision) -> None:
        """The runs the decision cancels, a policy's replaced approval, a failure cleared."""
        for wid in decision.cancel:
            await self.rollouts.cancel(wid)
            if self.started.get(key) == wid:
                self.started.pop(key, None)
        await self._policy_replaced(ref, decision)
        if decision.clear_failed:
            await write_status(self.kube, StatusUpdate(dm=ref, clear_failed=True))

    async def _start_or_forward(
        self,
        ref: DMRef,
        dm: DecisionModel,
        desired: DesiredRevision,
        decision: Decision,
        retry: ReResolveDue,
    ) -> Started:
        """Start the decided run (after the restart discipline, within the budget), or
        forward an approval to the running one; when to look again."""
        key = ref.key
        requeue: float | None = self.settings.reinspect_seconds
        plan = RestartPlan(start=True)
        if decision.start and decision.target_id:
            plan = await self._restart_plan(ref, dm, desired, decision.target_id)
        if plan.wait:
            requeue = min(requeue or plan.wait.total_seconds(), plan.wait.total_seconds())
        if decision.start and decision.target_id and plan.start:
            async with self.budget_lock:
                allowed = await self._budget_allows(key)
                if allowed:
                    await self._start(ref, dm, decision, decision.target_id, plan, retry)
            if not allowed:
                requeue = self.budget.recheck_seconds(self.settings.queued_recheck_seconds)
                return Started(requeue, queued=True, exhausted=plan.exhausted)
        elif decision.replaced:
            # Start the revision again as soon as the cancelled run has closed (it removes its
            # candidate first); an approval waits for the new run.
            requeue = min(requeue or 1e9, self.settings.queued_recheck_seconds)
        elif decision.waiting:
            requeue = min(requeue or 1e9, RECHECK_SECONDS)
        elif decision.target_id:
            self.budget.dequeue(key)
            await self._forward_approval(ref, dm, decision.target_id)
        else:
            self.budget.dequeue(key)
        return Started(requeue, queued=False, exhausted=plan.exhausted)

    async def _start(
        self,
        ref: DMRef,
        dm: DecisionModel,
        decision: Decision,
        target: str,
        plan: RestartPlan,
        retry: ReResolveDue,
    ) -> None:
        """Within the budget: the retry token consumed and the re-resolve attempt recorded
        before the run starts (a restarted controller waits from them), then the start."""
        key = ref.key
        if decision.consume_retry is not None:
            await apply_controller_status(
                self.kube, ref, ControllerStatus(last_retry_token=decision.consume_retry)
            )
        if retry.due and retry.failed is not None:
            retry.tried = await self._re_resolving(ref, retry.failed, retry.tried)
        inp = rollout_input(dm, self.dispatch, self.tuning(), decision.consume_retry)
        await self.rollouts.start(inp)
        if plan.restarts:
            await self._restarted(ref, target, plan)
        self.started[key] = target
        self.budget.started(key, target)

    async def _after_the_stopping(
        self,
        ref: DMRef,
        dm: DecisionModel,
        desired: DesiredRevision,
        running: list[RunningRollout],
        decision: Decision,
        re_resolve: bool,
        stranded: str | None,
    ) -> Decision:
        """A start waits for the runs it replaces to close, within a bound
        (controller.reconciler.superseding): also for a run that recorded its end and still
        removes its candidate, which is waited for but not cancelled (its status says why it
        ended: a cancellation would rewrite that as Superseded). A stranded run cannot close
        (no worker takes its tasks): the new revision starts beside it, as before."""
        if decision.start:
            wid = closing_run(dm, running, decision.target_id)
            if wid is not None and await self.rollouts.describe_running(wid) is not None:
                decision = dataclasses.replace(
                    decision, start=False, waiting=(wid,), why=f"once {wid} has closed"
                )
        key = ref.key
        if decision.waiting and stranded is not None:
            return decide(dm, desired, running, re_resolve=re_resolve, overdue=True)
        if not self.superseding.overdue(key, decision.waiting):
            return decision
        self.superseding.forget(key)
        message = overdue_message(decision.waiting)
        log.warning("%s/%s: %s", ref.namespace, ref.name, message)
        await emit_event(self.kube, ref, Reason.SUPERSEDED, message, "Warning")
        return decide(dm, desired, running, re_resolve=re_resolve, overdue=True)

    async def _re_resolving(
        self, ref: DMRef, failed: FailedRevisionStatus, tried: ReResolveStatus | None
    ) -> ReResolveStatus:
        """Record a re-resolve attempt before its run starts (as lastRetryToken is): a restarted
        controller, or the next leader, then waits from it instead of starting a burst."""
        record = re_resolving.after_attempt(failed, tried, datetime.now(UTC))
        want = ControllerStatus(re_resolve=record.to_wire())
        await apply_controller_status(self.kube, ref, want)
        self.re_resolves.wrote(ref.key, record)
        return record

    async def _stranded(self, ref: DMRef, running: list[RunningRollout]) -> str | None:
        """Why no worker can take a running rollout's next task (issue 34: pinned to a build
        whose workers are gone, or no worker on the queue), from the describe this reconcile
        made and the queue's pollers; a Warning Event once per run."""
        for run in running:
            why = await self.rollouts.stranded(run.workflow_id, run.build)
            if why is None:
                continue
            if run.workflow_id not in self.stranded_told:
                self.stranded_told[run.workflow_id] = None
                while len(self.stranded_told) > 1000:
                    self.stranded_told.popitem(last=False)
                log.warning("%s/%s: %s", ref.namespace, ref.name, why)
                await emit_event(self.kube, ref, Reason.ROLLOUT_STRANDED, why, "Warning")
            return why
        return None

    async def _policy_replaced(self, ref: DMRef, decision: Decision) -> None:
        """Say where a user looks that a run was replaced for its policy (an Event per run)."""
        for wid, enforced in decision.replaced:
            told = f"{wid}@{enforced}"
            if told in self.replaced_told:
                continue
            self.replaced_told[told] = None
            while len(self.replaced_told) > 1000:
                self.replaced_told.popitem(last=False)
            message = (
                f"rollout workflow {wid} enforces policy {enforced}, but spec.rollout asks for "
                f"policy {decision.policy} (evaluation, gates, promotion): it was cancelled and "
                "the revision is rolled out again under the current policy; the stable revision "
                "keeps serving. A run you did not expect was started by someone with write "
                "access to the Temporal namespace (docs/security.md)"
            )
            log.warning("%s/%s: %s", ref.namespace, ref.name, message)
            await emit_event(self.kube, ref, EventReason.POLICY_MISMATCH, message, "Warning")

    # -- restart discipline and the reaper (controller.reconciler.restarts,
    # controller.reconciler.reaper) ----------
    async def _restart_plan(
        self, ref: DMRef, dm: DecisionModel, desired: DesiredRevision, wid: str
    ) -> RestartPlan:
        policy = self.restart_policy()
        plan = plan_restart(await self.rollouts.closed_runs(wid), datetime.now(UTC), policy)
        if plan.exhausted:
            await self._give_up(ref, dm, desired, exhausted_message(wid, plan, policy))
        return plan

    async def _restarted(self, ref: DMRef, wid: str, plan: RestartPlan) -> None:
        self.metrics.record_restart(ref.namespace, ref.name, "restarted")
        message = (
            f"rollout workflow {wid} ended without a verdict ({plan.last_status}); started it "
            f"again (restart {plan.restarts} of {self.settings.max_rollout_restarts})"
        )
        log.warning("%s/%s: %s", ref.namespace, ref.name, message)
        await emit_event(self.kube, ref, EventReason.ROLLOUT_RESTARTED, message, "Warning")

    async def _give_up(
        self, ref: DMRef, dm: DecisionModel, desired: DesiredRevision, message: str
    ) -> None:
        """Record the revision as failed, as a rollout would: no more starts without a new
        decisionmodel.io/retry value, and the reaper collects what the runs left behind."""
        self.metrics.record_restart(ref.namespace, ref.name, "exhausted")
        has_stable = bool(dm.status and dm.status.stable_revision)
        reason = Reason.ROLLOUT_RESTARTS_EXHAUSTED
        failed = desired.revision.unresolved_record(desired.requested_hash)
        update = StatusUpdate(
            dm=ref,
            phase=Phase.ROLLED_BACK if has_stable else Phase.FAILED,
            failed=failed,
            failed_reason=reason,
            failed_message=message,
            clear_candidate=True,
            conditions=[
                ConditionUpdate(
                    type=ConditionType.PROMOTED,
                    status=ConditionStatus.FALSE,
                    reason=reason,
                    message=message,
                )
            ],
        )
        await write_status(self.kube, update)
        await emit_event(self.kube, ref, EventReason.ROLLOUT_RESTARTS_EXHAUSTED, message, "Warning")

    async def _reap(
        self, ref: DMRef, dm: DecisionModel, obj: dict[str, Any], running: list[RunningRollout]
    ) -> None:
        key = ref.key
        now = time.monotonic()
        if self.reaper is None or now - self.reaped_at.get(key, -1e9) < self.reaper_every():
            return
        if obj["metadata"].get("deletionTimestamp"):
            return  # garbage collection takes everything
        status = dm.status
        keep = {r.revision for r in running if r.revision}
        recorded = [status.stable_revision, status.candidate_revision] if status else []
        if running and status is not None:
            recorded.append(status.previous_revision)  # in its grace after a promotion
        keep |= {r.hash for r in recorded if r is not None}
        self.reaped_at[key] = now
        try:
            await self.reaper.reap(ref, keep)
        except Forbidden as e:
            # RBAC or the admission policy refuses a delete: the reaper is housekeeping, and
            # the steady state below must not wait on it (tried again next period).
            log.warning("%s: reaping refused: %s", key, e)

    def reaper_every(self) -> float:
        return max(self.settings.reap_grace_seconds, 1.0)

    async def _budget_allows(self, key: str) -> bool:
        """O(1): the in-memory count (controller.reconciler.fleet_budget), no visibility call per
        start."""
        return await self.budget.allows(key)

    async def _runtime_update(self, ref: DMRef, dm: DecisionModel, want: ControllerStatus) -> None:
        """Policy Pinned: say (condition, and an Event once) that a newer default runtime exists.

        Seed 001 "Upgrading the operator": the DecisionModel stays on its stable's runtime until
        someone sets spec.runtimeVersion; nothing rolls by itself.
        """
        newer = runtime_update_available(dm, self.dispatch)
        if newer is None:
            return  # the condition is the controller's: leaving it out of the apply removes it
        stable = dm.status.stable_revision if dm.status else None
        current = stable.runtime_version if stable else None
        message = (
            f"runtime {newer} is the operator's default; this DecisionModel stays on {current} "
            f"(--runtime-version-policy Pinned). Set spec.runtimeVersion: {newer!r} to roll onto it"
        )
        want.conditions.append(
            Cond(
                ConditionType.RUNTIME_UPDATE_AVAILABLE,
                ConditionStatus.TRUE,
                Reason.RUNTIME_UPDATE_AVAILABLE,
                message,
            )
        )
        # The Event once: when the condition the status already holds is not True yet.
        if not is_condition_true(
            dm.status.conditions if dm.status else [], ConditionType.RUNTIME_UPDATE_AVAILABLE
        ):
            await emit_event(self.kube, ref, EventReason.RUNTIME_UPDATE_AVAILABLE, message)

    async def _placement_refused(
        self, ref: DMRef, dm: DecisionModel, want: ControllerStatus, message: str
    ) -> None:
        """controller.reconciler.placement_guard: the condition, and a Warning Event once per
        refusal."""
        has_stable = bool(dm.status and dm.status.stable_revision)
        want.conditions = show_refusal(want.conditions, message, has_stable)
        if not already_shown(dm):
            log.warning("%s/%s: %s", ref.namespace, ref.name, message)
            await emit_event(self.kube, ref, Reason.PLACEMENT_REFUSED, message, "Warning")

    async def _forward_approval(self, ref: DMRef, dm: DecisionModel, wid: str) -> None:
        approval = (dm.metadata.annotations or {}).get(ANNOTATION_PROMOTE)
        if not approval:
            return
        progress = await self.rollouts.progress(wid)
        if progress is None or progress.phase != Phase.AWAITING_PROMOTION:
            return  # early: keep the annotation, forward once the candidate waits
        if approval == progress.revision and progress.expected_approval:
            # The reference's form: the candidate's hash. It names the candidate that waits
            # now, so it stands for that candidate's full token (a stale hash never matches).
            approval = progress.expected_approval
        refusal = await self.rollouts.approve(wid, approval)
        if refusal is not None:
            await emit_event(self.kube, ref, EventReason.APPROVAL_REJECTED, refusal, "Warning")
        # Applied or refused: the annotation has been consumed either way.
        await Kube.run(self.kube.remove_dm_annotation, ref, ANNOTATION_PROMOTE)

    async def _steady(
        self, ref: DMRef, dm: DecisionModel, obj: dict[str, Any], step: RolloutStep
    ) -> bool:
        """The controller's share of status: the stable's health, the phase when nothing rolls
        out, and the conditions only it knows (placement, rollback-to, Temporal, the queue).
        True when a stable has fewer model-ready replicas than it should."""
        status = dm.status
        want = ControllerStatus(
            observed_generation=ref.generation,
            endpoint=f"http://{ref.name}.{ref.namespace}.svc:11435/v1/systemone",
        )
        phase_now = status.phase.value if status and status.phase else None
        record = record_of(status.stable_revision if status else None)
        new_phase: Phase | None = None
        if record is not None:
            new_phase = await self._with_stable(ref, dm, record, step, want, phase_now)
        else:
            want.replicas = {"desired": dm.spec.replicas, "modelReady": 0}
            want.conditions.extend(_no_stable(phase_now, status))
            want.while_held = frozenset({ConditionType.DEGRADED})
        held = (
            held_by_guard(status.conditions, ref.generation) if step.in_flight and status else None
        )
        if held is not None:
            want.conditions = show_held(want.conditions, held)
            new_phase = held_phase(held) or new_phase
        await self._runtime_update(ref, dm, want)
        rollback = await self._rollback_to(ref, dm, want)
        self._notices(dm, step, want)
        if step.refusal is not None:
            await self._placement_refused(ref, dm, want, step.refusal)
            if record is None:
                new_phase = Phase.FAILED
            if status is not None and status.candidate_revision is not None:
                # The cancelled candidate's rollout leaves status to a newer one; there is none.
                await write_status(self.kube, StatusUpdate(dm=ref, clear_candidate=True))
        else:
            want.conditions = clear_refusal(want.conditions, dm)
        new_phase = self._pending(ref, step, want, phase_now, new_phase, record is not None)
        phase = new_phase.value if new_phase else phase_now
        await self._kstatus(dm, step, phase, want)
        want.generations = served_generations(status, ref.generation, step.at_stable)
        await self._write_steady(ref, obj, want, new_phase, phase_now, rollback)
        replicas = want.replicas or {}
        return record is not None and replicas.get("modelReady", 0) < replicas.get("desired", 0)

    def _pending(
        self,
        ref: DMRef,
        step: RolloutStep,
        want: ControllerStatus,
        phase_now: str | None,
        new_phase: Phase | None,
        serving: bool,
    ) -> Phase | None:
        """Pending while a rollout is accepted but cannot go on yet: the first one with
        Temporal away, a revision started again, a run waited for, the fleet's budget full."""
        if phase_now is None and new_phase is None and step.temporal_down is not None:
            # Seed 001: Pending is "accepted, not yet processed"; the first rollout cannot start
            # while Temporal is away (TemporalReachable says why), and an empty phase column
            # says nothing (explorer seed 3519: no phase for 40 s under a refused credential).
            new_phase = Phase.PENDING
        if step.replaced or step.superseding:
            new_phase = Phase.PENDING
        if step.queued:
            new_phase = Phase.PENDING
            want.conditions.append(
                Cond(
                    ConditionType.READY,
                    ConditionStatus.of(serving),
                    Reason.ROLLOUT_QUEUED,
                    self.budget.queued_message(ref.key),
                )
            )
        return new_phase

    async def _kstatus(
        self, dm: DecisionModel, step: RolloutStep, phase: str | None, want: ControllerStatus
    ) -> None:
        """Stalled or Reconciling (kstatus), naming a held candidate's Pods when one waits."""
        kstatus = stalled_condition(dm, step, phase) or reconciling_condition(dm, step, phase)
        candidate = await self._held_candidate(dm, step, phase)
        if kstatus is not None and candidate is not None:
            kstatus = held_candidate_condition(kstatus, candidate)
        if kstatus is not None:
            want.conditions.append(kstatus)

    async def _rollback_to(
        self, ref: DMRef, dm: DecisionModel, want: ControllerStatus
    ) -> RollbackPlan:
        """decisionmodel.io/rollback-to (decisionmodel.rollout.rollback_to): its record and
        condition into ``want``; the annotation removed once it has done its work or a spec
        change ended it (before the record is cleared: a crash in between loses nothing)."""
        plan = rollback_plan(dm)
        if plan.remove_annotation:
            await Kube.run(self.kube.remove_dm_annotation, ref, ANNOTATION_ROLLBACK_TO)
        want.rollback_to = plan.in_force.record() if plan.in_force is not None else {}
        condition = rollback_condition(dm, plan)
        if condition is not None:
            want.conditions.append(condition)
        return plan

    async def _rollback_events(
        self, ref: DMRef, plan: RollbackPlan, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        """An Event when status.rollbackTo is taken or a spec change ends it, as the server
        accepted the write (once per change, whatever the cache showed)."""
        was, now = before.get(StatusKey.ROLLBACK_TO), after.get(StatusKey.ROLLBACK_TO)
        if now and now != was and plan.in_force is not None:
            target = plan.in_force.target
            message = (
                f"{ANNOTATION_ROLLBACK_TO}: revision {target.hash} ({target.model}) is asked for "
                f"in place of generation {now.get('generation')} of the spec, until it changes"
            )
            await emit_event(self.kube, ref, EventReason.ROLLBACK_REQUESTED, message)
        elif was and not now and plan.superseded is not None:
            message = (
                f"{ANNOTATION_ROLLBACK_TO}={plan.superseded} ended: generation {ref.generation} "
                "of the spec changed since it was taken, so the spec rolls out"
            )
            await emit_event(self.kube, ref, EventReason.ROLLBACK_SUPERSEDED, message)

    async def _held_candidate(
        self, dm: DecisionModel, step: RolloutStep, phase: str | None
    ) -> HeldCandidate | None:
        """The candidate awaiting approval, its Pods warmed up and inspected (steady.
        held_candidate); None when no candidate waits for a person."""
        status = dm.status
        if phase != Phase.AWAITING_PROMOTION or not step.in_flight or status is None:
            return None
        candidate = record_of(status.candidate_revision)
        if candidate is None or status.stable_revision is None:
            return None
        return await self.steady.held_candidate(dm, candidate)

    async def _with_stable(
        self,
        ref: DMRef,
        dm: DecisionModel,
        record: RevisionRecord,
        step: RolloutStep,
        want: ControllerStatus,
        phase_now: str | None,
    ) -> Phase | None:
        """The stable's steady state (controller.reconciler.steady) into ``want``; the phase
        it calls for, None to leave the phase to the rollout."""
        status = dm.status
        health = await self.steady.reconcile(dm, record)
        for result in health.probe_transitions:
            self.metrics.record_probe_transition(ref.namespace, ref.name, result)
        want.replicas = {"desired": health.desired, "modelReady": health.model_ready}
        want.selector = ",".join(
            f"{k}={v}" for k, v in sorted(selector_labels(ref.name, record.hash).items())
        )
        want.conditions = list(health.conditions)
        degraded = bool(health.degraded_reason) or health.model_ready < health.desired
        failed = status is not None and status.failed_revision is not None
        phase, rejected = steady_phase(phase_now, step, degraded, failed)
        abandoned = step.at_stable and phase_now in ROLLOUT_PHASES
        if abandoned and not step.in_flight and status and status.candidate_revision is not None:
            # The spec came back to the stable while a rollout ran (AwaitingPromotion, say): the
            # superseded run leaves status to a newer rollout, and there is none.
            await write_status(self.kube, StatusUpdate(dm=ref, clear_candidate=True))
        if rejected:
            want.conditions = _rejected(want.conditions, status, health.model_ready > 0)
        return phase

    def _notices(self, dm: DecisionModel, step: RolloutStep, want: ControllerStatus) -> None:
        """What only the controller can say: a rollback-to it will not follow, Temporal away,
        when a tag not found is resolved again."""
        want.clear_re_resolve = step.clear_re_resolve
        if step.re_resolve_at is not None:
            when = f"{step.re_resolve_at:%H:%M:%S} UTC"
            backoff = self.re_resolve_backoff().describe()
            want.conditions = [
                c.model_copy(
                    update={
                        "message": f"{c.message}; the tag is resolved again at {when} by "
                        f"itself (attempt {step.re_resolve_attempt}; {backoff}), or fix "
                        "spec.model"
                    }
                )
                if c.reason == Reason.MODEL_NOT_FOUND
                else c
                for c in want.conditions
            ]
        refused_rollback = rollback_refusal(dm)
        if refused_rollback is not None:
            want.conditions = [c for c in want.conditions if c.type != ConditionType.DEGRADED]
            want.conditions.append(
                Cond(
                    ConditionType.DEGRADED,
                    ConditionStatus.TRUE,
                    Reason.ROLLBACK_TARGET_UNAVAILABLE,
                    refused_rollback,
                )
            )
        down = temporal_condition(step, self.temporal)
        if down is not None:
            want.conditions.append(down)

    async def _write_steady(
        self,
        ref: DMRef,
        obj: dict[str, Any],
        want: ControllerStatus,
        new_phase: Phase | None,
        phase_now: str | None,
        rollback: RollbackPlan,
    ) -> None:
        written: dict[str, Any] | None = None
        if new_phase is not None and new_phase.value != phase_now:
            # Judged from ``obj``: a status changed meanwhile (a rollback just written) voids
            # the judgement; the reconcile that change triggers judges again.
            written = await write_status(self.kube, StatusUpdate(dm=ref, phase=new_phase), read=obj)
            if written is None:
                return
        # Built from the object as read (the cache) or as just written: no read per reconcile.
        seen = written or obj
        accepted = await apply_controller_status(self.kube, ref, want, seen)
        current = seen.get("status") or {}
        if accepted is not None:
            current = accepted[1]
            await self._rollback_events(ref, rollback, accepted[0], current)
        # Metrics follow the status the API server holds (written by this controller or by a
        # rollout's activities), transition by transition from what this process saw last; a
        # write that was refused never reaches them.
        key = ref.key
        self.metrics.record_accepted_status(ref.namespace, ref.name, self.seen.get(key), current)
        self.seen[key] = transition_memory(current)


# What the user does about each way Temporal cannot be used (docs/operations.md "When Temporal is
# away").
TEMPORAL_FIXES: dict[str, str] = {
    Reason.TEMPORAL_UNAVAILABLE: "check that the Temporal frontend runs and is reachable from "
    "the controller",
    Reason.TEMPORAL_UNAUTHORIZED: "rotate the controller's API key Secret "
    "(temporal.apiKey.existingSecret: taken by itself from DMROLLOUT_TEMPORAL_API_KEY_FILE, "
    "else restart the controller) or renew its client certificate Secret "
    "(temporal.tls.clientCertSecret: the controller restarts by itself once the renewed one is "
    "mounted)",
    Reason.TEMPORAL_PERMISSION_DENIED: "grant the controller's identity (its API key's or "
    "certificate's user or service account) read and write on that Temporal namespace",
}


def temporal_condition(step: RolloutStep, probe: TemporalProbe | None) -> ConditionUpdate | None:
    """TemporalReachable=False while this reconcile or the probe found Temporal unusable: its
    reason tells an outage from a refused credential, its message names where and the fix."""
    if step.temporal_down is not None:
        down, reason = step.temporal_down, step.temporal_reason
    elif probe is not None and probe.down is not None:
        down, reason = probe.down, probe.reason
    else:
        return None
    fix = TEMPORAL_FIXES.get(reason) or TEMPORAL_FIXES[Reason.TEMPORAL_UNAVAILABLE]
    until = "answers" if reason == Reason.TEMPORAL_UNAVAILABLE else "accepts the controller"
    return Cond(
        ConditionType.TEMPORAL_REACHABLE,
        ConditionStatus.FALSE,
        reason,
        f"{down}: rollouts wait until it {until}; {fix}; the stable revision is looked after "
        "meanwhile",
    )


def stalled_condition(
    dm: DecisionModel, step: RolloutStep, phase: str | None
) -> ConditionUpdate | None:
    """kstatus' Stalled (Helm 4 --wait, Flux, Argo CD health): the spec's revision failed and
    nothing will retry it by itself, so only a change by the user moves it (a ModelNotFound is
    re-resolved by itself), the spec's placement is refused (PlacementRefused: before, no
    kstatus condition, so kstatus read a refused spec as Current; issue 38), or a rollout in
    flight that no worker can serve (RolloutStranded: the message names the fix). None: not
    stalled."""
    if step.refusal is not None:
        return Cond(
            ConditionType.STALLED,
            ConditionStatus.TRUE,
            Reason.PLACEMENT_REFUSED,
            f"{step.refusal}; nothing rolls out until the spec changes",
        )
    if step.stranded is not None:
        return Cond(
            ConditionType.STALLED, ConditionStatus.TRUE, Reason.ROLLOUT_STRANDED, step.stranded
        )
    failed = dm.status.failed_revision if dm.status else None
    if (
        phase not in (Phase.ROLLED_BACK, Phase.FAILED)
        or failed is None
        or step.at_stable
        or step.in_flight
        or failed.reason in (None, Reason.MODEL_NOT_FOUND)
    ):
        return None
    return Cond(
        ConditionType.STALLED,
        ConditionStatus.TRUE,
        failed.reason or Reason.CANDIDATE_REJECTED,
        f"revision {failed.hash} failed ({failed.reason}) and is not retried by itself: change "
        "the spec, or set a new decisionmodel.io/retry value",
    )


def reconciling_condition(
    dm: DecisionModel, step: RolloutStep, phase: str | None
) -> ConditionUpdate | None:
    """kstatus' Reconciling (Helm 4 --wait, Flux, kstatus-aware tools): True while the spec's
    revision is not yet what serves and dmrollout is getting there by itself (a rollout in
    flight, queued, waiting for Temporal or for a ModelNotFound to be resolved again). With
    observedGeneration and Stalled it tells "in progress" from "current" and "failed"; Ready
    keeps the reference's meaning (the model serves). None (absent): current, stalled, or
    refused (the refusal's condition says what to change), or stranded (Stalled says why)."""
    if step.at_stable or step.refusal is not None or step.stranded is not None:
        return None
    generation = dm.metadata.generation
    reason: str
    if step.queued:
        reason, doing = Reason.ROLLOUT_QUEUED, "waits for a rollout slot"
    elif step.replaced:
        reason, doing = (
            Reason.POLICY_MISMATCH,
            (
                "changed spec.rollout's policy (evaluation, gates, promotion): the run enforcing "
                "the old one is stopping (it removes its candidate first) and the revision is "
                "rolled out again under the new one; approve that run once it awaits promotion"
            ),
        )
    elif step.superseding is not None:
        reason, doing = Reason.SUPERSEDED, step.superseding
    elif step.temporal_down is not None:
        reason, doing = step.temporal_reason, "waits for Temporal"
    elif step.in_flight:
        reason, doing = str(phase or Phase.PENDING), f"is rolling out (phase {phase})"
    elif step.re_resolve_at is not None:
        reason, doing = Reason.MODEL_NOT_FOUND, "waits for its tag to be resolved again"
    else:
        return None
    return Cond(
        ConditionType.RECONCILING,
        ConditionStatus.TRUE,
        reason,
        f"generation {generation} {doing}; the stable revision serves meanwhile",
    )


def held_candidate_condition(
    reconciling: ConditionUpdate, candidate: HeldCandidate
) -> ConditionUpdate:
    """Reconciling says when the candidate awaiting approval is not fully model-ready (issue
    34: before, the DecisionModel said AwaitingPromotion and Ready while a replaced Pod never
    got its gate, and the approval rolled the candidate back). Pure."""
    if (
        reconciling.type != ConditionType.RECONCILING
        or reconciling.reason != Phase.AWAITING_PROMOTION  # Temporal away says so first
        or candidate.model_ready >= candidate.desired
    ):
        return reconciling
    return Cond(
        ConditionType.RECONCILING,
        ConditionStatus.TRUE,
        Reason.REPLICAS_NOT_MODEL_READY,
        candidate.message(),
    )


def _may_run(status: DecisionModelStatus) -> bool:
    """The run status.rollout names may still be going: a rollout phase, or a guard holding
    one of its steps."""
    return status.phase in ROLLOUT_PHASES or guard_shown(status.conditions)


def steady_phase(
    phase_now: str | None, step: RolloutStep, degraded: bool, failed: bool
) -> tuple[Phase | None, bool]:
    """The phase the stable's health calls for (None: the rollout's phase stands), and whether
    Ready/Degraded say the candidate was rejected. Pure.

    Steady phases follow the health. RolledBack/Failed stay until the spec changes (returning
    it to the stable is such a change), but health is never hidden by that history (issue 22):
    a stable that loses replicas shows Degraded, and RolledBack comes back once it is whole
    again. A refused spec has no candidate: only the stable is left to report on. A rollout
    phase left behind when the spec came back to the stable is ended here."""
    if step.in_flight:
        return None, phase_now == Phase.ROLLED_BACK and step.refusal is None and not degraded
    ended = phase_now in (Phase.ROLLED_BACK, Phase.FAILED)
    rejected = (
        step.refusal is None
        and not step.at_stable
        and failed
        and (ended or phase_now == Phase.DEGRADED)
    )
    if rejected:
        return (Phase.DEGRADED, False) if degraded else (Phase.ROLLED_BACK, True)
    steady = phase_now in (Phase.READY, Phase.DEGRADED, Phase.PENDING, None)
    abandoned = step.at_stable and phase_now in ROLLOUT_PHASES
    if steady or (step.at_stable and (ended or abandoned)) or step.refusal is not None:
        return (Phase.DEGRADED if degraded else Phase.READY), False
    return None, phase_now == Phase.ROLLED_BACK and step.refusal is None and not degraded


def _rejected(
    conditions: list[ConditionUpdate], status: DecisionModelStatus | None, serving: bool
) -> list[ConditionUpdate]:
    """RolledBack (seed 001): Ready says the stable serves, Degraded=True says why the
    candidate was rejected (its failure reason), until the spec changes."""
    failed = status.failed_revision if status else None
    reason = failed.reason if failed is not None and failed.reason else Reason.CANDIDATE_REJECTED
    why = f"candidate {failed.hash} rejected: {failed.message}" if failed else "candidate rejected"
    kept = [c for c in conditions if c.type not in (ConditionType.READY, ConditionType.DEGRADED)]
    return [
        *kept,
        Cond(
            ConditionType.READY,
            ConditionStatus.of(serving),
            Reason.CANDIDATE_REJECTED,
            "the candidate was rejected; the stable revision keeps serving",
        ),
        Cond(
            ConditionType.DEGRADED,
            ConditionStatus.TRUE,
            reason,
            f"{why}; the stable revision keeps serving",
        ),
    ]


def _no_stable(phase: str | None, status: DecisionModelStatus | None) -> list[ConditionUpdate]:
    """Ready=False before the first promotion (reference: NoStableRevision). A first rollout
    that failed puts its own reason on Ready and Degraded (seed 001's table: RegistryNotAllowed,
    DatasetInvalid, EvaluationFailed, ... land there, where alerts and scripts read them)."""
    failed = status.failed_revision if status else None
    if phase == Phase.FAILED and failed is not None and failed.reason:
        why = f"revision {failed.hash} failed and nothing serves: {failed.message}"
        return [
            Cond(ConditionType.READY, ConditionStatus.FALSE, failed.reason, why),
            Cond(ConditionType.DEGRADED, ConditionStatus.TRUE, failed.reason, why),
        ]
    where = f" (phase {phase})" if phase else ""
    return [
        Cond(
            ConditionType.READY,
            ConditionStatus.FALSE,
            Reason.NO_STABLE_REVISION,
            f"no revision has been promoted yet{where}; the Service serves once the first "
            "rollout promotes",
        )
    ]


__all__ = ["Decision", "Reconciler", "decide"]


def reconcile_attributes(namespace: str, name: str) -> dict[str, str]:
    """A reconcile's span, in OpenTelemetry's deployment and Kubernetes conventions."""
    return {"deployment.name": f"{namespace}/{name}", "k8s.namespace.name": namespace}

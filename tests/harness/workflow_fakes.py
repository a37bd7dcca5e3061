"""Same-name fake activities of RolloutWorkflow, and the inputs its tests start it with: the
workflow's decisions are tested against them on the dev server
(tests/integration/test_rollout_workflow_logic.py) and with Temporal's time-skipping test server
(tests/integration/test_workflow_timers.py)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError

from decisionmodel.rollout import contracts as c
from decisionmodel.rollout import step_status
from workflows.rollout import RolloutWorkflow

DIGEST = "a" * 64


@dataclass
class FakeCluster:
    """Records what the fake activities were asked to do, in order."""

    calls: list[str] = field(default_factory=list)
    statuses: list[c.StatusUpdate] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    fail: dict[str, ApplicationError] = field(default_factory=dict)
    evaluation_result: str = "Passed"
    block_prefetch: asyncio.Event | None = None
    block_promote: asyncio.Event | None = None
    dm_gone_after: str | None = None  # status writes fail DecisionModelGone once this ran
    # This step holds before it returns until `release_step` is set (`step_held` tells when).
    hold_step: str | None = None
    # Each delete_revision's keep_if_rolling_out, in order.
    kept_if_rolling_out: list[bool] = field(default_factory=list)
    step_held: asyncio.Event = field(default_factory=asyncio.Event)
    release_step: asyncio.Event = field(default_factory=asyncio.Event)
    # delete_revision and failure records fail (retryably) until this is set, when given.
    cleanup_down: asyncio.Event | None = None
    watch_held: bool = True  # the post-promotion watch's verdict
    watched_previous: str | None = None  # the revision the watch was told it could go back to
    promoted: list[str] = field(default_factory=list)  # the candidate of each promote call
    # Like ``fail``, for the next call of that step only.
    fail_once: dict[str, ApplicationError] = field(default_factory=dict)
    # check_candidate's answer: this many model-ready (None: all of the candidate's replicas).
    candidate_ready: int | None = None
    # The decision record an evaluation returns (with ``confidence``), when given.
    evaluation_decision: Any = None
    # Each signed decision record asked for: "<decision>:<revision>" (not among ``calls``).
    decisions: list[str] = field(default_factory=list)
    # write_decision_record fails (retryably, DecisionRecordUnwritten) until this is set.
    records_down: asyncio.Event | None = None
    record_attempts: int = 0
    # A status write entering this phase holds until `release_status` is set (`status_held`
    # tells when): the window in which queries already show the phase.
    hold_status_phase: c.Phase | None = None
    status_held: asyncio.Event = field(default_factory=asyncio.Event)
    release_status: asyncio.Event = field(default_factory=asyncio.Event)
    # check_evaluation_design's answer (with confidence set): a design that decides its gates.
    design: c.EvaluationDesign = field(
        default_factory=lambda: c.EvaluationDesign(checked=True, cases=500)
    )

    def activities(self) -> list[Any]:
        cluster = self

        @activity.defn(name=c.RESOLVE)
        async def resolve(inp: c.ResolveInput) -> c.ResolveResult:
            await cluster._enter(c.RESOLVE, inp.status)
            result = c.ResolveResult(
                record=c.RevisionRecord(
                    hash="r" + inp.revision.model[-3:], model=inp.revision.model, digest=DIGEST
                ),
                canonical=f"ollaya.dev/library/{inp.revision.model}",
                store_manifest_path="manifests/x",
                resolved_from_registry=True,
            )
            await cluster._report(c.RESOLVE, inp.status, step_status.resolved(inp.dm, result))
            return result

        @activity.defn(name=c.PREFETCH)
        async def prefetch(inp: c.RevisionObjectsInput) -> c.PrefetchResult:
            await cluster._enter(c.PREFETCH, inp.status)
            if cluster.block_prefetch is not None:
                while not cluster.block_prefetch.is_set():
                    activity.heartbeat()
                    await asyncio.sleep(0.1)
            await cluster._report(c.PREFETCH, inp.status, step_status.cached(inp.dm, inp.record))
            return c.PrefetchResult(job="j", pvc="p", attempts=1)

        @activity.defn(name=c.START)
        async def start(inp: c.RevisionObjectsInput) -> c.StartResult:
            await cluster._enter(c.START, inp.status)
            return c.StartResult(deployment="d")

        @activity.defn(name=c.WARMUP_INSPECT)
        async def warmup(inp: c.WarmupInput) -> c.WarmupResult:
            await cluster._enter(c.WARMUP_INSPECT, inp.status)
            result = c.WarmupResult(model_ready=inp.replicas, precision="F32")
            ready = step_status.model_ready(inp.dm, inp.record, result, inp.replicas)
            await cluster._report(c.WARMUP_INSPECT, inp.status, ready)
            return result

        @activity.defn(name=c.CHECK_EVALUATION_DESIGN)
        async def check_evaluation_design(inp: c.EvaluationDesignInput) -> c.EvaluationDesign:
            cluster._step(c.CHECK_EVALUATION_DESIGN)
            designed = step_status.designed(inp.dm, cluster.design)
            await cluster._report(c.CHECK_EVALUATION_DESIGN, inp.status, designed)
            return cluster.design

        @activity.defn(name=c.EVALUATE)
        async def evaluate(inp: c.EvaluateInput) -> c.EvaluationOutcome:
            await cluster._enter(c.EVALUATE, inp.status)
            outcome = cluster._evaluation()
            evaluated = step_status.evaluated(inp.dm, inp.policy, outcome)
            await cluster._report(c.EVALUATE, inp.status, evaluated)
            return outcome

        @activity.defn(name=c.PROMOTE)
        async def promote(inp: c.PromoteInput) -> c.PromoteResult:
            if inp.await_guards:  # the wait for a foreign Service to go (issue 34)
                cluster._step("promote:await_guards")
                return c.PromoteResult(previous=None)
            await cluster._enter(c.PROMOTE, inp.status)
            cluster.promoted.append(inp.candidate.hash)
            if cluster.block_promote is not None:
                while not cluster.block_promote.is_set():
                    activity.heartbeat()
                    await asyncio.sleep(0.1)
            promoted = step_status.promoted(inp.dm, inp.candidate)
            await cluster._report(c.PROMOTE, inp.status, promoted)
            return c.PromoteResult(previous=inp.stable.hash if inp.stable else None)

        @activity.defn(name=c.CHECK_CANDIDATE)
        async def check_candidate(inp: c.PromoteInput) -> c.CandidateReadiness:
            # Not among ``calls``: the sequences the tests assert are the steps'.
            if c.CHECK_CANDIDATE in cluster.fail:
                raise cluster.fail[c.CHECK_CANDIDATE]
            ready = inp.replicas if cluster.candidate_ready is None else cluster.candidate_ready
            missing = [f"pod-{i}: starting" for i in range(ready, inp.replicas)]
            return c.CandidateReadiness(ready=ready, desired=inp.replicas, not_ready=missing)

        @activity.defn(name=c.WATCH_PROMOTED)
        async def watch_promoted(inp: c.WatchPromotedInput) -> c.WatchPromotedResult:
            cluster._step(c.WATCH_PROMOTED)
            cluster.watched_previous = inp.previous.hash if inp.previous else None
            if cluster.watch_held:
                return c.WatchPromotedResult(held=True, checks=3)
            return c.WatchPromotedResult(held=False, checks=2, message="gate failed twice")

        @activity.defn(name=c.DELETE_REVISION)
        async def delete_revision(inp: c.DeleteRevisionInput) -> c.DeleteRevisionResult:
            if cluster.cleanup_down is not None and not cluster.cleanup_down.is_set():
                raise ApplicationError("the API server did not answer", type="APIServerUnavailable")
            cluster.calls.append(f"delete:{inp.revision}")
            cluster.deleted.append(inp.revision)
            cluster.kept_if_rolling_out.append(inp.keep_if_rolling_out)
            return c.DeleteRevisionResult(deleted=[inp.revision])

        @activity.defn(name=c.RECORD_STATUS)
        async def record_status(update: c.StatusUpdate) -> None:
            if update.phase is not None and update.phase == cluster.hold_status_phase:
                cluster.status_held.set()
                await cluster.release_status.wait()
            await cluster._write(update)

        @activity.defn(name=c.WRITE_DECISION_RECORD)
        async def write_decision_record(inp: c.DecisionRecordInput) -> c.DecisionRecordResult:
            cluster.record_attempts += 1
            if cluster.records_down is not None and not cluster.records_down.is_set():
                raise ApplicationError(
                    "the signing key Secret is missing", type="DecisionRecordUnwritten"
                )
            cluster.decisions.append(f"{inp.decision}:{inp.candidate.hash}")
            return c.DecisionRecordResult(written=True, sequence=len(cluster.decisions))

        return [
            resolve,
            prefetch,
            start,
            warmup,
            evaluate,
            check_evaluation_design,
            promote,
            check_candidate,
            watch_promoted,
            delete_revision,
            record_status,
            write_decision_record,
        ]

    def _evaluation(self) -> c.EvaluationOutcome:
        passed = self.evaluation_result == "Passed"
        unsure = self.evaluation_result == "Inconclusive"
        return c.EvaluationOutcome(
            result="Passed" if passed else "Inconclusive" if unsure else "Failed",
            reason="EvaluationPassed"
            if passed
            else "EvaluationInconclusive"
            if unsure
            else "EvaluationFailed",
            message="accuracy 0.9000 >= minAccuracy 0.80"
            if passed
            else "accuracy 0.5000 < minAccuracy 0.80",
            accuracy="0.9000" if passed else "0.5000",
            ece="0.0500",
            brier="0.0800",
            cases=10,
            failed_cases=0,
            dataset_digest="d" * 64,
            decision=self.evaluation_decision,
        )

    async def _write(self, update: c.StatusUpdate) -> None:
        """What the status writer does: here, record the update (or fail as told)."""
        if self.dm_gone_after is not None and self.dm_gone_after in self.calls:
            raise ApplicationError(
                "DecisionModel ns/x is gone", type="DecisionModelGone", non_retryable=True
            )
        down = self.cleanup_down is not None and not self.cleanup_down.is_set()
        if down and update.failed is not None:
            raise ApplicationError("the API server did not answer", type="APIServerUnavailable")
        self.statuses.append(update)
        if update.failed is not None:
            self.calls.append("record-failure")

    async def _enter(self, name: str, status: c.StepStatus | None) -> None:
        """A step begins: the phase it was given to write (activities.step_status), then it."""
        if status is not None and status.enter is not None:
            await self._write(status.enter)
        self._step(name)

    async def _report(self, name: str, status: c.StepStatus | None, update: c.StatusUpdate) -> None:
        """A step ends: its outcome, when asked to write it; then a hold, if one is set."""
        if status is not None and status.report:
            await self._write(update)
        if name == self.hold_step:
            self.step_held.set()
            await self.release_step.wait()

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]
        if name in self.fail_once:
            raise self.fail_once.pop(name)

    def phases(self) -> list[str]:
        return [s.phase.value for s in self.statuses if s.phase is not None]


def make_input(
    model: str = "laya:en",
    stable: bool = False,
    evaluation: bool = False,
    promotion: str = "Automatic",
    cleanup_round_seconds: int = 600,
    watch_seconds: int | None = None,
    records: bool = False,
) -> c.RolloutInput:
    return c.RolloutInput(
        dm=c.DMRef(namespace="ns", name=f"dm-{uuid.uuid4().hex[:6]}", uid="uid-1", generation=2),
        requested_revision="u" + uuid.uuid4().hex[:15],
        revision=c.RevisionSpec(model=model),
        evaluation=c.EvaluationPolicy(
            dataset=c.KeyRef(kind="ConfigMap", name="golden", key="cases.jsonl"),
            min_accuracy="0.80",
        )
        if evaluation
        else None,
        promotion=promotion,  # type: ignore[arg-type]
        stable=c.RevisionRecord(hash="stable0000000000", model="laya:old", digest="b" * 64)
        if stable
        else None,
        tuning=c.RolloutTuning(
            promotion_grace_seconds=1,
            heartbeat_timeout_seconds=5,
            cleanup_round_seconds=cleanup_round_seconds,
            cleanup_pause_seconds=1,
        ),
        post_promotion_watch_seconds=watch_seconds,
        decision_records=records,
    )


async def start(
    client: Client, queue: str, inp: c.RolloutInput
) -> WorkflowHandle[Any, c.RolloutOutcome]:
    return await client.start_workflow(
        RolloutWorkflow.run,
        inp,
        id=c.workflow_id(inp.dm, inp.requested_revision),
        task_queue=queue,
        result_type=c.RolloutOutcome,
    )


async def wait_phase(
    handle: WorkflowHandle[Any, Any], phase: c.Phase, timeout: float = 20
) -> c.RolloutProgress:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        p = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
        if p.phase == phase:
            return p
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"phase {p.phase} not {phase}")
        await asyncio.sleep(0.1)

"""What each rollout step records when it ends: its condition, its Event, its status fields.

One construction for both writers: the step activity itself (a rollout carrying
``StepStatus.report``, issue 14) and the workflow's ``record_status`` (rollouts started before
that change, replaying the old way). Pure, so both write the same words.
"""

from __future__ import annotations

from decisionmodel.engine.render.labels import store_pvc_name
from decisionmodel.rollout.contracts import (
    ConditionUpdate,
    DMRef,
    EvaluationDesign,
    EvaluationOutcome,
    EvaluationPolicy,
    ResolveResult,
    RevisionRecord,
    StatusUpdate,
    WarmupResult,
)
from decisionmodel.vocabulary import (
    ConditionStatus,
    ConditionType,
    EvaluationResult,
    EventReason,
    Reason,
)


def designed(dm: DMRef, design: EvaluationDesign) -> StatusUpdate:
    """check_evaluation_design: status.evaluationDesign; a golden set too small to decide a
    gate with 80 % power says so at once (Evaluated=Unknown, a Warning Event): the rollout
    goes on, and the evaluation's own verdict replaces the condition when it runs."""
    if not design.underpowered:
        return StatusUpdate(dm=dm, evaluation_design=design)
    return StatusUpdate(
        dm=dm,
        evaluation_design=design,
        conditions=[
            ConditionUpdate(
                type=ConditionType.EVALUATED,
                status=ConditionStatus.UNKNOWN,
                reason=Reason.EVALUATION_UNDERPOWERED,
                message=design.message,
            )
        ],
        event_reason=EventReason.EVALUATION_UNDERPOWERED,
        event_message=design.message,
        event_type="Warning",
    )


def resolved(dm: DMRef, result: ResolveResult) -> StatusUpdate:
    """resolve: the candidate, Resolved=True, an earlier failure cleared."""
    record = result.record
    return StatusUpdate(
        dm=dm,
        candidate=record,
        clear_failed=True,
        conditions=[
            ConditionUpdate(
                type=ConditionType.RESOLVED,
                status=ConditionStatus.TRUE,
                reason=Reason.DIGEST_RESOLVED,
                message=f"{result.canonical} resolved to digest {record.digest}",
            )
        ],
        event_reason=EventReason.RESOLVED,
        event_message=f"{result.canonical} → revision {record.hash} (digest {record.digest[:12]})",
    )


def cached(dm: DMRef, record: RevisionRecord) -> StatusUpdate:
    """prefetch: Cached=True, the store holds the digest."""
    return StatusUpdate(
        dm=dm,
        conditions=[
            ConditionUpdate(
                type=ConditionType.CACHED,
                status=ConditionStatus.TRUE,
                reason=Reason.PREFETCHED,
                message=(
                    f"store {store_pvc_name(dm.name, record.hash)} holds digest {record.digest}"
                ),
            )
        ],
        event_reason=EventReason.CACHED,
        event_message=f"weights of revision {record.hash} cached and verified",
    )


def warmed(record: RevisionRecord, result: WarmupResult) -> RevisionRecord:
    """The candidate with the precision its Pods report (unchanged when they report none)."""
    if not result.precision:
        return record
    return record.model_copy(update={"precision": result.precision})


def model_ready(
    dm: DMRef, record: RevisionRecord, result: WarmupResult, replicas: int
) -> StatusUpdate:
    """warmup_inspect: the candidate as warm-up saw it, and the ModelReady Event."""
    record = warmed(record, result)
    return StatusUpdate(
        dm=dm,
        candidate=record,
        event_reason=EventReason.MODEL_READY,
        event_message=f"{result.model_ready}/{replicas} Pods of {record.hash} model-ready",
    )


def evaluated(dm: DMRef, policy: EvaluationPolicy, outcome: EvaluationOutcome) -> StatusUpdate:
    """evaluate: the figures and the gates they were held to, Evaluated, and an Event."""
    passed = outcome.result == EvaluationResult.PASSED
    return StatusUpdate(
        dm=dm,
        evaluation=outcome,
        evaluation_gates=policy.gates(),
        conditions=[
            ConditionUpdate(
                type=ConditionType.EVALUATED,
                status=ConditionStatus.of(passed),
                reason=outcome.reason,
                message=outcome.message,
            )
        ],
        event_reason=EventReason.EVALUATED,
        event_message=_evaluated_event(outcome),
        event_type="Normal" if passed else "Warning",
    )


def _evaluated_event(outcome: EvaluationOutcome) -> str:
    test = outcome.decision.sequential if outcome.decision is not None else None
    if test is not None and outcome.cases == 0:
        return (
            f"{outcome.result}: no case new to the sequential test, accuracy {outcome.accuracy} "
            f"over the {test.cases} it counted before"
        )
    return (
        f"{outcome.result}: accuracy {outcome.accuracy}, ECE {outcome.ece} on {outcome.cases} cases"
    )


def promoted(dm: DMRef, record: RevisionRecord) -> StatusUpdate:
    """promote: the Event once the Service selects the candidate (status is promote's own)."""
    return StatusUpdate(
        dm=dm,
        event_reason=EventReason.PROMOTED,
        event_message=f"Service {dm.name} now selects revision {record.hash}",
    )

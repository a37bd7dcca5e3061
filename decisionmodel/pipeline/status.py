"""The hub's DecisionModelPipeline status from a pipeline run's record (issue 25). Pure."""

from __future__ import annotations

from typing import Any

from decisionmodel.api.pipeline import DecisionModelPipelineSpec
from decisionmodel.api.pipeline_status import (
    FreightStatus,
    StageStatus,
)
from decisionmodel.pipeline.contracts import PipelineRecord
from decisionmodel.pipeline.stages import ENDED
from decisionmodel.vocabulary import (
    ConditionStatus,
    PipelineCondition,
    PipelinePhase,
    PipelineReason,
    StageState,
)


def run_phase(record: PipelineRecord) -> PipelinePhase:
    states = [p.state for p in record.stages.values()]
    if record.message.startswith("aborted"):
        return (
            PipelinePhase.ABORTED if all(s in ENDED for s in states) else PipelinePhase.PROGRESSING
        )
    problem = record.freight_problem
    if any(s == StageState.FAILED for s in states) or (problem is not None and problem.final):
        return PipelinePhase.FAILED
    if states and all(s == StageState.PROMOTED for s in states):
        return PipelinePhase.SUCCEEDED
    if any(s == StageState.AWAITING_APPROVAL for s in states):
        return PipelinePhase.AWAITING_APPROVAL
    return PipelinePhase.PROGRESSING


def summary(record: PipelineRecord, spec: DecisionModelPipelineSpec | None = None) -> str:
    """``staging=Promoted prod-eu=AwaitingApproval``: the STAGES column, in spec order."""
    names = [s.name for s in spec.stages] if spec else list(record.stages)
    return " ".join(f"{n}={record.stages[n].state}" for n in names if n in record.stages)[:1024]


def run_status(record: PipelineRecord) -> dict[str, Any]:
    """The fields the pipeline run owns (phase, freight, stages, summary), wire form."""
    stages = [
        StageStatus(
            name=name,
            cluster=record.clusters.get(name),
            state=p.state,
            reason=p.reason or None,
            message=p.message[:1024] or None,
            rollout_workflow_id=p.rollout_workflow_id,
            since=p.since,
        ).to_wire()
        for name, p in record.stages.items()
    ]
    freight = record.freight
    out: dict[str, Any] = {
        "phase": run_phase(record).value,
        "summary": summary(record),
        "stages": stages,
    }
    if record.workflow_id:
        out["runWorkflowId"] = record.workflow_id
    if freight is not None:
        out["freight"] = FreightStatus(model=freight.model, digest=freight.digest).to_wire()
    out["conditions"] = [freight_condition(record)]
    return out


def freight_condition(record: PipelineRecord) -> dict[str, Any]:
    """``FreightPinned``, the run's own condition (the controller owns the others): True once
    the tag resolved, False with the resolve's reason and the fix while it fails, Unknown
    while the first resolve has not answered."""
    freight, problem = record.freight, record.freight_problem
    if freight is not None:
        status, reason = ConditionStatus.TRUE, str(PipelineReason.PINNED)
        message, since = f"{freight.model} pinned to sha256:{freight.digest}", record.pinned_at
    elif problem is not None:
        status, reason, message, since = (
            ConditionStatus.FALSE,
            problem.reason,
            problem.message,
            problem.since,
        )
    else:
        status, reason = ConditionStatus.UNKNOWN, str(PipelineReason.RESOLVING)
        message, since = "resolving the template's tag once for every stage", None
    condition: dict[str, Any] = {
        "type": PipelineCondition.FREIGHT_PINNED.value,
        "status": status.value,
        "reason": reason,
        "message": message[:1024],
    }
    if since is not None:
        condition["lastTransitionTime"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    return condition

"""The `DecisionModelPipeline` status (issue 25): the run in flight and each stage's state.

Two writers, each its own fields (server-side apply, distinct managers): the pipeline
controller writes ``observedGeneration``, ``revision``, ``workflowId`` and ``conditions``
(Accepted: the spec is a pipeline and every stage's cluster has a worker); the pipeline
workflow's activity writes ``phase``, ``freight``, ``stages`` and ``summary``.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from decisionmodel.api.spec import WireModel
from decisionmodel.api.status import Condition
from decisionmodel.vocabulary import PipelinePhase, StageState


class FreightStatus(WireModel):
    model: str = Field(max_length=512, description="The template's model name:tag.")
    digest: str = Field(max_length=128, description="The digest every stage rolls out.")


class StageStatus(WireModel):
    name: str = Field(max_length=63, description="The stage.")
    cluster: str | None = Field(default=None, max_length=63, description="Its cluster.")
    state: StageState = Field(description="Where the stage is.")
    reason: str | None = Field(default=None, max_length=128, description="Why, in one word.")
    message: str | None = Field(default=None, max_length=1024, description="Why, and the fix.")
    rollout_workflow_id: str | None = Field(
        default=None, max_length=1024, description="The cluster's RolloutWorkflow."
    )
    since: datetime | None = Field(default=None, description="When it entered this state.")


class DecisionModelPipelineStatus(WireModel):
    observed_generation: int | None = Field(default=None, ge=0, description="Spec generation.")
    revision: str | None = Field(default=None, max_length=64, description="Revision in flight.")
    workflow_id: str | None = Field(
        default=None, max_length=1024, description="Its PipelineWorkflow (the audit trail)."
    )
    last_retry_token: str | None = Field(
        default=None,
        max_length=256,
        description="Last consumed value of the decisionmodel.io/retry annotation.",
    )
    run_workflow_id: str | None = Field(
        default=None,
        max_length=1024,
        description="The run phase, stages and summary are from (the last to record them).",
    )
    phase: PipelinePhase | None = Field(default=None, description="The run's phase.")
    freight: FreightStatus | None = Field(default=None, description="Pinned once per run.")
    summary: str | None = Field(
        default=None, max_length=1024, description="stage=state, for kubectl get dmp."
    )
    stages: list[StageStatus] = Field(
        default_factory=list,
        max_length=32,
        description="Each stage's state.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=8,
        description="Accepted.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )

"""What the pipeline workflow, the stage workflow and their activities exchange (issue 25).

As with the rollout's contracts, everything here enters Temporal history: references only (the
template is a DecisionModel spec, which names Secrets and ConfigMaps, never their values).
Fields may be added with defaults; never renamed or removed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.api.pipeline import DecisionModelPipelineSpec
from decisionmodel.pipeline.stages import StageProgress
from decisionmodel.vocabulary import StageState

# Activity names (workflows/ schedules by name, never importing activities/).
RESOLVE_FREIGHT = "pipeline_resolve_freight"
RECORD_PIPELINE = "pipeline_record_status"
APPLY_STAGE = "pipeline_apply_stage"
AWAIT_STAGE_ROLLOUT = "pipeline_await_stage_rollout"
AWAIT_STAGE_VERDICT = "pipeline_await_stage_verdict"
ABORT_STAGE_ROLLOUT = "pipeline_abort_stage_rollout"
CHECK_STAGE = "pipeline_check_stage"

HUB_TASK_QUEUE: Final = "dmrollout-pipelines"
PIPELINE_WORKFLOW_ID_PREFIX: Final = "pipeline"


class Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class PipelineRef(Contract):
    """The DecisionModelPipeline on the hub; the UID guards against a re-created namesake."""

    namespace: str
    name: str
    uid: str = ""
    generation: int = 0


class Freight(Contract):
    """What every stage rolls out: the model and the digest it resolved to, once."""

    model: str
    digest: str
    resolved_from_registry: bool = True


class PipelineInput(Contract):
    pipeline: PipelineRef
    revision: str  # the pipeline revision (hash of the template and the stages)
    spec: DecisionModelPipelineSpec
    # A retry (decisionmodel.io/retry on the pipeline) of the failed run ``retry_of``: the
    # freight it already pinned (never resolved again: its stages verified those bytes) and
    # the stages it promoted, with when (kept: not rolled out again, soaks count from then).
    retry_of: str = ""
    freight: Freight | None = None
    promoted: dict[str, datetime] = Field(default_factory=dict)

    @property
    def model_name(self) -> str:
        return self.spec.template.name or self.pipeline.name


class FreightProblem(Contract):
    """Why the run has no freight yet (a resolve that failed or did not answer), and whether
    it gave up (``final``: the run ends Failed, its stages never start)."""

    reason: str
    message: str
    final: bool = False
    since: datetime | None = None


class ResolveFreightInput(Contract):
    pipeline: PipelineRef
    model: str


class Approval(Contract):
    """A person's go for one Manual stage, bound to the freight it saw, the run (``run_id``,
    its workflow ID: a retry is another run) and the upstream verdicts it approved
    (``upstream``: dependency -> ``verdict_token``). Either left empty is bound to what the
    run shows when it accepts the approval; given, it must match it. The run records the
    verdicts; one that changes before the stage starts invalidates the approval."""

    stage: str
    digest: str
    by: str = ""
    run_id: str = ""
    upstream: dict[str, str] = Field(default_factory=dict)


class PipelineRecord(Contract):
    """The pipeline's state as the hub's DecisionModelPipeline status shows it."""

    pipeline: PipelineRef
    revision: str
    freight: Freight | None = None
    stages: dict[str, StageProgress] = Field(default_factory=dict)
    clusters: dict[str, str] = Field(default_factory=dict)  # stage -> cluster
    message: str = ""
    freight_problem: FreightProblem | None = None
    pinned_at: datetime | None = None
    # The run this record is from: the controller trusts the phase only for the run it names
    # (a run's record lands after the controller switched to the next run; "" before).
    workflow_id: str = ""


class StageInput(Contract):
    """The work of one stage, done by its cluster's worker."""

    pipeline: PipelineRef
    pipeline_revision: str
    stage: str
    namespace: str
    name: str  # the DecisionModel's name
    spec: dict[str, Any]  # the template's DecisionModel spec, wire form, digest pinned


class AppliedStage(Contract):
    namespace: str
    name: str
    uid: str
    generation: int
    digest: str = ""  # the pinned freight: "nothing to roll out" only when it already serves


class StageVerdict(Contract):
    state: StageState  # Promoted, Failed or Aborted
    reason: str = ""
    message: str = ""
    rollout_workflow_id: str | None = None
    revision: str | None = None  # the DecisionModel revision the cluster rolled out
    decided_at: datetime | None = None
    # The Temporal namespace of the cluster's rollouts, for the links to its history.
    rollout_namespace: str | None = None


class AbortStageRollout(Contract):
    workflow_id: str
    run_id: str = ""
    reason: str


class StageRollout(Contract):
    """The cluster's rollout of the applied generation (its RolloutWorkflow run), or the
    verdict reached without one (``settled``: nothing to roll out, or the spec refused)."""

    workflow_id: str = ""
    run_id: str = ""
    settled: StageVerdict | None = None
    temporal_namespace: str = ""  # where the rollout runs (the cluster's own namespace)


class StageHealthInput(Contract):
    """A promoted stage's DecisionModel, and the freight it must keep serving."""

    namespace: str
    name: str
    digest: str


class StageHealth(Contract):
    """Whether a promoted stage still serves the freight, healthy; why not (its reason)."""

    serving: bool
    reason: str = ""
    message: str = ""

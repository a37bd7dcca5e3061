"""The `DecisionModel` status as pydantic models.

Rollout fields (revisions, evaluation, phase during a rollout) are written by the workflow's
activities, steady-state fields (replicas, Degraded, observedGeneration) by the controller; the
models only describe the shape. Decimals are strings with 4 places ("0.9400"), as the reference
writes them, so a status diff never shows float noise.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import Field

from decisionmodel.api.spec import DIGEST_PATTERN, SchedulingSpec, WireModel
from decisionmodel.vocabulary import ConditionStatus, Device, Engine
from decisionmodel.vocabulary import EvaluationResult as EvaluationResult
from decisionmodel.vocabulary import Phase as Phase

# metav1.Condition's own validation, copied so conditions written here pass the same checks.
CONDITION_TYPE_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# Status decimals: what the evaluation writes (4 places), in [0, 1] for every reported metric.
STATUS_DECIMAL_PATTERN: Final = r"^[0-9]+(\.[0-9]+)?$"


class Condition(WireModel):
    """A metav1.Condition."""

    type: str = Field(
        max_length=316,
        pattern=CONDITION_TYPE_PATTERN,
        description="Condition type, e.g. Ready (see docs for the list).",
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was computed for."
    )
    last_transition_time: datetime | None = Field(
        default=None,
        description="When status last changed; kept when only reason or message change.",
    )
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=CONDITION_REASON_PATTERN,
        description="CamelCase reason, one of the documented reason constants.",
    )
    message: str = Field(default="", max_length=32768, description="Human-readable detail.")


class RevisionStatus(WireModel):
    """The recorded identity of a revision; the stable one is rendered from it, not the spec."""

    hash: str = Field(
        min_length=1, max_length=64, description="Revision hash (16 hex) of the identity below."
    )
    engine: Engine | None = Field(default=None, description="Engine of the revision.")
    model: str | None = Field(default=None, max_length=512, description="Model name:tag.")
    digest: str | None = Field(
        default=None, pattern=DIGEST_PATTERN, description="Resolved sha256 manifest digest."
    )
    device: Device | None = Field(default=None, description="Device class.")
    image: str | None = Field(default=None, max_length=512, description="Runtime image run.")
    runtime_version: str | None = Field(
        default=None, max_length=64, description="Runtime release of the image."
    )
    resources: dict[str, Any] | None = Field(
        default=None, description="Container resources the revision was rendered with."
    )
    precision: str | None = Field(
        default=None, max_length=64, description="Weight precision reported by /api/ps."
    )
    placement: str | None = Field(
        default=None,
        max_length=64,
        description="Hash of the scheduling constraints; unset when there were none.",
    )
    scheduling: SchedulingSpec | None = Field(
        default=None,
        description="The scheduling constraints the revision's Pods run with, recorded so the "
        "stable keeps its placement when it is restored after spec.scheduling changed.",
    )


class FailedRevisionStatus(RevisionStatus):
    """A revision that failed; not retried until the spec changes or the retry token does."""

    reason: str | None = Field(
        default=None, max_length=1024, description="Reason constant of the failure."
    )
    message: str | None = Field(
        default=None, max_length=32768, description="What failed, for a human."
    )
    failed_at: datetime | None = Field(default=None, description="When the failure was recorded.")


class ReResolveStatus(WireModel):
    """The re-resolve backoff of a revision that failed with ModelNotFound (the controller's
    field): kept on the DecisionModel so a restarted controller or a new leader goes on with
    it instead of starting it again."""

    hash: str = Field(
        min_length=1, max_length=64, description="The failed revision the attempts are for."
    )
    attempts: int = Field(default=0, ge=0, description="Re-resolves started for it so far.")
    last_attempt_time: datetime = Field(description="When the last of them was started.")


class ReplicasStatus(WireModel):
    """Replica counts of the stable revision."""

    desired: int = Field(default=0, ge=0, description="spec.replicas applied to the stable.")
    model_ready: int = Field(
        default=0,
        ge=0,
        description="Pods with the model-ready gate and PodReady both True.",
    )


class EvaluationGates(WireModel):
    """The gates the evaluation was judged against, echoed from the spec."""

    min_accuracy: str | None = Field(default=None, max_length=16, description="minAccuracy.")
    max_accuracy_drop: str | None = Field(
        default=None, max_length=16, description="maxAccuracyDrop."
    )
    max_ece: str | None = Field(default=None, alias="maxECE", max_length=16, description="maxECE.")
    max_ece_increase: str | None = Field(
        default=None, alias="maxECEIncrease", max_length=16, description="maxECEIncrease."
    )
    max_cases: int | None = Field(default=None, ge=1, description="maxCases.")
    max_negative_flip_rate: str | None = Field(
        default=None, max_length=16, description="maxNegativeFlipRate."
    )


def _decimal_field(description: str) -> Any:
    return Field(
        default=None, pattern=STATUS_DECIMAL_PATTERN, max_length=16, description=description
    )


class ReliabilityBinStatus(WireModel):
    """One equal-width confidence bin of the reliability diagram (counts and a sum only)."""

    count: int = Field(default=0, ge=0, description="Answer pairs whose confidence is in the bin.")
    correct: int = Field(default=0, ge=0, description="Of those, the calibration-correct ones.")
    confidence_sum: str | None = _decimal_field("Sum of the pairs' confidences (4 places).")


class ConfusionCellStatus(WireModel):
    """Pairs expected in one class and answered in another, for one question type. Classes are
    named from the runtime's answer vocabulary (true/false, level N) or, for choice labels
    (dataset content), by their position in the criteria (option N, option 7+); none is a
    missing or unusable answer."""

    kind: Literal["choice", "noul", "score"] = Field(description="Question type.")
    expected: str = Field(max_length=16, description="Expected class.")
    predicted: str = Field(max_length=16, description="Answered class.")
    count: int = Field(ge=0, description="Answer pairs in this cell.")


SIGNED_DECIMAL_PATTERN: Final = r"^-?[0-9]\.[0-9]{4}$"


def _signed_field(description: str) -> Any:
    return Field(pattern=SIGNED_DECIMAL_PATTERN, max_length=8, description=description)


class FigureIntervalStatus(WireModel):
    """One figure with its interval at the decision's confidence (4 places; a difference,
    candidate - stable, may be negative)."""

    figure: str = Field(max_length=112, description="What is estimated, e.g. accuracy drop.")
    estimate: str = _signed_field("The estimate on the evaluated cases.")
    lower: str = _signed_field("Lower bound of the interval.")
    upper: str = _signed_field("Upper bound of the interval.")
    # Not "n": YAML 1.1 reads a bare n as false, and the CRD lists required names unquoted.
    cases: int = Field(ge=0, description="Cases the figure is computed from.")
    method: str = Field(max_length=64, description="How the interval is computed.")


class GateDecisionStatus(WireModel):
    """One gate's evidence and verdict."""

    gate: str = Field(
        max_length=96,
        description="The gate as spec.rollout.evaluation names it (slices[<name>].<gate>).",
    )
    interval: FigureIntervalStatus = Field(description="The figure the gate judged.")
    threshold: str = Field(max_length=16, description="The gate's threshold as written.")
    side: Literal["min", "max"] = Field(description="min: a floor; max: a ceiling.")
    verdict: EvaluationResult = Field(description="Passed, Failed or Inconclusive.")
    more_cases: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Inconclusive: about how many more cases would decide it at this confidence half "
            "the time, if the true figure is the estimate."
        ),
    )
    more_cases_80: int | None = Field(
        default=None,
        ge=0,
        description="Inconclusive: as moreCases, for a decision 80 % of the time.",
    )
    sequential: bool | None = Field(
        default=None, description="Judged by the sequential test (status.evaluationLedger)."
    )


class BettorsStatus(WireModel):
    """A sequential test's two bettors: their wealth, and the exact state it continues from."""

    pass_evidence: str = Field(max_length=32, description="The pass bettor's wealth.")
    fail_evidence: str = Field(max_length=32, description="The fail bettor's wealth.")
    total: str = Field(max_length=32, description="Sum of the per-case outcome (state).")
    squares: str = Field(max_length=32, description="Sum of its squares (state).")
    pass_log_wealth: str = Field(max_length=32, description="Log wealth, pass bettor (state).")
    fail_log_wealth: str = Field(max_length=32, description="Log wealth, fail bettor (state).")


class LedgerGateStatus(BettorsStatus):
    """A gate besides minAccuracy within a revision's sequential test (paired, a slice's)."""

    gate: str = Field(
        max_length=96,
        description="maxAccuracyDrop, maxNegativeFlipRate, or a slice's: slices[x].minAccuracy.",
    )
    threshold: str = Field(max_length=16, description="The gate's threshold as written.")
    cases: int = Field(ge=0, description="Cases this gate's test counted.")
    verdict: EvaluationResult = Field(description="Passed, Failed or Inconclusive.")
    restarted: str | None = Field(
        default=None, max_length=200, description="Why its earlier test was not continued."
    )
    comparisons: int | None = Field(
        default=None, ge=1, description="A slice's gate: the comparisons its error is shared by."
    )


class LedgerEceStatus(WireModel):
    """An ECE gate's test within a revision's sequential test."""

    gate: str = Field(max_length=32, description="maxECE or maxECEIncrease.")
    threshold: str = Field(max_length=16, description="The gate's threshold as written.")
    cases: int = Field(ge=0, description="Cases this gate's test counted.")
    verdict: EvaluationResult = Field(description="Passed, Failed or Inconclusive.")
    lower: str = Field(max_length=16, description="Its always-valid lower bound.")
    upper: str = Field(max_length=16, description="Its always-valid upper bound.")
    restarted: str | None = Field(
        default=None, max_length=200, description="Why its earlier test was not continued."
    )
    state: str = Field(
        max_length=4000, description="The sums the next evaluation continues from (JSON)."
    )


class LedgerEntryStatus(BettorsStatus):
    """One revision's sequential test (spec.rollout.evaluation.sequential): what it counted,
    where its evidence stands, and the state the next evaluation continues from."""

    revision: str = Field(max_length=64, description="Hash of the candidate revision tested.")
    threshold: str = Field(max_length=16, description="minAccuracy the test judges.")
    confidence: str = Field(
        max_length=16, description="The strictest confidence the test was judged at."
    )
    dataset_prefix: str = Field(
        max_length=64,
        description="Digest of the dataset's first `cases` cases: the lineage a later "
        "evaluation continues on.",
    )
    cases: int = Field(ge=0, description="Cases counted in all evaluations of this test.")
    this_evaluation: int = Field(ge=0, description="Of which in the latest evaluation.")
    dataset_cases: int = Field(ge=0, description="Cases the dataset held at the latest one.")
    evaluations: int = Field(ge=1, description="Evaluations this test has run.")
    verdict: EvaluationResult = Field(description="Passed, Failed or Inconclusive.")
    needed: str = Field(max_length=32, description="Wealth that decides: 2 / (1 - confidence).")
    restarted: str | None = Field(
        default=None, max_length=200, description="Why an earlier test was not continued."
    )
    accuracy_cases: int | None = Field(
        default=None, ge=0, description="minAccuracy's own count, when it decided earlier."
    )
    gates: list[LedgerGateStatus] = Field(
        default_factory=list,
        max_length=64,
        description="The other gates: compared with the stable, and the slices'.",
    )
    baseline: str | None = Field(
        default=None, max_length=64, description="Hash of the stable revision compared with."
    )
    ece: list[LedgerEceStatus] = Field(
        default_factory=list, max_length=2, description="The ECE gates' tests."
    )


class GateDesignStatus(WireModel):
    """One gate against the golden set's size (issue 35 item 6)."""

    gate: str = Field(max_length=80, description="The spec field: minAccuracy, slices[x]....")
    threshold: str = Field(max_length=16, description="The gate's threshold as written.")
    design: str = Field(
        max_length=40, description="The candidate the power is for, one margin better."
    )
    cases: int = Field(ge=0, description="Cases the evaluation reads for this gate.")
    can_pass: bool = Field(description="Whether any outcome of that many cases passes it.")
    can_fail: bool = Field(description="Whether any outcome of that many cases fails it.")
    power: float | None = Field(
        default=None, description="The chance it passes the design candidate (unset: unknown)."
    )
    cases_for_power: int | None = Field(
        default=None, description="About the cases that give 80 % power (unset: over 5,000)."
    )
    expected_cases: int | None = Field(
        default=None, description="Sequential: mean cases to a verdict at the design candidate."
    )


class EvaluationDesignStatus(WireModel):
    """What the golden set can decide, checked when the rollout starts."""

    checked: bool = Field(description="False: the dataset could not be read at the start.")
    cases: int = Field(ge=0, description="Cases the evaluation will read.")
    gates: list[GateDesignStatus] = Field(
        default_factory=list, max_length=64, description="Each interval-judged gate."
    )
    message: str = Field(default="", max_length=1000, description="The same, in words.")


class EvaluationDecisionStatus(WireModel):
    """The decision record of an evaluation with spec.rollout.evaluation.confidence."""

    confidence: str = Field(max_length=16, description="The confidence of every interval.")
    result: EvaluationResult = Field(description="Passed, Failed or Inconclusive.")
    gates: list[GateDecisionStatus] = Field(max_length=64, description="Each gate set.")
    figures: list[FigureIntervalStatus] = Field(
        default_factory=list, max_length=64, description="Every figure's interval."
    )
    dataset_digest: str = Field(max_length=64, description="sha256 of the dataset evaluated.")
    evidence: str = Field(
        max_length=64,
        description="Digest of this record; an approval of a held candidate names it.",
    )
    sequential: LedgerEntryStatus | None = Field(
        default=None, description="With sequential: the test this evaluation continued."
    )


class EvaluationStatus(WireModel):
    """Result of the latest evaluation (decimals as strings with 4 places)."""

    revision: str | None = Field(
        default=None, max_length=64, description="Hash of the evaluated candidate revision."
    )
    accuracy: str | None = _decimal_field("Candidate accuracy: correct / all answer pairs.")
    baseline_accuracy: str | None = _decimal_field("Stable revision accuracy, same dataset.")
    cases: int | None = Field(default=None, ge=0, description="Dataset cases evaluated.")
    failed_cases: int | None = Field(
        default=None, ge=0, description="Cases with at least one wrong or missing answer."
    )
    ece: str | None = _decimal_field("Expected calibration error (10 equal-width bins).")
    brier: str | None = _decimal_field("Brier score: mean squared confidence error.")
    baseline_ece: str | None = _decimal_field("Stable revision ECE, same dataset.")
    baseline_brier: str | None = _decimal_field("Stable revision Brier score, same dataset.")
    reliability: list[ReliabilityBinStatus] | None = Field(
        default=None,
        max_length=15,
        description="Reliability diagram of the candidate: per confidence bin, the pair count, "
        "the calibration-correct count and the confidence sum (dmrollout report draws it).",
    )
    baseline_reliability: list[ReliabilityBinStatus] | None = Field(
        default=None, max_length=15, description="The same for the stable revision."
    )
    confusion: list[ConfusionCellStatus] | None = Field(
        default=None,
        max_length=256,
        description="Per-label confusion counts of the candidate (no dataset content).",
    )
    negative_flips: str | None = _decimal_field(
        "Share of cases the stable answered right and the candidate wrong."
    )
    decision: EvaluationDecisionStatus | None = Field(
        default=None, description="With confidence: each gate's interval and verdict."
    )
    gates: EvaluationGates | None = Field(default=None, description="The gates applied.")
    result: EvaluationResult | None = Field(
        default=None, description="Passed, Failed or Inconclusive."
    )
    reason: str | None = Field(
        default=None, max_length=1024, description="Which gate failed, or why none ran."
    )
    completed_at: datetime | None = Field(default=None, description="When it finished.")


class RolloutRunStatus(WireModel):
    """One run of a rollout workflow (its history is the audit trail in the Temporal UI)."""

    workflow_id: str = Field(min_length=1, max_length=1024, description="Workflow ID.")
    run_id: str = Field(default="", max_length=128, description="Run ID within it.")


class DecisionRecordStatus(WireModel):
    """The newest signed decision record of this DecisionModel (issue 38, docs/audit.md): what
    ``dmrollout verify`` checks the kept chain against, so that removing the newest record is
    seen too."""

    sequence: int = Field(ge=1, description="Its place in the chain (1 is the first).")
    digest: str = Field(
        pattern=r"^sha256:[a-f0-9]{64}$", description="sha256 of its signed envelope."
    )
    name: str = Field(max_length=253, description="The ConfigMap that holds it.")
    namespace: str = Field(max_length=63, description="The records namespace.")
    decision: str = Field(max_length=16, description="Promote, RollBack or Hold.")
    revision: str = Field(max_length=64, description="The revision it decided on.")


class RollbackToStatus(WireModel):
    """A ``decisionmodel.io/rollback-to`` in force (issue 34): the revision the DecisionModel
    serves, or rolls out, in place of its spec, until the spec changes."""

    revision: str = Field(
        min_length=1, max_length=64, description="Hash of the revision it puts back."
    )
    generation: int = Field(
        ge=0,
        description="metadata.generation of the spec it stands in for: the next spec change "
        "(a higher generation) ends it and rolls the spec out.",
    )


class DecisionModelStatus(WireModel):
    """The observed state of a DecisionModel."""

    phase: Phase | None = Field(default=None, description="Lifecycle phase.")
    phase_transition_time: datetime | None = Field(
        default=None, description="When the phase last changed; phase timeouts count from it."
    )
    last_promotion_time: datetime | None = Field(
        default=None, description="When a revision last became stable."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status reflects."
    )
    endpoint: str | None = Field(
        default=None,
        max_length=1024,
        description="In-cluster URL of the decision API, http://<name>.<ns>.svc:11435/v1/systemone.",
    )
    stable_revision: RevisionStatus | None = Field(
        default=None, description="The revision the Service selects."
    )
    candidate_revision: RevisionStatus | None = Field(
        default=None, description="The revision being rolled out, if any."
    )
    failed_revision: FailedRevisionStatus | None = Field(
        default=None, description="The last revision that failed, with its reason."
    )
    previous_revision: RevisionStatus | None = Field(
        default=None, description="The stable revision before the last promotion."
    )
    last_retry_token: str | None = Field(
        default=None,
        max_length=1024,
        description="Last consumed value of the decisionmodel.io/retry annotation.",
    )
    re_resolve: ReResolveStatus | None = Field(
        default=None,
        description="While failedRevision is a ModelNotFound: the re-resolves started for it; "
        "the next one is due when the last one started plus a wait that doubles per attempt "
        "(by default 30 s to at most 10 min; the Ready message says when).",
    )
    rollback_to: RollbackToStatus | None = Field(
        default=None,
        description="The decisionmodel.io/rollback-to in force: its revision is served (or "
        "rolled out) in place of the spec until the next spec change; absent: the spec is.",
    )
    rollout: RolloutRunStatus | None = Field(
        default=None,
        description="The Temporal workflow run of the latest rollout, as its steps recorded "
        "it: the controller knows which rollout runs without listing Temporal.",
    )
    replicas: ReplicasStatus | None = Field(
        default=None, description="Replica counts of the stable revision."
    )
    selector: str | None = Field(
        default=None,
        max_length=1024,
        description="Label selector of the stable revision's Pods, for the scale subresource "
        "(an HorizontalPodAutoscaler or KEDA targets the DecisionModel, never its Deployment).",
    )
    evaluation: EvaluationStatus | None = Field(
        default=None, description="Result of the latest evaluation."
    )
    decision_record: DecisionRecordStatus | None = Field(
        default=None,
        description="The newest signed decision record (with decision records on): dmrollout "
        "verify checks the chain against it.",
    )
    evaluation_design: EvaluationDesignStatus | None = Field(
        default=None,
        description="With confidence: what the golden set can decide, checked at the start "
        "of the latest rollout (each gate's power for a candidate one margin better).",
    )
    evaluation_ledger: list[LedgerEntryStatus] | None = Field(
        default=None,
        max_length=8,
        description="With sequential evaluation: each recent candidate revision's test, the "
        "newest first; a later evaluation of the revision continues it.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=32,
        description="Resolved, Cached, ModelReady, Evaluated, Promoted, Ready, Degraded.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )

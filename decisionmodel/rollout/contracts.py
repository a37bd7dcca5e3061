"""What the RolloutWorkflow and its activities exchange: one pydantic model in, one out.

Everything here goes into Temporal history, so it holds **references only**: Secret and
ConfigMap names and keys, never an API key, a download token or a line of a golden dataset.
Fields may be added later with defaults; never renamed or removed (running workflows replay
their history against the new code).
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# One phase vocabulary: the API's (status.phase), also the workflow's DmPhase attribute.
from decisionmodel.api.status import Phase as Phase
from decisionmodel.evaluation.aggregates import EvaluationAggregates
from decisionmodel.evaluation.decision import EvaluationDecision
from decisionmodel.evaluation.decision import SliceGates as SliceGates
from decisionmodel.evaluation.design import GateDesign
from decisionmodel.vocabulary import ConditionStatus, Device, Engine, EvaluationResult, Gate
from decisionmodel.vocabulary import RolloutResult as RolloutResult

# Activity names: the workflow schedules activities by name so that workflows/ never imports
# the activities' modules (and with them kubernetes and httpx).
RESOLVE = "resolve"
PREFETCH = "prefetch"
START = "start"
WARMUP_INSPECT = "warmup_inspect"
EVALUATE = "evaluate"
PROMOTE = "promote"
DELETE_REVISION = "delete_revision"
WATCH_PROMOTED = "watch_promoted"
RECORD_STATUS = "record_status"
# An approval of a held candidate checks that it is model-ready (the approve update's handler).
CHECK_CANDIDATE = "check_candidate"
RECOVER_STORE_BEGIN = "recover_store_begin"
RECOVER_STORE_END = "recover_store_end"
WRITE_DECISION_RECORD = "write_decision_record"
# What the golden set can decide, before anything of the revision is made (issue 35 item 6).
CHECK_EVALUATION_DESIGN = "check_evaluation_design"

TASK_QUEUE = "dmrollout-rollouts"
WORKFLOW_ID_PREFIX = "rollout"
STORE_WORKFLOW_ID_PREFIX = "store"


class Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class DMRef(Contract):
    """The DecisionModel a rollout belongs to; the UID guards against a re-created namesake."""

    namespace: str
    name: str
    uid: str
    generation: int = 0

    @property
    def key(self) -> str:
        """``namespace/name``: the work queue's and the controller's maps' key."""
        return f"{self.namespace}/{self.name}"


class KeyRef(Contract):
    """A key of a Secret or ConfigMap in the DecisionModel's namespace (a reference only)."""

    kind: Literal["Secret", "ConfigMap"] = "Secret"
    name: str
    key: str


class _Hashed:
    """Marks an identity field that is part of the revision hash, in declaration order."""

    def __repr__(self) -> str:
        return "HASHED"


HASHED: Final = _Hashed()


class RevisionIdentity(Contract):
    """The fields that make a revision, declared once: what the spec asks for
    (``RevisionSpec``) and what status records (``RevisionRecord``) both carry them, the hash
    is computed over the ``HASHED`` ones in this order (``identity.HASH_FIELDS``; a field added
    later is left out of the hash while unset), and every copy between the shapes goes by these
    names. A new identity field is added here, to the spec and to the status schema
    (``decisionmodel.api``); the engine's params pass it on by name."""

    engine: Annotated[Engine, HASHED] = Engine.OLLAYA
    model: Annotated[str, HASHED]
    digest: Annotated[str | None, HASHED] = None
    device: Annotated[Device, HASHED] = Device.CPU
    image: Annotated[str | None, HASHED] = None
    runtime_version: str | None = None  # hashed through the image it selects
    resources: Annotated[dict[str, Any], HASHED] = Field(default_factory=dict)
    # Wire form (camelCase); hashed as its placement (identity.placement_hash).
    scheduling: Annotated[dict[str, Any], HASHED] = Field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """The identity fields by name, as values of this revision."""
        return {name: getattr(self, name) for name in RevisionIdentity.model_fields}


class RevisionSpec(RevisionIdentity):
    """The identity inputs of the requested revision, from the spec at dispatch time.
    ``digest``: spec.digest (pinned by the user) or reused from status; ``image``: spec.image
    only (None: the runtime's default image of ``runtime_version``)."""

    digest_pinned: bool = False

    def unresolved_record(self, requested_hash: str) -> RevisionRecord:
        """This revision as failedRevision, for a rollout that failed before resolve."""
        return RevisionRecord(
            **{**self.identity(), "digest": self.digest or ""}, hash=requested_hash
        )


class RevisionRecord(RevisionIdentity):
    """A revision as status records it (status.stableRevision and friends): the identity with
    its digest and the image it runs resolved, the resources its Pods run with, its hash."""

    hash: str
    digest: str = Field(pattern=r"^([a-f0-9]{64})?$")  # "": failed before resolve
    precision: str | None = None
    placement: str | None = None

    def to_status(self) -> dict[str, Any]:
        """The status form: camelCase, unset fields left out (an unresolved revision, failed
        before resolve, has no digest)."""
        wire = {to_camel(k): v for k, v in self.model_dump(mode="json").items()}
        return {k: v for k, v in wire.items() if v not in (None, "", {})}


class CachePolicy(Contract):
    size: str = "10Gi"
    storage_class_name: str | None = None
    access_modes: list[str] = Field(default_factory=lambda: ["ReadWriteOnce"])
    download_token: KeyRef | None = None


class InPlace(Contract):
    """What is applied in place to whichever revision serves, never part of its identity: the
    replicas, the store and the API key (REFERENCE "Revision identity"). Declared once, carried
    by every step that renders or probes the Pods, copied by name (``in_place``); built from
    the spec by ``spec_mapping.in_place``. A new in-place field is added here, to the spec, there,
    and to the engine's params and renderer."""

    replicas: int = 1
    cache: CachePolicy = Field(default_factory=CachePolicy)
    api_key: KeyRef | None = None

    def in_place(self) -> dict[str, Any]:
        """The in-place settings by name, as values of this input."""
        return {name: getattr(self, name) for name in InPlace.model_fields}


OnInconclusive = Literal["Hold", "Reject", "Promote"]


class EvaluationPolicy(Contract):
    dataset: KeyRef
    min_accuracy: str
    max_accuracy_drop: str | None = None
    max_ece: str | None = None
    max_ece_increase: str | None = None
    max_cases: int = 500
    # Evidence-grade gates (added later: None keeps the point gates and the fingerprints of
    # policies written before, see _canonical).
    max_negative_flip_rate: str | None = None
    confidence: str | None = None
    on_inconclusive: OnInconclusive | None = None
    slices: SliceGates | None = None
    sequential: bool | None = None

    @property
    def needs_baseline(self) -> bool:
        """The stable answers the same cases: a relative gate needs it, and with a confidence
        every paired difference is reported."""
        return (
            self.max_accuracy_drop is not None
            or self.max_ece_increase is not None
            or self.max_negative_flip_rate is not None
            or self.confidence is not None
        )

    @property
    def needs_case_records(self) -> bool:
        """Whether the figures need every case's own outcome (intervals, flips)."""
        return self.confidence is not None or self.max_negative_flip_rate is not None

    @property
    def inconclusive_action(self) -> OnInconclusive:
        return self.on_inconclusive or "Hold"

    def gates(self) -> dict[str, str]:
        """The gates that are set, by their wire names (as spec and status spell them)."""
        gates = {
            Gate.MIN_ACCURACY: self.min_accuracy,
            Gate.MAX_ACCURACY_DROP: self.max_accuracy_drop,
            Gate.MAX_ECE: self.max_ece,
            Gate.MAX_ECE_INCREASE: self.max_ece_increase,
            Gate.MAX_NEGATIVE_FLIP_RATE: self.max_negative_flip_rate,
        }
        return {str(k): v for k, v in gates.items() if v is not None}

    def canonical(self) -> dict[str, Any]:
        """The policy as JSON, the later fields only when set: a policy without them has the
        fingerprint and digest it had before they existed."""
        later = {"max_negative_flip_rate", "confidence", "on_inconclusive", "slices", "sequential"}
        unset = {k for k in later if getattr(self, k) is None}
        return self.model_dump(mode="json", exclude=unset)

    def fingerprint(self) -> str:
        """Binds a manual approval to the gates it was given for (12 hex of sha256)."""
        body = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()[:12]


Promotion = Literal["Automatic", "EvaluationGated", "Manual"]


class RolloutPolicy(Contract):
    """What decides whether a revision may be promoted: the evaluation (dataset reference,
    gates, case count) and the promotion mode (spec.rollout). Timeouts, replicas and the cache
    are not policy: they change how a rollout runs, never whether it may promote.

    The activities compare the digest of the policy a rollout enforces (taken from its own
    input, never from a digest the starter declares) with the live DecisionModel's before
    evaluating and before promoting (``decisionmodel.rollout.policy_check``).
    """

    evaluation: EvaluationPolicy | None = None
    promotion: Promotion = "Automatic"

    def digest(self) -> str:
        """16 hex of sha256 over the canonical JSON of the policy."""
        body = self.model_dump(mode="json")
        if self.evaluation is not None:
            body["evaluation"] = self.evaluation.canonical()
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class PhaseTimeouts(Contract):
    """Phase deadlines from spec.rollout.timeouts, in seconds (reference defaults)."""

    caching: int = 1800
    starting: int = 600
    evaluating: int = 600
    decision: int = 86400  # a hold on an inconclusive evaluation (onInconclusive: Hold)


class RolloutTuning(Contract):
    """Tempo of a rollout, fixed at dispatch so a replay sees the same values."""

    heartbeat_timeout_seconds: int = 30  # a killed worker's activity is retried after this
    promotion_grace_seconds: int = 30  # the previous revision keeps running this long
    warmup_timeout_seconds: int = 300  # one load of the model (OLLAYA_LOAD_TIMEOUT default 5m)
    # One round of a compensation step's retries (record the failure, delete a revision); it
    # is never given up: after a round it waits cleanup_pause_seconds and starts another.
    cleanup_round_seconds: int = 600
    cleanup_pause_seconds: int = 30
    # Post-promotion watch: how often the new stable's Pods are inspected in the window.
    watch_period_seconds: int = 10
    # The steady state's probe-error window, which the watch tolerates too.
    probe_error_window_seconds: float = 180.0


class RolloutInput(InPlace):
    """The workflow's only argument: the DecisionModel's requested revision and policy."""

    dm: DMRef
    # The hash in the workflow ID: the revision hash when the digest is known at dispatch (spec
    # digest, or the one recorded for the same model), else the hash of the unresolved identity
    # (digest ""). The resolved hash is in the result and the DmRevision search attribute.
    requested_revision: str
    revision: RevisionSpec
    evaluation: EvaluationPolicy | None = None
    promotion: Promotion = "Automatic"
    timeouts: PhaseTimeouts = Field(default_factory=PhaseTimeouts)
    stable: RevisionRecord | None = None
    retry_token: str | None = None  # the decisionmodel.io/retry value this run consumes
    tuning: RolloutTuning = Field(default_factory=RolloutTuning)
    # spec.rollout.postPromotionWatch in seconds; None (the default) keeps no watch.
    post_promotion_watch_seconds: int | None = None
    # The build of the controller that started this run, for the decision records.
    controller_build: str = ""
    # Signed decision records (docs/audit.md): True, the run writes them (the worker must know
    # the records namespace, else it says so); False, none (no activity in the history); None
    # (a hand-made input), the worker's setting decides.
    decision_records: bool | None = None

    def policy(self) -> RolloutPolicy:
        """The policy this rollout enforces: what its steps actually do with this input (its
        digest is the policy digest the controller and the activities compare)."""
        return RolloutPolicy(evaluation=self.evaluation, promotion=self.promotion)


def retry_key(token: str) -> str:
    """The retry generation in a workflow ID: 8 hex of the retry token (any string a user set)."""
    return hashlib.sha256(token.encode()).hexdigest()[:8]


def workflow_id(dm: DMRef, revision: str, retry_token: str | None = None) -> str:
    """``rollout/<ns>/<name>/<revision>[/<retry generation>]``: one workflow per revision, and
    one more per retry token a user sets on purpose."""
    base = f"{WORKFLOW_ID_PREFIX}/{dm.namespace}/{dm.name}/{revision}"
    return f"{base}/{retry_key(retry_token)}" if retry_token else base


def store_workflow_id(dm: DMRef, revision: str, retry_token: str | None = None) -> str:
    """``store/<ns>/<name>/<revision>[/<retry generation>]``: one recovery of a stable store at a
    time; a decisionmodel.io/retry value starts a new one after a failed recovery."""
    base = f"{STORE_WORKFLOW_ID_PREFIX}/{dm.namespace}/{dm.name}/{revision}"
    return f"{base}/{retry_key(retry_token)}" if retry_token else base


# --- activity inputs and results --------------------------------------------------------------


class StepStatus(Contract):
    """The status a step activity writes itself, so that a phase change costs no activity of
    its own in history (workflows patched ``status-in-steps``; issue 14: 91 → 42 events).

    ``enter``: written when the step starts, every attempt (the phase, e.g. Caching; writing
    it again keeps phaseTransitionTime). ``report``: the step writes its outcome when it ends
    (a condition, an Event), built by ``decisionmodel.rollout.step_status`` from its result. None on
    a step's input (a rollout started before the change): the workflow writes both through
    record_status.
    """

    enter: StatusUpdate | None = None
    report: bool = False


class ResolveInput(Contract):
    dm: DMRef
    revision: RevisionSpec
    status: StepStatus | None = None


class ResolveResult(Contract):
    record: RevisionRecord  # hash computed over the resolved digest
    canonical: str
    store_manifest_path: str
    resolved_from_registry: bool


class RevisionObjectsInput(InPlace):
    """What prefetch, start and delete need to name and render a revision's objects."""

    dm: DMRef
    record: RevisionRecord
    revision: RevisionSpec
    store_manifest_path: str = ""
    caching_timeout_seconds: int = 1800
    status: StepStatus | None = None  # prefetch and start only


class PrefetchResult(Contract):
    job: str
    pvc: str
    attempts: int


class StartResult(Contract):
    deployment: str


class WarmupInput(InPlace):
    dm: DMRef
    record: RevisionRecord
    model: str
    warmup_timeout_seconds: int = 300
    status: StepStatus | None = None


class WarmupResult(Contract):
    model_ready: int
    precision: str | None = None


class EvaluationDesignInput(Contract):
    dm: DMRef
    policy: EvaluationPolicy
    status: StepStatus | None = None


class EvaluationDesign(Contract):
    """What the golden set can decide (numbers only: status.evaluationDesign). ``checked``
    False when the dataset could not be read yet: the evaluation step says why when it runs."""

    checked: bool
    cases: int = 0
    gates: list[GateDesign] = Field(default_factory=list, max_length=64)
    message: str = Field(default="", max_length=1000)

    @property
    def underpowered(self) -> bool:
        return any(g.weak for g in self.gates)


class EvaluateInput(Contract):
    dm: DMRef
    candidate: RevisionRecord
    model: str
    stable: RevisionRecord | None = None
    policy: EvaluationPolicy
    api_key: KeyRef | None = None
    # The rollout's promotion mode, so that evaluate compares the whole policy with the live
    # DecisionModel; None from a workflow scheduled before the check (evaluation part only).
    promotion: Promotion | None = None
    status: StepStatus | None = None


class EvaluationOutcome(Contract):
    """Figures only (rendered decimals); never a case or an answer."""

    result: EvaluationResult
    reason: str
    message: str
    accuracy: str
    ece: str
    brier: str
    cases: int
    failed_cases: int
    baseline_accuracy: str | None = None
    baseline_ece: str | None = None
    dataset_digest: str
    # Added for the report (defaults: histories written before replay unchanged). Counts and
    # sums only: per-bin calibration sums and confusion cells named without dataset content.
    baseline_brier: str | None = None
    aggregates: EvaluationAggregates | None = None
    baseline_aggregates: EvaluationAggregates | None = None
    # Evidence-grade gates: the share of cases the stable got right and the candidate wrong
    # (4 places), and with a confidence the decision record (intervals and verdicts).
    negative_flips: str | None = None
    decision: EvaluationDecision | None = None


class PromoteInput(InPlace):
    dm: DMRef
    candidate: RevisionRecord
    stable: RevisionRecord | None = None
    # For the re-check of the candidate's Pods right before the promotion is recorded (a
    # candidate held for an approval may have lost its model or its pin since warm-up).
    model: str = ""
    # The policy the rollout enforced, the approval it accepted (None: it awaited none) and the
    # dataset its evaluation read: promote re-checks all three against the live DecisionModel.
    # A policy of None (scheduled before the check existed) is refused as a mismatch.
    policy: RolloutPolicy | None = None
    approval: str | None = None
    dataset_digest: str | None = None
    # The post-promotion watch switching back: the candidate is the revision that served
    # before the stable (status.previousRevision), which passed its gates then; promote checks
    # that it is exactly that revision instead of re-checking policy and approval.
    switch_back: bool = False
    status: StepStatus | None = None
    # How long the re-check waits for candidate Pods that do not answer (the steady state's
    # probe-error window; a rollout scheduled before the field existed gets the default).
    probe_error_window_seconds: float = 180.0
    # Only wait for what holds the promotion before anything is recorded (a foreign Service
    # of the DecisionModel's name): retried while it holds, shown on Promoted, records nothing.
    # The workflow runs this after the promotion refused such a guard, outside the commitment.
    await_guards: bool = False


DecisionKind = Literal["Promote", "RollBack", "Hold"]


class DecisionRecordInput(Contract):
    """One decision of a rollout, for its signed record (decisionmodel.records): what was
    decided on which revision, why, on what evidence and policy. Numbers, names and digests
    only; the approval token binds the evidence and the policy, never a secret."""

    dm: DMRef
    decision: DecisionKind
    reason: str
    message: str
    candidate: RevisionRecord
    stable: str | None = None
    policy: RolloutPolicy
    evaluation: EvaluationOutcome | None = None
    approval: str | None = None
    controller_build: str = ""
    # Promote: a record that cannot be written shows on Promoted (the promotion waits).
    blocking: bool = False


class DecisionRecordResult(Contract):
    written: bool
    name: str | None = None  # the record's ConfigMap
    sequence: int | None = None
    digest: str | None = None  # sha256 of its envelope
    why: str = ""  # why none was written (records off, no model digest)


class CandidateReadiness(Contract):
    """check_candidate: how many of the held candidate's Pods are model-ready and pass an
    inspection now, and why the others do not ("<pod>: <why>")."""

    ready: int
    desired: int
    not_ready: list[str] = Field(default_factory=list)


class PromoteResult(Contract):
    previous: str | None  # the revision hash the Service selected before, to delete after grace


class WatchPromotedInput(InPlace):
    """Watch the new stable's readiness gate for a window after its promotion."""

    dm: DMRef
    stable: RevisionRecord  # the revision just promoted
    window_seconds: int
    period_seconds: int = 10
    # Consecutive checks with gate failures and fewer Pods passing than desired before the
    # watch fails (decisionmodel/rollout/promoted_watch.py).
    strikes: int = 2
    # A Pod that does not answer is tolerated this long, as the steady state tolerates it.
    probe_error_window_seconds: float = 180.0
    # The revision the Service would go back to (kept warm for the watch): while its Pods pass
    # and none of the new stable's does, the watch fails at once. None (a rollout scheduled by
    # an older build): only the strikes and the error window judge.
    previous: RevisionRecord | None = None

    def overtime_seconds(self) -> float:
        """The longest a judgement still open at the window's end (a Pod not answering, no
        Pod passing) keeps the watch going: the error window, then the strikes."""
        return self.probe_error_window_seconds + max(self.period_seconds, 1) * (self.strikes + 1)


class WatchPromotedResult(Contract):
    held: bool  # False: the gate failed inside the window; ``message`` says how
    checks: int = 0
    message: str = ""


class DeleteRevisionInput(Contract):
    dm: DMRef
    revision: str
    # Objects the live Service selects are never deleted, whatever the caller asks.
    reason: str = ""
    # The previous revision after the grace: kept when a newer rollout is rolling it out again
    # (status.candidateRevision names it: an undo right after a promotion).
    keep_if_rolling_out: bool = False


class DeleteRevisionResult(Contract):
    deleted: list[str]
    kept_selected: bool = False


class ConditionUpdate(Contract):
    type: str
    status: ConditionStatus
    reason: str
    message: str = ""


class RolloutRun(Contract):
    """The workflow run a status write came from (status.rollout)."""

    workflow_id: str
    run_id: str = ""

    def to_status(self) -> dict[str, Any]:
        return {"workflowId": self.workflow_id, "runId": self.run_id}


class StatusUpdate(Contract):
    """Rollout-owned status fields to apply (server-side apply, field manager of the rollout).

    ``None`` means "leave as is"; ``clear_*`` removes a field the rollout owns.
    """

    dm: DMRef
    phase: Phase | None = None
    candidate: RevisionRecord | None = None
    clear_candidate: bool = False
    stable: RevisionRecord | None = None
    previous_revision: str | None = None
    failed: RevisionRecord | None = None
    failed_reason: str | None = None
    failed_message: str | None = None
    clear_failed: bool = False
    evaluation: EvaluationOutcome | None = None
    evaluation_gates: dict[str, str] | None = None
    evaluation_design: EvaluationDesign | None = None
    promoted: bool = False  # sets lastPromotionTime
    conditions: list[ConditionUpdate] = Field(default_factory=list)
    event_reason: str | None = None
    event_message: str = ""
    event_type: Literal["Normal", "Warning"] = "Normal"
    # Stamped by the rollout's activities (activities.status.stamped), never by the workflow:
    # so the controller reads which rollout runs from status, not from visibility.
    rollout: RolloutRun | None = None


# StepStatus and the step inputs that carry it name StatusUpdate before it is defined.
for _model in (
    StepStatus,
    ResolveInput,
    RevisionObjectsInput,
    WarmupInput,
    EvaluateInput,
    EvaluationDesignInput,
):
    _model.model_rebuild()
PromoteInput.model_rebuild()

# --- messages ---------------------------------------------------------------------------------


class StoreRecoveryInput(Contract):
    """The stable revision whose store PVC is lost, as the steady state renders it."""

    objects: RevisionObjectsInput
    retry_token: str | None = None


class StoreRecoveryOutcome(Contract):
    recovered: bool
    reason: str | None = None
    message: str | None = None


class RejectedApproval(Contract):
    approval: str
    why: str


class CleanupProgress(Contract):
    """A compensation step that has failed for at least one round and is being retried."""

    step: str
    rounds: int
    last_error: str


class RolloutProgress(Contract):
    """The query answer: what the rollout is doing now."""

    phase: Phase
    step: str
    requested_revision: str
    revision: str | None = None
    digest: str | None = None
    expected_approval: str | None = None  # set while AwaitingPromotion
    cases_done: int = 0
    cases_total: int = 0
    evaluation: EvaluationOutcome | None = None
    rejected_approvals: list[RejectedApproval] = Field(default_factory=list)
    result: RolloutResult | None = None
    reason: str | None = None
    message: str | None = None
    cleanup: CleanupProgress | None = None  # set while a compensation step keeps failing


class RolloutOutcome(Contract):
    result: RolloutResult
    revision: str | None = None
    reason: str | None = None
    message: str | None = None
    # With spec.rollout.evaluation.confidence: the decision record the rollout acted on.
    decision: EvaluationDecision | None = None


def approval_token(
    revision: str,
    policy: EvaluationPolicy | None,
    dataset_digest: str | None,
    evidence: str | None = None,
) -> str:
    """The approval a manual promotion must carry: bound to the candidate revision and, with
    evaluation, to the gates and the dataset it passed (so a stale approval cannot promote a
    later candidate, nor one evaluated against different data), and with intervals to the
    evidence shown (the decision record's digest: an approval given on other figures is
    stale)."""
    if policy is None or dataset_digest is None:
        return revision
    token = f"{revision}.{policy.fingerprint()}.{dataset_digest[:12]}"
    return f"{token}.{evidence}" if evidence else token

"""The one vocabulary: phases, condition types, reasons, Event reasons, results, gate names,
and the permanent set.

Every word dmrollout writes where a user reads it (a condition's type and reason, an Event's
reason, a readiness-gate reason, an ApplicationError's type in workflow history) is spelled
here once; code elsewhere names the member, never the string. ``tests/unit/api/
test_vocabulary.py`` holds the product to that: no such literal outside this module, and the
workflow's non-retryable set equal to the reasons the activities raise as permanent.

Reasons are the reference operator's (seed 001, "Condition reasons you may see") plus the ones
this project adds for timeouts, queueing and superseded rollouts. A reason doubles as the
``type`` of the ApplicationError an activity raises, so a failure and the condition it produces
share one name.
"""

from __future__ import annotations

import enum
from typing import Final


class Engine(enum.StrEnum):
    """The model runtime that serves the model (spec.engine)."""

    OLLAYA = "ollaya"


class Device(enum.StrEnum):
    """The device class the model must be loaded on (spec.device; checked by the readiness
    gate against the class of what ``/api/ps`` reports)."""

    CPU = "cpu"
    CUDA = "cuda"


class ConditionStatus(enum.StrEnum):
    """metav1.ConditionStatus: the status of a condition (the DecisionModel's and a Pod's)."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"

    @classmethod
    def of(cls, value: bool) -> ConditionStatus:
        return cls.TRUE if value else cls.FALSE


class StatusKey(enum.StrEnum):
    """The DecisionModel's status fields by their wire names, for the code that writes status
    as a patch or keeps a compact copy of it (readers use ``decisionmodel.api``'s models)."""

    PHASE = "phase"
    PHASE_TRANSITION_TIME = "phaseTransitionTime"
    LAST_PROMOTION_TIME = "lastPromotionTime"
    OBSERVED_GENERATION = "observedGeneration"
    STABLE_REVISION = "stableRevision"
    CANDIDATE_REVISION = "candidateRevision"
    FAILED_REVISION = "failedRevision"
    PREVIOUS_REVISION = "previousRevision"
    LAST_RETRY_TOKEN = "lastRetryToken"
    RE_RESOLVE = "reResolve"
    ROLLBACK_TO = "rollbackTo"
    ROLLOUT = "rollout"
    EVALUATION_LEDGER = "evaluationLedger"
    EVALUATION_DESIGN = "evaluationDesign"


class Phase(enum.StrEnum):
    """The lifecycle phase shown in `kubectl get dm`."""

    PENDING = "Pending"
    RESOLVING = "Resolving"
    CACHING = "Caching"
    STARTING = "Starting"
    EVALUATING = "Evaluating"
    AWAITING_PROMOTION = "AwaitingPromotion"
    PROMOTING = "Promoting"
    READY = "Ready"
    DEGRADED = "Degraded"
    FAILED = "Failed"
    ROLLED_BACK = "RolledBack"


class EvaluationResult(enum.StrEnum):
    """Outcome of the evaluation gates."""

    PASSED = "Passed"
    FAILED = "Failed"
    # spec.rollout.evaluation.confidence set: an interval straddles its gate's threshold.
    INCONCLUSIVE = "Inconclusive"


class RolloutResult(enum.StrEnum):
    """How a rollout workflow ended (its result and the DmResult search attribute)."""

    PROMOTED = "Promoted"
    ROLLED_BACK = "RolledBack"
    FAILED = "Failed"
    SUPERSEDED = "Superseded"
    ABORTED = "Aborted"


class StageState(enum.StrEnum):
    """Where one stage is; what `kubectl get dmp` and `dmrollout pipeline status` show."""

    PENDING = "Pending"  # waiting for its dependencies
    SOAKING = "Soaking"
    WAITING_FOR_WINDOW = "WaitingForWindow"
    AWAITING_APPROVAL = "AwaitingApproval"
    ROLLING_OUT = "RollingOut"
    PROMOTED = "Promoted"
    FAILED = "Failed"
    BLOCKED = "Blocked"  # a dependency failed, was aborted or blocked: it never starts
    ABORTED = "Aborted"
    SUPERSEDED = "Superseded"


class StageReason(enum.StrEnum):
    """Why a pipeline's stage is where it is (its ``reason``, beside the state)."""

    WAITING_FOR_DEPENDENCIES = "WaitingForDependencies"
    DEPENDENCY_FAILED = "DependencyFailed"
    SOAKING = "Soaking"
    OUTSIDE_CHANGE_WINDOW = "OutsideChangeWindow"
    AWAITING_APPROVAL = "AwaitingApproval"
    APPROVAL_EXPIRED = "ApprovalExpired"  # no approval within APPROVAL_BOUND
    ROLLING_OUT = "RollingOut"
    NOTHING_TO_ROLL_OUT = "NothingToRollOut"
    PROMOTED_BY_EARLIER_RUN = "PromotedByEarlierRun"  # a retry keeps what the failed run did
    # A promoted stage that no longer serves the freight healthy while its dependents soak
    # (degraded, rolled back, changed): it is Failed, and they never start.
    UNHEALTHY = "UnhealthyDuringSoak"
    STAGE_FAILED = "StageFailed"
    FREIGHT_FAILED = "FreightFailed"
    # The tag serves other bytes than the freight (re-published after the run pinned it): the
    # stage cannot fetch what its dependencies verified (the runtime pulls by tag), so it waits.
    FREIGHT_NOT_SERVED = "FreightNotServed"
    # A dependency's cluster did not answer whether it still serves the freight for days (its
    # worker away): the stage fails instead of waiting without end.
    DEPENDENCY_UNCONFIRMED = "DependencyUnconfirmed"
    ABORTED = "Aborted"


class PipelinePhase(enum.StrEnum):
    """The phase of a DecisionModelPipeline's run (`kubectl get dmp`)."""

    PROGRESSING = "Progressing"
    AWAITING_APPROVAL = "AwaitingApproval"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ABORTED = "Aborted"
    INVALID = "Invalid"


class PipelineCondition(enum.StrEnum):
    """The condition types of a DecisionModelPipeline, with their reasons."""

    ACCEPTED = "Accepted"  # the spec is a pipeline (no cycle, a valid template)
    STAGE_WORKERS_POLLING = "StageWorkersPolling"  # every stage's cluster has a worker
    # The run's: its template's tag resolved to the digest every stage rolls out (the run
    # writes it, the controller never does: each owns its own conditions).
    FREIGHT_PINNED = "FreightPinned"
    # kstatus (Flux, Helm 4 --wait, kpt): True while the revision's run goes on by itself /
    # once it cannot without a change (failed, aborted, invalid, a stage with no worker).
    RECONCILING = "Reconciling"
    STALLED = "Stalled"


class PipelineReason(enum.StrEnum):
    ACCEPTED = "Accepted"
    PIPELINE_INVALID = "PipelineInvalid"
    POLLING = "Polling"
    NO_STAGE_WORKER = "NoStageWorker"
    TEMPORAL_UNREACHABLE = "TemporalUnreachable"
    PINNED = "Pinned"
    RESOLVING = "Resolving"  # the run's first resolve has not answered yet


class ConditionType(enum.StrEnum):
    """The condition types a DecisionModel reports."""

    RESOLVED = "Resolved"
    CACHED = "Cached"
    MODEL_READY = "ModelReady"
    EVALUATED = "Evaluated"
    PROMOTED = "Promoted"
    READY = "Ready"
    DEGRADED = "Degraded"
    # Seed 001 "Upgrading the operator": a newer default runtime exists (policy Pinned).
    RUNTIME_UPDATE_AVAILABLE = "RuntimeUpdateAvailable"
    # False while the controller cannot reach Temporal: rollouts wait, the stable is looked after.
    TEMPORAL_REACHABLE = "TemporalReachable"
    # kstatus: True while the spec's revision cannot be reached without a change by the user
    # (it failed, and nothing retries it by itself); absent otherwise.
    STALLED = "Stalled"
    # kstatus: True while the spec's revision is being rolled out (or waits to be); absent when
    # it serves, is stalled, or is refused.
    RECONCILING = "Reconciling"
    # True while a compensation step (deleting a revision's objects, recording the failure) keeps
    # failing; False once it finished. The rollout's: it knows the objects and the workflow.
    CLEANUP_PENDING = "CleanupPending"
    # True while a decisionmodel.io/rollback-to is in force (status.rollbackTo): the named
    # revision is rolled out or served in place of the spec, until the next spec change.
    ROLLBACK_TO = "RollbackTo"


class Reason(enum.StrEnum):
    """Condition reasons, readiness-gate reasons and ApplicationError types."""

    # --- seed 001's table ---------------------------------------------------------------
    NO_MODEL_READY_PODS = "NoModelReadyPods"
    REPLICAS_NOT_MODEL_READY = "ReplicasNotModelReady"
    DIGEST_MISMATCH = "DigestMismatch"
    DEVICE_MISMATCH = "DeviceMismatch"
    NOT_PINNED = "NotPinned"
    # Not the seed's: the runtime refused to load the model on every candidate Pod, round after
    # round (500 MODEL_LOAD_FAILED), so waiting out the start deadline cannot fix it (issue 34).
    MODEL_LOAD_FAILED = "ModelLoadFailed"
    CACHE_NOT_SHAREABLE = "CacheNotShareable"
    CACHE_SPEC_IMMUTABLE = "CacheSpecImmutable"
    REGISTRY_NOT_ALLOWED = "RegistryNotAllowed"
    IMAGE_OVERRIDE_NOT_ALLOWED = "ImageOverrideNotAllowed"
    SECRET_NOT_ALLOWED = "SecretNotAllowed"
    INVALID_MODEL_NAME = "InvalidModelName"
    MODEL_NOT_FOUND = "ModelNotFound"
    DATASET_INVALID = "DatasetInvalid"
    EVALUATION_FAILED = "EvaluationFailed"
    EVALUATION_TIMEOUT = "EvaluationTimeout"
    RESOURCE_CONFLICT = "ResourceConflict"
    STORE_LOST = "StoreLost"
    STORE_PREFETCH_FAILED = "StorePrefetchFailed"
    STORE_TERMINATING = "StoreTerminating"

    # --- elsewhere in seeds 000/001 and REFERENCE.md ------------------------------------
    PROBE_ERROR = "ProbeError"  # readiness gate: the runtime did not answer
    API_KEY_INVALID = "APIKeyInvalid"  # no key, an empty key, or one no header can carry
    ROLLOUT_QUEUED = "RolloutQueued"  # --max-concurrent-rollouts budget exhausted
    TEMPORAL_UNAVAILABLE = "TemporalUnavailable"  # the controller cannot reach Temporal
    # No worker can take the rollout run's next task: it is pinned to a build no worker runs,
    # or no worker polls its task queue (controller/temporal/worker_presence.py).
    ROLLOUT_STRANDED = "RolloutStranded"
    # Temporal refused the controller's API key or client certificate (UNAUTHENTICATED), or
    # its identity lacks the namespace (PERMISSION_DENIED): rollouts wait, as for an outage.
    TEMPORAL_UNAUTHORIZED = "TemporalUnauthorized"
    TEMPORAL_PERMISSION_DENIED = "TemporalPermissionDenied"
    CANDIDATE_REJECTED = "CandidateRejected"  # Ready=True while phase RolledBack
    TAG_MOVED = "TagMoved"  # prefetch exit code 5: the tag's manifest changed mid-pull
    NAMESPACE_NOT_WATCHED = "NamespaceNotWatched"  # outside --watch-namespaces

    # --- this project: failures -----------------------------------------------------------
    CACHE_TIMEOUT = "CacheTimeout"
    START_TIMEOUT = "StartTimeout"
    PREFETCH_FAILED = "PrefetchFailed"
    SUPERSEDED = "Superseded"  # a newer revision cancelled this rollout
    ABORTED = "Aborted"  # the abort signal (CLI, annotation) stopped this rollout
    REGISTRY_UNAVAILABLE = "RegistryUnavailable"  # transient resolve failure, retried
    REGISTRY_ERROR = "RegistryError"  # the registry answered with an error (transient)
    DATASET_NOT_FOUND = "DatasetNotFound"  # held in Evaluating until its timeout
    SECRET_NOT_FOUND = "SecretNotFound"  # a referenced Secret or key is missing (transient)
    SECRET_READ_FAILED = "SecretReadFailed"  # the API refused the read (transient)
    QUEUE_FULL = "QueueFull"  # the runtime answered 503 QUEUE_FULL past its attempts
    RUNTIME_REQUEST_REJECTED = "RuntimeRequestRejected"  # the runtime refused a request (4xx)
    RUNTIME_ANSWER_INVALID = "RuntimeAnswerInvalid"  # a 2xx answer that cannot be read
    APPROVAL_REJECTED = "ApprovalRejected"  # a manual approval that does not match
    DECISION_MODEL_GONE = "DecisionModelGone"  # deleted or re-created mid-rollout
    INVALID_DIGEST = "InvalidDigest"  # a hand-made workflow input with a bad digest
    INVALID_REVISION_PARAMS = "InvalidRevisionParams"  # a revision the renderers refuse
    INVALID_EVALUATION_POLICY = "InvalidEvaluationPolicy"  # gates that are not decimals
    PLACEMENT_REFUSED = "PlacementRefused"  # placement or replicas outside the operator's policy
    # decisionmodel.io/rollback-to names neither the stable nor the previous revision (seed 002)
    ROLLBACK_TARGET_UNAVAILABLE = "RollbackTargetUnavailable"
    # RollbackTo=True: the revision rollback-to names is being rolled out / serves instead of
    # the spec (issue 34).
    ROLLBACK_IN_PROGRESS = "RollbackInProgress"
    ROLLBACK_SERVING = "RollbackServing"
    API_SERVER_UNAVAILABLE = "APIServerUnavailable"  # a Kubernetes call timed out or was refused
    ROLLOUT_RESTARTS_EXHAUSTED = "RolloutRestartsExhausted"  # ended without a verdict N times
    CLEANUP_PENDING = "CleanupPending"  # a compensation step keeps failing; it keeps retrying
    GUARD_CLEARED = "GuardCleared"  # a step a guard held goes on (its condition Unknown)
    CLEANUP_DONE = "CleanupDone"  # CleanupPending=False: the step that kept failing is done
    ACTIVITY_FAILED = "ActivityFailed"  # a step failed without a typed reason
    ACTIVITY_TIMEOUT = "ActivityTimeout"  # a step without a phase deadline timed out
    # spec.rollout.postPromotionWatch: the new stable failed its gate inside the window, the
    # Service went back to the previous revision.
    POST_PROMOTION_GATE_FAILED = "PostPromotionGateFailed"
    # The rollout's policy (evaluation, gates, promotion) is not the live DecisionModel's.
    POLICY_MISMATCH = "PolicyMismatch"
    # onInconclusive: the evidence did not decide a gate and the policy (or a person) said no.
    INCONCLUSIVE_REJECTED = "InconclusiveRejected"
    # onInconclusive: Hold and nobody decided within spec.rollout.timeouts.decision.
    DECISION_TIMEOUT = "DecisionTimeout"
    # Decision records (issue 38): the signed record of a promotion could not be written, so
    # the traffic is not switched (the message names the fix); a rollback's or a hold's that
    # could not be written is a Warning Event (neither waits for a record).
    DECISION_RECORD_UNWRITTEN = "DecisionRecordUnwritten"
    # The golden set cannot decide a gate at its confidence with 80 % power for a candidate one
    # margin better (issue 35 item 6): said at the rollout's start, the rollout goes on.
    EVALUATION_UNDERPOWERED = "EvaluationUnderpowered"

    # --- this project: progress and success -----------------------------------------------
    RESOLVING = "Resolving"
    DIGEST_RESOLVED = "DigestResolved"
    DIGEST_PINNED = "DigestPinned"  # spec.digest set, nothing resolved
    PREFETCHING = "Prefetching"
    PREFETCHED = "Prefetched"  # Cached=True: the store holds the verified digest
    PREFETCH_SUCCEEDED = "PrefetchSucceeded"
    PODS_STARTING = "PodsStarting"
    # A Pod a step waits for cannot be placed / its container cannot start (pod_trouble):
    # shown while the step waits for its deadline, which it ends as CacheTimeout/StartTimeout.
    PODS_UNSCHEDULABLE = "PodsUnschedulable"
    PODS_NOT_STARTING = "PodsNotStarting"
    MODEL_READY = "ModelReady"  # also the readiness gate's True reason
    EVALUATING = "Evaluating"
    EVALUATION_PASSED = "EvaluationPassed"
    EVALUATION_INCONCLUSIVE = "EvaluationInconclusive"  # held: the evidence decides no gate
    EVALUATION_SKIPPED = "EvaluationSkipped"  # no spec.rollout.evaluation
    AWAITING_PROMOTION = "AwaitingPromotion"
    PROMOTED = "Promoted"
    ROLLOUT_IN_PROGRESS = "RolloutInProgress"
    NO_STABLE_REVISION = "NoStableRevision"  # Ready=False before the first promotion
    SERVING = "Serving"  # Ready=True: the stable revision answers
    AS_EXPECTED = "AsExpected"  # Degraded=False
    RUNTIME_UPDATE_AVAILABLE = "RuntimeUpdateAvailable"


class EventReason(enum.StrEnum):
    """Reasons of the Events dmrollout records on a DecisionModel (beside the failure
    reasons above, which an Event may carry too)."""

    RESOLVED = "Resolved"
    CACHED = "Cached"
    MODEL_READY = "ModelReady"
    EVALUATED = "Evaluated"
    AWAITING_PROMOTION = "AwaitingPromotion"
    PROMOTED = "Promoted"
    ROLLED_BACK = "RolledBack"
    FAILED = "Failed"
    SUPERSEDED = "Superseded"
    APPROVAL_REJECTED = "ApprovalRejected"
    RUNTIME_UPDATE_AVAILABLE = "RuntimeUpdateAvailable"
    DEPRECATED_SECRET_LABEL = "DeprecatedSecretLabel"  # seed 001 "Transition"
    REAPED = "Reaped"  # an object of a revision no rollout owns was deleted
    ROLLOUT_RESTARTED = "RolloutRestarted"  # a rollout that ended without a verdict runs again
    ROLLOUT_RESTARTS_EXHAUSTED = "RolloutRestartsExhausted"
    # A running rollout's policy is not the spec's: the controller replaced it.
    POLICY_MISMATCH = "PolicyMismatch"
    # decisionmodel.io/rollback-to taken (status.rollbackTo) and ended by a spec change.
    ROLLBACK_REQUESTED = "RollbackRequested"
    ROLLBACK_SUPERSEDED = "RollbackSuperseded"
    DECISION_RECORDED = "DecisionRecorded"  # a signed decision record was written
    DECISION_RECORD_UNWRITTEN = "DecisionRecordUnwritten"
    EVALUATION_UNDERPOWERED = "EvaluationUnderpowered"


# Failures no retry can fix (seed 001 marks them permanent; DESIGN.md "Things that must hold").
# The activities raise them as non-retryable ApplicationErrors of this type, and the workflow's
# RetryPolicy lists the same set, so the policy holds even if an activity forgot the flag.
# Equal to the reasons of the error classes that are permanent by default (the vocabulary test
# checks it). TagMoved is not a type of its own: the prefetch reports a moved tag as
# DigestMismatch (its message says so). ResourceConflict is not here: it is transient by default
# (removing the foreign object is the fix) and the one final case raises it non-retryable by
# instance.
# Reasons the workflow concludes itself (a phase deadline passed, the gates said no): final,
# but never the type of an activity's error, so not in the RetryPolicy.
WORKFLOW_VERDICTS: Final = frozenset(
    {
        Reason.CACHE_TIMEOUT,
        Reason.START_TIMEOUT,
        Reason.EVALUATION_TIMEOUT,
        Reason.EVALUATION_FAILED,
        Reason.ABORTED,
        Reason.SUPERSEDED,
        Reason.POST_PROMOTION_GATE_FAILED,
        Reason.INCONCLUSIVE_REJECTED,
        Reason.DECISION_TIMEOUT,
    }
)

PERMANENT_REASONS: Final = frozenset(
    {
        Reason.INVALID_MODEL_NAME,
        Reason.MODEL_NOT_FOUND,
        Reason.REGISTRY_NOT_ALLOWED,
        Reason.IMAGE_OVERRIDE_NOT_ALLOWED,
        Reason.DIGEST_MISMATCH,
        Reason.DEVICE_MISMATCH,
        Reason.MODEL_LOAD_FAILED,
        Reason.PREFETCH_FAILED,
        Reason.DATASET_INVALID,
        Reason.RUNTIME_REQUEST_REJECTED,
        Reason.RUNTIME_ANSWER_INVALID,
        Reason.DECISION_MODEL_GONE,
        Reason.INVALID_DIGEST,
        Reason.INVALID_REVISION_PARAMS,
        Reason.INVALID_EVALUATION_POLICY,
        Reason.POLICY_MISMATCH,
        Reason.PLACEMENT_REFUSED,
    }
)

# Who owns which condition (DESIGN "Status has clear owners"): each side applies only its own
# under its field manager, so neither write removes the other's.
ROLLOUT_CONDITION_TYPES: Final = frozenset(
    {
        ConditionType.RESOLVED,
        ConditionType.CACHED,
        ConditionType.EVALUATED,
        ConditionType.PROMOTED,
        ConditionType.CLEANUP_PENDING,
    }
)
# RuntimeUpdateAvailable is the controller's too, but written only while it holds: an apply that
# leaves it out removes it, so it is not among the conditions carried over from status.
CONTROLLER_CONDITION_TYPES: Final = frozenset(
    {
        ConditionType.READY,
        ConditionType.DEGRADED,
        ConditionType.MODEL_READY,
        ConditionType.RUNTIME_UPDATE_AVAILABLE,
        ConditionType.TEMPORAL_REACHABLE,
        ConditionType.STALLED,
        ConditionType.RECONCILING,
        ConditionType.ROLLBACK_TO,
    }
)
# Of those, the ones written only while they hold: left out of a write, they are removed.
CONTROLLER_WHILE_HELD: Final = frozenset(
    {
        ConditionType.RUNTIME_UPDATE_AVAILABLE,
        ConditionType.TEMPORAL_REACHABLE,
        ConditionType.STALLED,
        ConditionType.RECONCILING,
        ConditionType.ROLLBACK_TO,
    }
)

# The phases a rollout is in while it runs (a rollout's steps write them; the controller writes
# Pending, Ready and Degraded itself).
ROLLOUT_PHASES: Final = frozenset(
    {
        Phase.RESOLVING,
        Phase.CACHING,
        Phase.STARTING,
        Phase.EVALUATING,
        Phase.AWAITING_PROMOTION,
        Phase.PROMOTING,
    }
)

# The readiness gate's reasons, in the order the gate checks them (REFERENCE.md "Readiness
# gate"): True only with ModelReady.
GATE_REASONS: Final = (
    Reason.DIGEST_MISMATCH,
    Reason.DEVICE_MISMATCH,
    Reason.NOT_PINNED,
    Reason.PROBE_ERROR,
    Reason.MODEL_READY,
)

# Pod condition types of Kubernetes itself that the gate logic reads.
POD_READY: Final = "Ready"
POD_CONTAINERS_READY: Final = "ContainersReady"
POD_SCHEDULED: Final = "PodScheduled"
POD_UNSCHEDULABLE: Final = "Unschedulable"  # the scheduler's PodScheduled=False reason
# Job condition types of Kubernetes itself: the Job has failed for good (FailureTarget first).
JOB_FAILED: Final = "Failed"
JOB_FAILURE_TARGET: Final = "FailureTarget"


class Gate(enum.StrEnum):
    """Evaluation gates: the spec's (and status's) wire names."""

    MIN_ACCURACY = "minAccuracy"
    MAX_ACCURACY_DROP = "maxAccuracyDrop"
    MAX_ECE = "maxECE"
    MAX_ECE_INCREASE = "maxECEIncrease"
    MAX_NEGATIVE_FLIP_RATE = "maxNegativeFlipRate"
    SLICES = "slices"  # a gate of spec.rollout.evaluation.slices, on one slice


# Failures a user fixes while the rollout waits (label the Secret, create the dataset, remove
# the foreign object, bring the registry back or name it with the right scheme): the step is
# retried until its deadline, and says so at once (seed 001: "the condition appears at once;
# the operator goes on about 60 s after the fix").
GUARD_REASONS: Final = frozenset(
    {
        Reason.SECRET_NOT_ALLOWED,
        Reason.API_KEY_INVALID,
        Reason.SECRET_NOT_FOUND,
        Reason.DATASET_NOT_FOUND,
        Reason.RESOURCE_CONFLICT,
        Reason.REGISTRY_UNAVAILABLE,
        Reason.REGISTRY_ERROR,
    }
)

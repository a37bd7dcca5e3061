"""Condition types, reasons, and the one helper every status writer uses to set a condition.

Reasons are the reference operator's (seed 001, "Condition reasons you may see") plus the ones
this project adds for timeouts, queueing and superseded rollouts. They double as the `type` of
non-retryable ApplicationErrors, so an activity failure and the condition it produces share one
name.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final

from decisionmodel.api_status import Condition, ConditionStatus


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


class Reason(enum.StrEnum):
    """Condition reasons (also readiness-gate reasons and ApplicationError types)."""

    # --- seed 001's table ---------------------------------------------------------------
    NO_MODEL_READY_PODS = "NoModelReadyPods"
    REPLICAS_NOT_MODEL_READY = "ReplicasNotModelReady"
    DIGEST_MISMATCH = "DigestMismatch"
    DEVICE_MISMATCH = "DeviceMismatch"
    NOT_PINNED = "NotPinned"
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
    API_KEY_INVALID = "APIKeyInvalid"  # labelled Secret without the referenced key
    ROLLOUT_QUEUED = "RolloutQueued"  # --max-concurrent-rollouts budget exhausted
    CANDIDATE_REJECTED = "CandidateRejected"  # Ready=True while phase RolledBack
    TAG_MOVED = "TagMoved"  # prefetch exit code 5: the tag's manifest changed mid-pull
    NAMESPACE_NOT_WATCHED = "NamespaceNotWatched"  # outside --watch-namespaces

    # --- this project: failures -----------------------------------------------------------
    CACHE_TIMEOUT = "CacheTimeout"
    START_TIMEOUT = "StartTimeout"
    PREFETCH_FAILED = "PrefetchFailed"
    SUPERSEDED = "Superseded"  # a newer revision cancelled this rollout
    REGISTRY_UNAVAILABLE = "RegistryUnavailable"  # transient resolve failure, retried
    DATASET_NOT_FOUND = "DatasetNotFound"  # held in Evaluating until its timeout

    # --- this project: progress and success -----------------------------------------------
    RESOLVING = "Resolving"
    DIGEST_RESOLVED = "DigestResolved"
    DIGEST_PINNED = "DigestPinned"  # spec.digest set, nothing resolved
    PREFETCHING = "Prefetching"
    PREFETCH_SUCCEEDED = "PrefetchSucceeded"
    PODS_STARTING = "PodsStarting"
    MODEL_READY = "ModelReady"  # also the readiness gate's True reason
    EVALUATING = "Evaluating"
    EVALUATION_PASSED = "EvaluationPassed"
    EVALUATION_SKIPPED = "EvaluationSkipped"  # no spec.rollout.evaluation
    AWAITING_PROMOTION = "AwaitingPromotion"
    PROMOTED = "Promoted"
    ROLLOUT_IN_PROGRESS = "RolloutInProgress"
    NO_STABLE_REVISION = "NoStableRevision"  # Ready=False before the first promotion
    SERVING = "Serving"  # Ready=True: the stable revision answers
    AS_EXPECTED = "AsExpected"  # Degraded=False
    RUNTIME_UPDATE_AVAILABLE = "RuntimeUpdateAvailable"


# Failures no retry can fix (seed 001 marks them permanent; DESIGN.md "Things that must hold"):
# activities raise them as non-retryable ApplicationErrors of this type.
PERMANENT_REASONS: Final = frozenset(
    {
        Reason.INVALID_MODEL_NAME,
        Reason.MODEL_NOT_FOUND,
        Reason.REGISTRY_NOT_ALLOWED,
        Reason.IMAGE_OVERRIDE_NOT_ALLOWED,
        Reason.DIGEST_MISMATCH,
        Reason.TAG_MOVED,
        Reason.DATASET_INVALID,
    }
)


def condition(
    type_: ConditionType | str,
    status: bool | ConditionStatus,
    reason: Reason | str,
    message: str = "",
    observed_generation: int | None = None,
) -> Condition:
    """Build a condition; `lastTransitionTime` is filled in by `set_condition`."""
    if isinstance(status, bool):
        status = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    return Condition(
        type=str(type_),
        status=status,
        reason=str(reason),
        message=message,
        observed_generation=observed_generation,
    )


def _utc_seconds(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    # metav1.Time has whole-second resolution; writing less keeps reads and writes equal.
    return now.astimezone(UTC).replace(microsecond=0)


def set_condition(conditions: list[Condition], new: Condition, now: datetime) -> list[Condition]:
    """Return `conditions` with `new` set, leaving the input list untouched.

    As meta.SetStatusCondition does: lastTransitionTime moves to `now` only when the status
    changes (or the condition is new); a changed reason, message or observedGeneration alone
    keeps the old time. The position of an existing condition is kept so writes diff cleanly.
    """
    now = _utc_seconds(now)
    result: list[Condition] = []
    found = False
    for existing in conditions:
        if existing.type != new.type:
            result.append(existing)
            continue
        found = True
        keep = existing.status == new.status and existing.last_transition_time is not None
        when = existing.last_transition_time if keep else now
        result.append(new.model_copy(update={"last_transition_time": when}))
    if not found:
        result.append(new.model_copy(update={"last_transition_time": now}))
    return result


def get_condition(conditions: Iterable[Condition], type_: ConditionType | str) -> Condition | None:
    for existing in conditions:
        if existing.type == type_:
            return existing
    return None


def is_condition_true(conditions: Iterable[Condition], type_: ConditionType | str) -> bool:
    found = get_condition(conditions, type_)
    return found is not None and found.status == ConditionStatus.TRUE


def remove_condition(conditions: list[Condition], type_: ConditionType | str) -> list[Condition]:
    return [c for c in conditions if c.type != type_]

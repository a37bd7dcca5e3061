"""Typed errors of a rollout, named after the reference operator's condition reasons.

Every error carries ``reason`` (a class constant: exactly the reason name the Go reference
operator writes into conditions and Events, seed 001 "Condition reasons you may see") and
``permanent``. The activities layer maps them one to one onto Temporal
``ApplicationError(message, type=err.reason, non_retryable=err.permanent)``, so a permanent
failure ends the rollout at once and a transient one retries under the activity's RetryPolicy.

Messages name the field or flag involved and the fix; they never carry a secret value (API key,
download token) or dataset content, because they end up in workflow history and Events.
"""

from __future__ import annotations

from typing import ClassVar

from decisionmodel.vocabulary import Reason


class DmrolloutError(Exception):
    """Base of every typed rollout error.

    ``permanent`` is a class default that one instance may override, for a failure whose class is
    usually transient but which retrying cannot fix in this particular case.
    """

    reason: ClassVar[str] = "DmrolloutError"
    permanent: bool = True

    def __init__(
        self,
        message: str,
        *,
        permanent: bool | None = None,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if permanent is not None:
            self.permanent = permanent
        # HTTP status and the runtime's UPPER_SNAKE error code, when the error came from a
        # response; callers branch on them (e.g. the gate tolerates a few 401s in a row).
        self.status = status
        self.code = code

    def __str__(self) -> str:
        return self.message


# --- model name and registry (resolve) -------------------------------------------------------


class InvalidModelName(DmrolloutError):
    """``spec.model`` does not parse as ``[host/][namespace/]model:tag``."""

    reason = Reason.INVALID_MODEL_NAME
    permanent = True


class RegistryNotAllowed(DmrolloutError):
    """The model's registry is not in ``--allowed-registries``, or is http:// without
    ``--allow-insecure-registries`` (the SSRF guard)."""

    reason = Reason.REGISTRY_NOT_ALLOWED
    permanent = True


class ModelNotFound(DmrolloutError):
    """The registry answered 404 for the tag's manifest."""

    reason = Reason.MODEL_NOT_FOUND
    permanent = True


class RegistryError(DmrolloutError):
    """The registry answered, but not with a usable manifest: an unexpected status (401, 403…),
    a body that is not a schema-2 manifest, a refused redirect, a body over the cap."""

    reason = Reason.REGISTRY_ERROR
    permanent = False


class RegistryUnavailable(RegistryError):
    """The registry could not be reached, or kept answering 429/5xx or nothing, past the
    resolver's retry budget: down, unreachable from the worker, or spoken to in the wrong scheme
    (a plain-http registry named without ``http://``). A RegistryError, so callers that handle
    registry failures as one class keep doing so; its own reason tells the two apart."""

    reason = Reason.REGISTRY_UNAVAILABLE
    permanent = False


class DigestMismatch(DmrolloutError):
    """What was pulled or loaded has a different digest than the revision pins."""

    reason = Reason.DIGEST_MISMATCH
    permanent = True


class ModelLoadFailed(DmrolloutError):
    """The runtime refused to load the model on every candidate Pod, check after check."""

    reason = Reason.MODEL_LOAD_FAILED
    permanent = True


class PrefetchFailed(DmrolloutError):
    """The prefetch Job failed for good (backoff limit or deadline exhausted)."""

    reason = Reason.PREFETCH_FAILED
    permanent = True


# --- serving Pods (warmup, inspect, decide) --------------------------------------------------


class DeviceMismatch(DmrolloutError):
    """The runtime loaded the model on another device class than ``spec.device``."""

    reason = Reason.DEVICE_MISMATCH
    permanent = True


class NotPinned(DmrolloutError):
    """The model is loaded but will be evicted (``expires_at`` not null); usually transient."""

    reason = Reason.NOT_PINNED
    permanent = False


class ProbeError(DmrolloutError):
    """Talking to a serving Pod failed: transport error, 401, model not loaded, a bad answer."""

    reason = Reason.PROBE_ERROR
    permanent = False


class QueueFull(DmrolloutError):
    """The runtime kept answering ``503 QUEUE_FULL`` past the client's retry budget."""

    reason = Reason.QUEUE_FULL
    permanent = False


class RuntimeRequestRejected(DmrolloutError):
    """The runtime refused a request as malformed (a 4xx other than 401/429): retrying the same
    request cannot succeed. ``status`` and ``code`` say which (e.g. 422 for a bad state)."""

    reason = Reason.RUNTIME_REQUEST_REJECTED
    permanent = True


class RuntimeAnswerInvalid(DmrolloutError):
    """The runtime answered 2xx with a body that is not the answer contract (not JSON, a number
    beyond what a parser holds, nested too deeply, no ``answers`` object). Permanent for the
    request: REFERENCE.md "a missing answer is wrong", so evaluation counts the case as failed
    instead of retrying it until EvaluationTimeout."""

    reason = Reason.RUNTIME_ANSWER_INVALID
    permanent = True


class StartTimeout(DmrolloutError):
    """Candidate Pods did not pass the readiness gate within ``rollout.timeouts.starting``."""

    reason = Reason.START_TIMEOUT
    permanent = True


# --- evaluation -----------------------------------------------------------------------------


class DatasetInvalid(DmrolloutError):
    """The golden dataset is missing or a line of it is malformed."""

    reason = Reason.DATASET_INVALID
    permanent = True


class EvaluationFailed(DmrolloutError):
    """The candidate did not meet the evaluation gates."""

    reason = Reason.EVALUATION_FAILED
    permanent = True


class EvaluationTimeout(DmrolloutError):
    """Evaluation exceeded ``rollout.timeouts.evaluating``."""

    reason = Reason.EVALUATION_TIMEOUT
    permanent = True


# --- policy and ownership --------------------------------------------------------------------


class ImageOverrideNotAllowed(DmrolloutError):
    """``spec.image`` is set but the operator runs without ``--allow-image-override``."""

    reason = Reason.IMAGE_OVERRIDE_NOT_ALLOWED
    permanent = True


class PlacementRefused(DmrolloutError):
    """The spec asks for a placement (toleration, node selector or affinity key, runtime or
    priority class) or a replica count outside the operator's placement policy
    (``decisionmodel.engine.placement``). Permanent for the rollout that carries it; the controller
    starts none while the spec or the policy refuses it."""

    reason = Reason.PLACEMENT_REFUSED
    permanent = True


class SecretNotAllowed(DmrolloutError):
    """A referenced Secret lacks the label for its capability. Transient: adding the label is
    enough, the reference picks it up within ~60 s without a spec change."""

    reason = Reason.SECRET_NOT_ALLOWED
    permanent = False


class APIKeyInvalid(DmrolloutError):
    """The labelled API-key Secret lacks the referenced key or holds an empty one (fixed by
    editing the Secret, transient), or holds one no HTTP header can carry: non-ASCII or control
    characters (raised non-retryable by instance: every attempt would fail the same way)."""

    reason = Reason.API_KEY_INVALID
    permanent = False


class ResourceConflict(DmrolloutError):
    """An object the rollout needs exists but is not owned by the DecisionModel; it is never
    modified or deleted, and the next attempt proceeds once the user removes it."""

    reason = Reason.RESOURCE_CONFLICT
    permanent = False


# --- moved beside the others: references, inputs (secrets, resolve, evaluate) ---------------


class DatasetNotFound(DmrolloutError):
    """The dataset ConfigMap or Secret, or its key, does not exist (yet). Transient: the
    rollout stays in Evaluating until the user creates it or the phase times out."""

    reason = Reason.DATASET_NOT_FOUND
    permanent = False


class SecretNotFound(DmrolloutError):
    """A referenced Secret (other than the API key's or a dataset's) or its key is missing."""

    reason = Reason.SECRET_NOT_FOUND
    permanent = False


class SecretReadFailed(DmrolloutError):
    """The API server refused or failed the read (RBAC, overload); retried."""

    reason = Reason.SECRET_READ_FAILED
    permanent = False


class InvalidDigest(DmrolloutError):
    """A digest in the workflow input is not 64 hex (the CRD refuses it; a hand-made input
    may not)."""

    reason = Reason.INVALID_DIGEST
    permanent = True


class InvalidEvaluationPolicy(DmrolloutError):
    """A gate threshold is not a decimal string in [0, 1] (the CRD refuses it; a hand-made
    workflow input may not)."""

    reason = Reason.INVALID_EVALUATION_POLICY
    permanent = True


class InvalidRevisionParams(DmrolloutError):
    """The renderers refuse the revision (a name, digest or passthrough fragment that cannot be
    rendered): retrying the same input cannot succeed."""

    reason = Reason.INVALID_REVISION_PARAMS
    permanent = True


class PolicyMismatch(DmrolloutError):
    """The policy a rollout enforces (evaluation, gates, promotion mode, approval) is not the
    live DecisionModel's: a hand-started workflow, or a policy changed under a running rollout.
    Checked before evaluating and before promoting; retrying the same input cannot succeed."""

    reason = Reason.POLICY_MISMATCH
    permanent = True


# --- decision records (issue 38) ---------------------------------------------------------------


class DecisionRecordUnwritten(DmrolloutError):
    """The signed decision record could not be written (the signing key Secret is missing or
    unusable, the records namespace refuses the worker): transient, fixing it is the cure."""

    reason = Reason.DECISION_RECORD_UNWRITTEN
    permanent = False


ALL_ERRORS: tuple[type[DmrolloutError], ...] = (
    DecisionRecordUnwritten,
    InvalidModelName,
    RegistryNotAllowed,
    ModelNotFound,
    RegistryError,
    RegistryUnavailable,
    DigestMismatch,
    PrefetchFailed,
    DeviceMismatch,
    ModelLoadFailed,
    NotPinned,
    ProbeError,
    QueueFull,
    RuntimeRequestRejected,
    RuntimeAnswerInvalid,
    StartTimeout,
    DatasetInvalid,
    EvaluationFailed,
    EvaluationTimeout,
    ImageOverrideNotAllowed,
    PlacementRefused,
    SecretNotAllowed,
    APIKeyInvalid,
    ResourceConflict,
    DatasetNotFound,
    SecretNotFound,
    SecretReadFailed,
    InvalidDigest,
    InvalidEvaluationPolicy,
    InvalidRevisionParams,
    PolicyMismatch,
)
"""Every concrete error, for code that maps a Temporal failure ``type`` back to its class."""

ERRORS_BY_REASON: dict[str, type[DmrolloutError]] = {cls.reason: cls for cls in ALL_ERRORS}

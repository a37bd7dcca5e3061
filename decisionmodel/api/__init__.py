"""The `DecisionModel` resource (`decisionmodel.io/v1alpha1`): the top-level model and the
public names of the API package.

The spec lives in `spec.py`, the status in `status.py`; import either from here.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from pydantic import Field, ModelWrapValidatorHandler, ValidationError, model_validator

from decisionmodel.api.spec import (
    DIGEST_PATTERN,
    MSG_DATASET_ONE_SOURCE,
    MSG_DECIMAL_RANGE,
    MSG_EVALUATION_GATED,
    MSG_IMAGE_RUNTIME_VERSION,
    MSG_MANUAL_PROMOTION_CONFLICT,
    MSG_MODEL_TAG,
    MSG_READ_ONLY_MANY,
    MSG_SECRET_OPTIONAL,
    MSG_TIMEOUT_RANGE,
    RUNTIME_VERSION_PATTERN,
    AccessMode,
    AuthSpec,
    CacheSpec,
    ConfigMapKeySelector,
    DatasetRef,
    DecisionModelSpec,
    DurationError,
    EvaluationSpec,
    Promotion,
    RolloutSpec,
    SchedulingSpec,
    SecretKeySelector,
    Timeouts,
    WireModel,
    format_duration,
    parse_duration,
)
from decisionmodel.api.status import (
    Condition,
    DecisionModelStatus,
    EvaluationGates,
    EvaluationResult,
    EvaluationStatus,
    FailedRevisionStatus,
    Phase,
    ReplicasStatus,
    RevisionStatus,
)
from decisionmodel.vocabulary import ConditionStatus, Device, Engine

GROUP: Final = "decisionmodel.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "DecisionModel"
LIST_KIND: Final = "DecisionModelList"
PLURAL: Final = "decisionmodels"
SINGULAR: Final = "decisionmodel"
SHORT_NAME: Final = "dm"
CATEGORY: Final = "dmrollout"

# The prefetch Job `<dm>-pf-<16 hex revision>` must fit in 63 characters (a Job's name becomes
# the value of its `job-name` label): 63 - len("-pf-") - 16 = 43, the reference's limit.
MAX_NAME_LENGTH: Final = 43
NAME_PATTERN: Final = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
MSG_NAME_LENGTH: Final = (
    f"metadata.name must be at most {MAX_NAME_LENGTH} characters "
    "(room for the -<revision> suffixes of the objects it owns)"
)
MSG_NAME_DNS1035: Final = (
    "metadata.name must be a DNS-1035 label: lowercase letters, digits and '-', "
    "starting with a letter and ending with a letter or digit"
)


class ObjectMeta(WireModel):
    """The part of metav1.ObjectMeta the project reads."""

    name: str = Field(description="Name, unique in the namespace.")
    namespace: str | None = Field(default=None, description="Namespace.")
    uid: str | None = Field(default=None, description="UID, for owner references.")
    generation: int | None = Field(default=None, description="Spec generation.")
    resource_version: str | None = Field(default=None, description="For optimistic concurrency.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")


class DecisionModelInvalid(ValueError):
    """An object that is not a valid DecisionModel; `errors` holds (field path, message)."""

    def __init__(self, name: str, errors: list[tuple[str, str]]) -> None:
        self.name = name
        self.errors = errors
        detail = "; ".join(f"{path}: {message}" for path, message in errors)
        super().__init__(f"DecisionModel {name} is invalid: {detail}")


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path or "<root>"


def number_beyond_double(data: Any) -> str | None:
    """The wire path of the first integer too large for a float64, if any (iterative: the
    object may be nested deeper than Python's recursion limit)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                float(value)
            except OverflowError:
                return path or "<root>"
        elif isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
    return None


# Deeper than this, a DecisionModel is refused: its free-form fields (resources, affinity,
# tolerations) are copied into Pods and serialised again, and pydantic's serialiser stops at
# about 255 levels ("Maximum serialization depth exceeded"; make fuzz). No real spec nests
# beyond a dozen.
MAX_NESTING: Final = 64


def nesting_beyond(data: Any, limit: int = MAX_NESTING) -> str | None:
    """The wire path of the first value nested deeper than ``limit``, if any (iterative)."""
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        path, value, depth = stack.pop()
        if depth > limit:
            return path or "<root>"
        if isinstance(value, dict):
            stack.extend(
                (f"{path}.{k}" if path else str(k), v, depth + 1) for k, v in value.items()
            )
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(value))
    return None


def _field_of(deep: str) -> str:
    """The field a too-deep path runs away under: its leading parts up to where one part starts
    repeating (``a[0].a[0]...``), at least the first 3 and at most 8, so the message names the
    key that holds the nesting (an unknown key under spec.rollout.evaluation, say)."""
    parts = deep.split(".")
    keep = len(parts)
    for i in range(len(parts) - 1):
        if parts[i] == parts[i + 1]:
            keep = i
            break
    return ".".join(parts[: min(max(keep, 3), 8)])


def _clean_message(message: str) -> str:
    # pydantic prefixes messages raised from validators; the shared text is what matters.
    return message.removeprefix("Value error, ")


class DecisionModel(WireModel):
    """A DecisionModel custom resource."""

    api_version: Literal["decisionmodel.io/v1alpha1"] = Field(
        default="decisionmodel.io/v1alpha1", description="decisionmodel.io/v1alpha1."
    )
    kind: Literal["DecisionModel"] = Field(default=KIND, description="DecisionModel.")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: DecisionModelSpec = Field(description="Desired state.")
    status: DecisionModelStatus = Field(
        default_factory=DecisionModelStatus, description="Observed state."
    )

    @model_validator(mode="before")
    @classmethod
    def _numbers_fit_a_double(cls, data: Any) -> Any:
        # The API server decodes every JSON number of an object, passthrough and unknown fields
        # included, as an int64 or a float64; a larger one makes the whole request undecodable
        # ("cannot unmarshal number"). Refuse it here too, naming where it is (make fuzz).
        where = number_beyond_double(data)
        if where is not None:
            raise ValueError(f"{where}: the number is beyond the range of a double")
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _not_nested_too_deeply(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        # After the fields: a field that is wrong anyway (a nested list for a Secret's name) is
        # reported by its own error, naming it; only a valid object is then held to the depth.
        model = handler(data)
        deep = nesting_beyond(data)
        if deep is not None:
            field = _field_of(deep)  # the field, not 64 levels of its path
            raise ValueError(
                f"{field}: nested deeper than {MAX_NESTING} levels; dmrollout refuses such an "
                "object (flatten the field)"
            )
        return model

    @model_validator(mode="after")
    def _name_fits(self) -> DecisionModel:
        if len(self.metadata.name) > MAX_NAME_LENGTH:
            raise ValueError(MSG_NAME_LENGTH)
        if not re.fullmatch(NAME_PATTERN, self.metadata.name):
            raise ValueError(MSG_NAME_DNS1035)
        return self

    @classmethod
    def from_k8s(cls, obj: dict[str, Any]) -> DecisionModel:
        """Validate an object as returned by the API server (camelCase keys).

        Raises `DecisionModelInvalid` whose message names every bad field by its wire path,
        e.g. `spec.rollout.evaluation.minAccuracy`.
        """
        try:
            return cls.model_validate(obj)
        except ValidationError as exc:
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            name = "<unnamed>"
            if isinstance(meta, dict) and meta.get("name"):
                name = f"{meta.get('namespace') or ''}/{meta['name']}".lstrip("/")
            errors = [(_field_path(e["loc"]), _clean_message(e["msg"])) for e in exc.errors()]
            raise DecisionModelInvalid(name, errors) from exc

    @property
    def key(self) -> str:
        """`<namespace>/<name>`, the identity used in workflow IDs and logs."""
        return f"{self.metadata.namespace or ''}/{self.metadata.name}"


__all__ = [
    "API_VERSION",
    "CATEGORY",
    "DIGEST_PATTERN",
    "GROUP",
    "KIND",
    "LIST_KIND",
    "MAX_NAME_LENGTH",
    "MSG_DATASET_ONE_SOURCE",
    "MSG_DECIMAL_RANGE",
    "MSG_EVALUATION_GATED",
    "MSG_IMAGE_RUNTIME_VERSION",
    "MSG_MANUAL_PROMOTION_CONFLICT",
    "MSG_MODEL_TAG",
    "MSG_NAME_DNS1035",
    "MSG_NAME_LENGTH",
    "MSG_READ_ONLY_MANY",
    "MSG_SECRET_OPTIONAL",
    "MSG_TIMEOUT_RANGE",
    "NAME_PATTERN",
    "PLURAL",
    "RUNTIME_VERSION_PATTERN",
    "SHORT_NAME",
    "SINGULAR",
    "VERSION",
    "AccessMode",
    "AuthSpec",
    "CacheSpec",
    "Condition",
    "ConditionStatus",
    "ConfigMapKeySelector",
    "DatasetRef",
    "DecisionModel",
    "DecisionModelInvalid",
    "DecisionModelSpec",
    "DecisionModelStatus",
    "Device",
    "DurationError",
    "Engine",
    "EvaluationGates",
    "EvaluationResult",
    "EvaluationSpec",
    "EvaluationStatus",
    "FailedRevisionStatus",
    "ObjectMeta",
    "Phase",
    "Promotion",
    "ReplicasStatus",
    "RevisionStatus",
    "RolloutSpec",
    "SchedulingSpec",
    "SecretKeySelector",
    "Timeouts",
    "format_duration",
    "parse_duration",
]

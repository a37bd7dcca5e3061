"""The `DecisionModel` spec (`decisionmodel.io/v1alpha1`) as pydantic models.

These models are the single source of the API: the CRD's OpenAPI schema, its CEL rules and
`docs/api.md` are generated from them (`decisionmodel.api.crd`). Every rule the API server enforces
through CEL is mirrored by a pydantic validator with the same message, so an object built or
read in Python is held to the same contract as one admitted by the API server.

Field names are snake_case in Python and camelCase on the wire (`populate_by_name`).
"""

from __future__ import annotations

import enum
import re
from datetime import timedelta
from decimal import Decimal
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from decisionmodel.vocabulary import Device, Engine, Phase

# --- messages shared by the CEL rules (crd.py) and the pydantic validators -----------------

MSG_MODEL_TAG: Final = "model must include an explicit tag, e.g. laya:en"
MSG_IMAGE_RUNTIME_VERSION: Final = "runtimeVersion and image are mutually exclusive"
MSG_EVALUATION_GATED: Final = "promotion EvaluationGated requires rollout.evaluation"
MSG_MANUAL_PROMOTION_CONFLICT: Final = (
    "spec.rollout.manualPromotion and spec.rollout.promotion disagree: manualPromotion: true "
    "means promotion: Manual (and false means not Manual); set only one of them"
)
MSG_DATASET_ONE_SOURCE: Final = "exactly one of configMapRef or secretRef must be set"
MSG_READ_ONLY_MANY: Final = (
    "ReadOnlyMany is not supported: the prefetch Job must write the model store"
)
MSG_TIMEOUT_RANGE: Final = "timeout must be between 1m and 24h"
MSG_DECIMAL_RANGE: Final = 'must be a decimal string between 0 and 1, e.g. "0.90"'
MSG_CONFIDENCE_RANGE: Final = (
    'confidence must be a decimal string above 0.5 and below 0.999, e.g. "0.95"'
)
MSG_SLICES_NEED_CONFIDENCE: Final = (
    "slices needs confidence: slice gates are judged on intervals corrected for the number of "
    'slices; set confidence (e.g. "0.95") or remove slices'
)
MSG_INCONCLUSIVE_NEEDS_CONFIDENCE: Final = (
    "onInconclusive needs confidence: without it the gates compare point values and are "
    'never inconclusive; set confidence (e.g. "0.95") or remove onInconclusive'
)
MSG_SEQUENTIAL_NEEDS_CONFIDENCE: Final = (
    "sequential needs confidence: the sequential test stops when its evidence reaches that "
    'confidence; set confidence (e.g. "0.95") or remove sequential'
)
# With confidence a gate passes only when the whole interval is on its side, and an interval
# always has width: these thresholds could never pass (issue 35, bad input).
MSG_MARGIN_ZERO: Final = (
    "{field} 0 can never pass with confidence set (the interval always reaches above 0): set "
    'a margin above 0 (e.g. "0.02"), or remove confidence to compare point values'
)
MSG_FLOOR_ONE: Final = (
    "{field} 1 can never pass with confidence set (the interval always reaches below 1): set "
    'it below 1 (e.g. "0.99"), or remove confidence to compare point values'
)
# The ceilings judged on an interval (wire names; slices' under slices).
MARGIN_GATES: Final = ("maxAccuracyDrop", "maxECE", "maxECEIncrease", "maxNegativeFlipRate")
MSG_SECRET_OPTIONAL: Final = "optional is not supported: the referenced Secret and key must exist"

# --- patterns (Go RE2 and Rust regex agree on all of them) ---------------------------------

DIGEST_PATTERN: Final = r"^[a-f0-9]{64}$"
# ASCII classes only: pydantic's regex engine reads \d and \s as Unicode classes, Go's RE2 as
# ASCII ones, so `1.2.٣` or a no-break space would pass one side and not the other (make fuzz).
RUNTIME_VERSION_PATTERN: Final = r"^[0-9]+\.[0-9]+\.[0-9]+$"
# A model reference is printable ASCII without spaces (RUNTIME_API.md name grammar).
MODEL_PATTERN: Final = r"^[!-~]+$"
# A decimal in [0, 1] written as a string, so "0.90" survives YAML and JSON unchanged.
DECIMAL_FRACTION_PATTERN: Final = r"^(0(\.[0-9]+)?|1(\.0+)?)$"
# Go duration syntax as `time.ParseDuration` accepts it, minus signs and bare fractions, and
# with at most 5 digits of hours, 6 of minutes, 8 of seconds, 11 of ms, 14 of us, 17 of ns per
# term: at most 16 terms fit in 32 characters, each under 3.6e17 ns, so the sum never leaves
# int64 and the CEL rule's duration() never fails at run time (`99999999999999999999h` made it
# error, found by make fuzz). Every timeout between 1m and 24h is still expressible.
DURATION_PATTERN: Final = (
    r"^(([0-9]{1,5}(\.[0-9]+)?h)|([0-9]{1,6}(\.[0-9]+)?m)|([0-9]{1,8}(\.[0-9]+)?s)"
    r"|([0-9]{1,11}(\.[0-9]+)?ms)|([0-9]{1,14}(\.[0-9]+)?(us|µs|μs))|([0-9]{1,17}(\.[0-9]+)?ns))+$"
)
# Kubernetes resource.Quantity, as in the schema controller-gen emits for it.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
SECRET_KEY_PATTERN: Final = r"^[-._a-zA-Z0-9]+$"

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
# spec.replicas is also the scale subresource's Scale.spec.replicas, an int32: the API server
# refuses a larger value there even though the schema alone would take it.
INT32_MAX: Final = (1 << 31) - 1
MAX_SAFE_JSON_INTEGER: Final = (1 << 53) - 1
MIN_TIMEOUT: Final = timedelta(minutes=1)
MAX_TIMEOUT: Final = timedelta(hours=24)
_MIN_TIMEOUT_NS: Final = MIN_TIMEOUT // timedelta(microseconds=1) * 1000
_MAX_TIMEOUT_NS: Final = MAX_TIMEOUT // timedelta(microseconds=1) * 1000
DEFAULT_MAX_CASES: Final = 500
MAX_MAX_CASES: Final = 5000


def cel_rule(
    rule: str, message: str, field_path: str | None = None, reason: str | None = None
) -> dict[str, str]:
    """One `x-kubernetes-validations` entry; `field_path` points the error at a child field."""
    entry = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return entry


def cel_rules(*rules: dict[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": list(rules)}


# --- Go durations ---------------------------------------------------------------------------

# Nanoseconds per unit, as Go's time package has them.
_DURATION_UNITS: Final[dict[str, int]] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN, as Go accepts
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU, as Go accepts
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION_TERM = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)")
_INT64_LIMIT: Final = 1 << 63


class DurationError(ValueError):
    """A string that is not a Go duration."""


def _go_fraction(digits: str) -> tuple[int, float]:
    """Go's `leadingFraction`: the digits as an integer and their scale; digits past what an
    int64 holds are dropped, not rounded."""
    value, scale = 0, 1.0
    for digit in digits:
        if value > (_INT64_LIMIT - 1) // 10:
            break
        nxt = value * 10 + int(digit)
        if nxt > _INT64_LIMIT:
            break
        value, scale = nxt, scale * 10
    return value, scale


def _go_term(whole: str, fraction: str, unit: int) -> int:
    """One `<number><unit>` term in nanoseconds exactly as Go's `time.ParseDuration` computes
    it: the fraction in float64 and truncated (so `0.016666666666666666h` is 59.999…s, under a
    minute), an int64 overflow an error. The API server's CEL `duration()` is that function,
    so this is what makes the pydantic bounds check agree with the CRD's on every input."""
    value = int(whole) if whole else 0
    if value > _INT64_LIMIT // unit:
        raise OverflowError
    value *= unit
    numerator, scale = _go_fraction(fraction)
    if numerator > 0:
        value += int(float(numerator) * (float(unit) / scale))
        if value > _INT64_LIMIT:
            raise OverflowError
    return value


def go_duration_nanoseconds(text: str) -> int:
    """Parse a Go duration (`30m`, `1h30m`, `90s`, `1.5h`, `-5m`, `0`) into nanoseconds like
    `time.ParseDuration`, out-of-range values included (an error, as in Go).

    Raises `DurationError` (a ValueError) naming the offending input and the accepted units.
    """
    if not isinstance(text, str):
        raise DurationError(f"duration must be a string such as 30m, got {type(text).__name__}")
    rest = text
    sign = 1
    if rest[:1] in ("+", "-"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise DurationError(f"invalid duration {text!r}: empty")
    total = 0
    pos = 0
    while pos < len(rest):
        match = _DURATION_TERM.match(rest, pos)
        if match is None or not (match.group(1) or match.group(2)):
            tail = rest[pos:]
            if re.fullmatch(r"[0-9.]+", tail):
                raise DurationError(f"invalid duration {text!r}: missing unit after {tail!r}")
            raise DurationError(
                f"invalid duration {text!r}: expected <number><unit> terms such as 30m, "
                "1h30m or 90s (units: ns, us, ms, s, m, h)"
            )
        try:
            total += _go_term(match.group(1), match.group(2) or "", _DURATION_UNITS[match.group(3)])
        except OverflowError:
            total = _INT64_LIMIT + 1
        if total > _INT64_LIMIT or (sign > 0 and total == _INT64_LIMIT):
            raise DurationError(f"invalid duration {text!r}: out of range (over 2562047h)")
        pos = match.end()
    return sign * total


def parse_duration(text: str) -> timedelta:
    """A Go duration as a timedelta (nanoseconds rounded half-even to microseconds).

    Raises `DurationError` (a ValueError) naming the offending input and the accepted units.
    """
    nanoseconds = go_duration_nanoseconds(text)
    return timedelta(microseconds=int((Decimal(nanoseconds) / 1000).to_integral_value()))


def format_duration(value: timedelta) -> str:
    """Render a whole-second timedelta the way Go prints durations (`1h30m0s`)."""
    seconds = int(value.total_seconds())
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    hours, remainder = divmod(abs(seconds), 3600)
    minutes, secs = divmod(remainder, 60)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _check_timeout(value: str) -> str:
    if not re.fullmatch(DURATION_PATTERN, value):
        raise ValueError(
            f"invalid duration {value!r}: expected a Go duration such as 30m, 1h30m or 90s"
        )
    try:
        nanoseconds = go_duration_nanoseconds(value)
    except DurationError:
        # The CEL rule's duration() fails on the same input (out of int64 range); the API
        # server then refuses the field with this rule's message.
        raise ValueError(MSG_TIMEOUT_RANGE) from None
    if not _MIN_TIMEOUT_NS <= nanoseconds <= _MAX_TIMEOUT_NS:
        raise ValueError(MSG_TIMEOUT_RANGE)
    return value


def _check_decimal_fraction(value: str) -> str:
    if not re.fullmatch(DECIMAL_FRACTION_PATTERN, value):
        raise ValueError(MSG_DECIMAL_RANGE)
    return value


def _check_model_tag(value: str) -> str:
    if ":" not in value.rsplit("/", 1)[-1] or value.endswith(":"):
        raise ValueError(MSG_MODEL_TAG)
    return value


def _int_to_str(value: Any) -> Any:
    # YAML `size: 10737418240` arrives as an int; a Quantity is kept as its string form. Only an
    # int64: the API server reads a larger JSON integer as a float and refuses it.
    if isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX:
        return str(value)
    return value


def _json_integer(value: Any) -> Any:
    """What the API server takes for `type: integer`: a JSON integer, or a float with an
    integral value within +-(2^53 - 1) (go-openapi's IsFloat64AJSONInteger: `5.0` is 5). Never
    a string or a boolean, which pydantic's lax mode would turn into numbers ("3", true)."""
    if isinstance(value, bool | str):
        raise ValueError("must be an integer, not a string or a boolean")
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= MAX_SAFE_JSON_INTEGER:
            return int(value)
        raise ValueError("must be an integer")
    return value


def _nulls_dropped(value: Any) -> Any:
    # The API server prunes a null map value of a typed map before it validates the object.
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


# CEL runs even when the pattern failed; without the `!matches` guard, duration() would add a
# "type conversion error" to the pattern's own message.
_TIMEOUT_RULE: Final = (
    "!self.matches('" + DURATION_PATTERN.replace("\\", "\\\\") + "') || "
    "(duration(self) >= duration('1m') && duration(self) <= duration('24h'))"
)

# Patterns below are enforced by the validators (for messages that say what is wanted) and
# published to the CRD through json_schema_extra (for the API server).
TimeoutDuration = Annotated[
    str,
    Field(
        max_length=32,
        json_schema_extra={
            "pattern": DURATION_PATTERN,
            **cel_rules(cel_rule(_TIMEOUT_RULE, MSG_TIMEOUT_RANGE)),
        },
    ),
    AfterValidator(_check_timeout),
]

DecimalFraction = Annotated[
    str,
    Field(max_length=16, json_schema_extra={"pattern": DECIMAL_FRACTION_PATTERN}),
    AfterValidator(_check_decimal_fraction),
]

Quantity = Annotated[
    str,
    BeforeValidator(_int_to_str),
    Field(pattern=QUANTITY_PATTERN),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]


def _check_confidence(value: str) -> str:
    if not re.fullmatch(DECIMAL_FRACTION_PATTERN, value) or not (
        Decimal("0.5") < Decimal(value) < Decimal("0.999")
    ):
        raise ValueError(MSG_CONFIDENCE_RANGE)
    return value


ConfidenceLevel = Annotated[
    str,
    Field(
        max_length=16,
        json_schema_extra={
            "pattern": DECIMAL_FRACTION_PATTERN,
            **cel_rules(
                cel_rule(
                    "!self.matches('" + DECIMAL_FRACTION_PATTERN.replace("\\", "\\\\") + "') "
                    "|| (double(self) > 0.5 && double(self) < 0.999)",
                    MSG_CONFIDENCE_RANGE,
                )
            ),
        },
    ),
    AfterValidator(_check_confidence),
]

# An integer field as the API server reads it (see _json_integer).
JsonInt = Annotated[int, BeforeValidator(_json_integer)]

ModelName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=512,
        pattern=MODEL_PATTERN,
        json_schema_extra=cel_rules(
            cel_rule(
                "self.substring(self.lastIndexOf('/') + 1).contains(':') && !self.endsWith(':')",
                MSG_MODEL_TAG,
            )
        ),
    ),
    AfterValidator(_check_model_tag),
]


def decimal_or_none(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


# --- enums ----------------------------------------------------------------------------------


class AccessMode(enum.StrEnum):
    """A PersistentVolumeClaim access mode for the model store."""

    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_WRITE_MANY = "ReadWriteMany"
    # Listed so the API server can answer it with MSG_READ_ONLY_MANY rather than a bare enum
    # error: the prefetch Job must write the store, so a read-only store can never be filled.
    READ_ONLY_MANY = "ReadOnlyMany"


class OnInconclusive(enum.StrEnum):
    """What an evaluation whose intervals decide no gate leads to."""

    HOLD = "Hold"
    REJECT = "Reject"
    PROMOTE = "Promote"


class Promotion(enum.StrEnum):
    """How a candidate that passed its checks receives traffic."""

    AUTOMATIC = "Automatic"
    EVALUATION_GATED = "EvaluationGated"
    MANUAL = "Manual"


# --- models ---------------------------------------------------------------------------------


class WireModel(BaseModel):
    """Base of every API model: camelCase on the wire, snake_case in Python.

    Unknown fields are ignored, not refused: the API server prunes them anyway, and a newer CRD
    installed ahead of an older controller must not make every object unreadable.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_absent(cls, data: Any) -> Any:
        # The API server prunes a null field (none is `nullable` in the CRD) before defaulting
        # and validation: `replicas: null` is stored as the default 1. Read it the same way.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    def to_wire(self, *, exclude_none: bool = True) -> dict[str, Any]:
        """The JSON-ready wire form (camelCase keys, enums as strings)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=exclude_none)


class SecretKeySelector(WireModel):
    """A key of a Secret in the DecisionModel's namespace."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel_rule("!has(self.optional) || !self.optional", MSG_SECRET_OPTIONAL, ".optional")
        )
    )

    name: str = Field(min_length=1, max_length=253, description="Name of the Secret.")
    key: str = Field(
        min_length=1,
        max_length=253,
        pattern=SECRET_KEY_PATTERN,
        description="Key inside the Secret.",
    )
    optional: StrictBool | None = Field(
        default=None,
        description="Refused when true: the operator needs the Secret and key to exist.",
    )

    @model_validator(mode="after")
    def _not_optional(self) -> SecretKeySelector:
        if self.optional:
            raise ValueError(MSG_SECRET_OPTIONAL)
        return self


class ConfigMapKeySelector(WireModel):
    """A key of a ConfigMap in the DecisionModel's namespace."""

    name: str = Field(min_length=1, max_length=253, description="Name of the ConfigMap.")
    key: str = Field(
        min_length=1,
        max_length=253,
        pattern=SECRET_KEY_PATTERN,
        description="Key inside the ConfigMap.",
    )


class DatasetRef(WireModel):
    """Where the golden dataset (JSONL) is read from: exactly one of a ConfigMap or a Secret."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel_rule(
                "(has(self.configMapRef) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) == 1",
                MSG_DATASET_ONE_SOURCE,
            )
        )
    )

    config_map_ref: ConfigMapKeySelector | None = Field(
        default=None, description="The dataset as a key of a ConfigMap."
    )
    secret_ref: SecretKeySelector | None = Field(
        default=None,
        description=(
            "The dataset as a key of a Secret (for sensitive data); the Secret must carry the "
            'label decisionmodel.io/eval-dataset: "true".'
        ),
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> DatasetRef:
        if (self.config_map_ref is None) == (self.secret_ref is None):
            raise ValueError(MSG_DATASET_ONE_SOURCE)
        return self


def _margin_rules(fields: tuple[str, ...], guard: str) -> list[dict[str, str]]:
    """CEL: each ceiling in ``fields`` above 0 and minAccuracy below 1 when ``guard`` holds (the
    gates are judged on intervals)."""
    rules = [
        cel_rule(
            f"{guard}!has(self.{f}) || double(self.{f}) > 0.0",
            MSG_MARGIN_ZERO.format(field=f),
            f".{f}",
        )
        for f in fields
    ]
    floor = cel_rule(
        f"{guard}!has(self.minAccuracy) || double(self.minAccuracy) < 1.0",
        MSG_FLOOR_ONE.format(field="minAccuracy"),
        ".minAccuracy",
    )
    return [*rules, floor]


def _margin_problem(gates: dict[str, str | None]) -> str | None:
    """The pydantic side of :func:`_margin_rules` (``gates``: wire name → value)."""
    for name, value in gates.items():
        if value is None:
            continue
        if name == "minAccuracy" and Decimal(value) >= 1:
            return MSG_FLOOR_ONE.format(field=name)
        if name != "minAccuracy" and Decimal(value) <= 0:
            return MSG_MARGIN_ZERO.format(field=name)
    return None


class SliceGatesSpec(WireModel):
    """Gates applied to each slice of the golden set (cases carrying ``"slice": "<name>"``).
    Slices need confidence, so their gates are always judged on intervals."""

    model_config = ConfigDict(json_schema_extra=cel_rules(*_margin_rules(("maxAccuracyDrop",), "")))

    min_accuracy: DecimalFraction | None = Field(
        default=None, description="Lowest accepted accuracy of every slice, in [0, 1]."
    )
    max_accuracy_drop: DecimalFraction | None = Field(
        default=None,
        description="Largest accepted accuracy drop against the stable on every slice, in [0, 1].",
    )
    min_cases: JsonInt = Field(
        default=30,
        ge=1,
        le=MAX_MAX_CASES,
        description="A slice with fewer cases is reported, not gated.",
    )

    @model_validator(mode="after")
    def _gates_can_pass(self) -> SliceGatesSpec:
        gates = {"maxAccuracyDrop": self.max_accuracy_drop, "minAccuracy": self.min_accuracy}
        problem = _margin_problem(gates)
        if problem is not None:
            raise ValueError(f"slices: {problem}")
        return self


class EvaluationSpec(WireModel):
    """Golden-dataset evaluation of a candidate and the gates it must pass before promotion."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel_rule(
                "!has(self.onInconclusive) || has(self.confidence)",
                MSG_INCONCLUSIVE_NEEDS_CONFIDENCE,
                ".onInconclusive",
            ),
            cel_rule(
                "!has(self.slices) || has(self.confidence)", MSG_SLICES_NEED_CONFIDENCE, ".slices"
            ),
            *_margin_rules(MARGIN_GATES, "!has(self.confidence) || "),
            cel_rule(
                "!has(self.sequential) || !self.sequential || has(self.confidence)",
                MSG_SEQUENTIAL_NEEDS_CONFIDENCE,
                ".sequential",
            ),
        )
    )

    dataset_ref: DatasetRef = Field(description="The golden dataset (JSONL, at most 1 MiB).")
    min_accuracy: DecimalFraction = Field(
        description='Lowest accepted accuracy, a decimal string in [0, 1] such as "0.90".'
    )
    max_accuracy_drop: DecimalFraction | None = Field(
        default=None,
        description=(
            "Largest accepted accuracy drop against the stable revision on the same dataset, "
            "a decimal string in [0, 1]."
        ),
    )
    max_ece: DecimalFraction | None = Field(
        default=None,
        alias="maxECE",
        description="Largest accepted expected calibration error (10 bins), in [0, 1].",
    )
    max_ece_increase: DecimalFraction | None = Field(
        default=None,
        alias="maxECEIncrease",
        description="Largest accepted ECE increase against the stable revision, in [0, 1].",
    )
    max_cases: JsonInt = Field(
        default=DEFAULT_MAX_CASES,
        ge=1,
        le=MAX_MAX_CASES,
        description="Number of dataset lines evaluated (the first ones).",
    )
    max_negative_flip_rate: DecimalFraction | None = Field(
        default=None,
        description=(
            "Largest accepted share of cases the stable revision answers right and the "
            "candidate wrong (same dataset, same run), in [0, 1]."
        ),
    )
    confidence: ConfidenceLevel | None = Field(
        default=None,
        description=(
            'Judge every gate on its confidence interval at this level (e.g. "0.95"): pass '
            "when the whole interval is on the right side, fail when it is on the wrong side, "
            "inconclusive when it straddles. Unset: the gates compare point values."
        ),
    )
    on_inconclusive: OnInconclusive | None = Field(
        default=None,
        description=(
            "With confidence: what an inconclusive evaluation does. Hold (default) parks the "
            "candidate in AwaitingPromotion with the evidence until dmrollout promote or reject "
            "(or timeouts.decision rejects it); Reject rolls it back; Promote promotes it when "
            "every undecided gate's estimate passes (never more often than the point gate), "
            "else holds it as Hold does."
        ),
    )

    slices: SliceGatesSpec | None = Field(
        default=None,
        description=(
            "With confidence: gates per slice of the golden set (cases with a slice name), "
            "each slice's interval at a confidence corrected for the number of slices compared "
            "(Bonferroni)."
        ),
    )
    sequential: bool | None = Field(
        default=None,
        description=(
            "With confidence: judge every gate after every case by sequential tests whose "
            "error stays within (1 - confidence) / 2 however often they look (each slice's at "
            "its Bonferroni share), stop as soon as they decide, and continue the same tests "
            "when the revision is evaluated again on the same dataset with cases appended "
            "(status.evaluationLedger)."
        ),
    )

    @model_validator(mode="after")
    def _inconclusive_needs_confidence(self) -> EvaluationSpec:
        if self.on_inconclusive is not None and self.confidence is None:
            raise ValueError(MSG_INCONCLUSIVE_NEEDS_CONFIDENCE)
        if self.sequential and self.confidence is None:
            raise ValueError(MSG_SEQUENTIAL_NEEDS_CONFIDENCE)
        if self.slices is not None and self.confidence is None:
            raise ValueError(MSG_SLICES_NEED_CONFIDENCE)
        if self.confidence is not None:
            gates = {
                "maxAccuracyDrop": self.max_accuracy_drop,
                "maxECE": self.max_ece,
                "maxECEIncrease": self.max_ece_increase,
                "maxNegativeFlipRate": self.max_negative_flip_rate,
                "minAccuracy": self.min_accuracy,
            }
            problem = _margin_problem(gates)
            if problem is not None:
                raise ValueError(problem)
        return self

    @property
    def min_accuracy_value(self) -> Decimal:
        return Decimal(self.min_accuracy)

    @property
    def max_accuracy_drop_value(self) -> Decimal | None:
        return decimal_or_none(self.max_accuracy_drop)

    @property
    def max_ece_value(self) -> Decimal | None:
        return decimal_or_none(self.max_ece)

    @property
    def max_ece_increase_value(self) -> Decimal | None:
        return decimal_or_none(self.max_ece_increase)

    @property
    def needs_baseline(self) -> bool:
        """A relative gate is set, so the stable revision is evaluated on the same dataset."""
        return (
            self.max_accuracy_drop is not None
            or self.max_ece_increase is not None
            or self.max_negative_flip_rate is not None
            or self.confidence is not None
        )


def _timeout_field(default: str, phase: str) -> Any:
    return Field(
        default=default,
        description=(
            f"Deadline of the {phase} phase as a Go duration (e.g. {default}, 1h30m); "
            "between 1m and 24h."
        ),
    )


class Timeouts(WireModel):
    """Progress deadlines of the rollout phases; exceeding one fails the candidate."""

    caching: TimeoutDuration = _timeout_field("30m", Phase.CACHING)
    starting: TimeoutDuration = _timeout_field("10m", Phase.STARTING)
    evaluating: TimeoutDuration = _timeout_field("10m", Phase.EVALUATING)
    decision: TimeoutDuration = Field(
        default="24h",
        description=(
            "How long a candidate held on an inconclusive evaluation (onInconclusive: Hold, or "
            "Promote with an undecided estimate that fails) "
            "waits for dmrollout promote or reject before it is rejected, as a Go duration "
            "between 1m and 24h."
        ),
    )

    @property
    def caching_duration(self) -> timedelta:
        return parse_duration(self.caching)

    @property
    def starting_duration(self) -> timedelta:
        return parse_duration(self.starting)

    @property
    def evaluating_duration(self) -> timedelta:
        return parse_duration(self.evaluating)

    @property
    def decision_duration(self) -> timedelta:
        return parse_duration(self.decision)


class RolloutSpec(WireModel):
    """How a new revision is checked and promoted."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel_rule(
                "!has(self.promotion) || self.promotion != 'EvaluationGated' "
                "|| has(self.evaluation)",
                MSG_EVALUATION_GATED,
                ".promotion",
            ),
            cel_rule(
                "!has(self.manualPromotion) || !has(self.promotion) "
                "|| self.manualPromotion == (self.promotion == 'Manual')",
                MSG_MANUAL_PROMOTION_CONFLICT,
                ".manualPromotion",
            ),
        )
    )

    evaluation: EvaluationSpec | None = Field(
        default=None,
        description="Golden-dataset evaluation; without it promotion follows ModelReady.",
    )
    promotion: Promotion | None = Field(
        default=None,
        description=(
            "Automatic, EvaluationGated or Manual. Default: EvaluationGated when evaluation is "
            "set, else Automatic. Manual parks a candidate in AwaitingPromotion until approved "
            "(the first revision is never held)."
        ),
    )
    manual_promotion: bool | None = Field(
        default=None,
        description=(
            "The reference operator's switch: true is promotion: Manual (the candidate that "
            "passed its gates waits in AwaitingPromotion for an approval), false is the default "
            "mode. Refused together with a promotion that says otherwise."
        ),
    )
    timeouts: Timeouts = Field(
        default_factory=Timeouts, description="Progress deadlines of the rollout phases."
    )
    post_promotion_watch: TimeoutDuration | None = Field(
        default=None,
        description=(
            "Optional window after a promotion (a Go duration, 1m to 24h) during which the "
            "previous revision keeps running and the new stable's readiness gate is watched; "
            "if it fails there, the Service returns to the previous revision and the new one "
            "is rolled back with reason PostPromotionGateFailed. A failure still being judged "
            "when it ends (a Pod not answering, no Pod passing) keeps it going until decided, "
            "at most the controller's probe-error window (180 s) more. Off when unset."
        ),
    )

    @model_validator(mode="after")
    def _gated_needs_evaluation(self) -> RolloutSpec:
        if self.promotion is Promotion.EVALUATION_GATED and self.evaluation is None:
            raise ValueError(MSG_EVALUATION_GATED)
        manual = self.manual_promotion
        disagree = manual is not None and manual != (self.promotion is Promotion.MANUAL)
        if disagree and self.promotion is not None:
            raise ValueError(MSG_MANUAL_PROMOTION_CONFLICT)
        return self

    @property
    def post_promotion_watch_seconds(self) -> int | None:
        if self.post_promotion_watch is None:
            return None
        return int(parse_duration(self.post_promotion_watch).total_seconds())

    @property
    def effective_promotion(self) -> Promotion:
        if self.promotion is not None:
            return self.promotion
        if self.manual_promotion:  # the reference's spelling of promotion: Manual
            return Promotion.MANUAL
        if self.evaluation is not None:
            return Promotion.EVALUATION_GATED
        return Promotion.AUTOMATIC


class SchedulingSpec(WireModel):
    """Pod placement for the serving and prefetch Pods, within the operator's placement
    policy (decisionmodel.engine.placement: refused fields show as PlacementRefused). Part of the
    revision."""

    node_selector: Annotated[dict[str, str] | None, BeforeValidator(_nulls_dropped)] = Field(
        default=None, description="Node labels the Pods must match (PodSpec.nodeSelector)."
    )
    tolerations: list[dict[str, Any]] | None = Field(
        default=None, description="Taints the Pods tolerate (PodSpec.tolerations, passthrough)."
    )
    affinity: dict[str, Any] | None = Field(
        default=None, description="Node and Pod affinity (PodSpec.affinity, passthrough)."
    )
    runtime_class_name: str | None = Field(
        default=None, min_length=1, max_length=253, description="PodSpec.runtimeClassName."
    )
    priority_class_name: str | None = Field(
        default=None, min_length=1, max_length=253, description="PodSpec.priorityClassName."
    )

    def is_empty(self) -> bool:
        """No placement constraint at all (empty maps and lists count as unset)."""
        return not (
            self.node_selector
            or self.tolerations
            or self.affinity
            or self.runtime_class_name
            or self.priority_class_name
        )


class CacheSpec(WireModel):
    """The per-revision model store PVC `<dm>-store-<rev>`. Changed in place, not a revision."""

    size: Quantity = Field(default="10Gi", description="Requested PVC size (a quantity).")
    storage_class_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="StorageClass of the store PVC; unset uses the cluster default.",
    )
    access_modes: list[AccessMode] = Field(
        default=[AccessMode.READ_WRITE_ONCE],
        min_length=1,
        max_length=3,
        description=(
            "PVC access modes. ReadWriteMany is needed for replicas > 1 across nodes; "
            "ReadOnlyMany is refused (the prefetch Job writes the store)."
        ),
        json_schema_extra={
            "x-kubernetes-list-type": "set",
            **cel_rules(cel_rule("!self.exists(m, m == 'ReadOnlyMany')", MSG_READ_ONLY_MANY)),
        },
    )
    download_token_secret_ref: SecretKeySelector | None = Field(
        default=None,
        description=(
            "Token for the weight host, given to the prefetch Job only; the Secret must carry "
            'the label decisionmodel.io/download-token: "true".'
        ),
    )

    @field_validator("access_modes")
    @classmethod
    def _no_read_only_many(cls, value: list[AccessMode]) -> list[AccessMode]:
        if AccessMode.READ_ONLY_MANY in value:
            raise ValueError(MSG_READ_ONLY_MANY)
        if len(set(value)) != len(value):
            # The CRD declares a set-typed list, so the API server refuses duplicates too.
            raise ValueError("accessModes must not repeat a mode")
        return value


class AuthSpec(WireModel):
    """Authentication of the runtime's API."""

    api_key_secret_ref: SecretKeySelector | None = Field(
        default=None,
        description=(
            "The runtime API key (OLLAYA_API_KEY); the Secret must carry the label "
            'decisionmodel.io/api-key: "true".'
        ),
    )


class DecisionModelSpec(WireModel):
    """The desired state: which model serves, where, and how new revisions are rolled out."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel_rule(
                "!(has(self.image) && has(self.runtimeVersion))",
                MSG_IMAGE_RUNTIME_VERSION,
                ".runtimeVersion",
            )
        )
    )

    engine: Engine = Field(default=Engine.OLLAYA, description="The model runtime.")
    model: ModelName = Field(
        description=(
            "The model as [host/][namespace/]name:tag; the tag is required (a bare name would "
            "resolve to :latest, a different artifact)."
        )
    )
    digest: str | None = Field(
        default=None,
        pattern=DIGEST_PATTERN,
        description=(
            "Optional pin: sha256 (64 lowercase hex) of the model manifest. Unset: resolved "
            "from the registry and recorded in status."
        ),
    )
    replicas: StrictInt = Field(
        default=1,
        ge=1,
        le=INT32_MAX,
        description=(
            "Serving Pods of the stable revision; at most the operator's maximum "
            "(DMROLLOUT_MAX_REPLICAS, default 10)."
        ),
    )
    device: Device = Field(default=Device.CPU, description="cpu or cuda.")
    image: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description=(
            "Runtime image override; refused unless the operator runs with "
            "--allow-image-override. Exclusive with runtimeVersion."
        ),
    )
    runtime_version: str | None = Field(
        default=None,
        pattern=RUNTIME_VERSION_PATTERN,
        description="Exact runtime release (x.y.z) to run, e.g. 0.10.0. Exclusive with image.",
    )
    resources: dict[str, Any] = Field(
        default_factory=dict,
        description="Container resources (PodSpec resources, passthrough); part of the revision.",
    )
    scheduling: SchedulingSpec = Field(
        default_factory=SchedulingSpec,
        description=(
            "nodeSelector, tolerations, affinity, runtimeClassName, priorityClassName, within "
            "the operator's placement policy; part of the revision."
        ),
    )
    cache: CacheSpec = Field(default_factory=CacheSpec, description="The model store PVC.")
    auth: AuthSpec = Field(default_factory=AuthSpec, description="Runtime API authentication.")
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec, description="Evaluation, promotion and phase timeouts."
    )

    @model_validator(mode="after")
    def _image_xor_runtime_version(self) -> DecisionModelSpec:
        if self.image is not None and self.runtime_version is not None:
            raise ValueError(MSG_IMAGE_RUNTIME_VERSION)
        return self

    @property
    def effective_promotion(self) -> Promotion:
        return self.rollout.effective_promotion

"""The promotion gates and their verdict.

REFERENCE.md "Evaluation": gates in order, strict (a figure equal to its threshold passes):

1. ``accuracy < minAccuracy`` → fail
2. ``baseline - accuracy > maxAccuracyDrop`` → fail (only with a baseline)
3. ``ece > maxECE`` → fail
4. ``ece - baselineEce > maxECEIncrease`` → fail (only with a baseline)

The first failing gate is the one reported. Thresholds are decimal strings (the CRD's) and are
compared as ``Decimal``. The figures compared are the 4-place decimals written to status
(decimal_format), so the verdict always agrees with what status shows — a status reading
"accuracy 0.9000" never fails "minAccuracy 0.90" — and binary float noise cannot fail a gate:
0.92 - 0.90 is 0.020000000000000018 in floats but exactly 0.0200 here, which passes
``maxAccuracyDrop: "0.02"``. The price is that a figure within 0.00005 below a threshold can
round onto it and pass; at 4 places that is below any meaningful difference.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation, localcontext
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from decisionmodel.errors import EvaluationFailed
from decisionmodel.evaluation.metrics import EvaluationFigures
from decisionmodel.vocabulary import EvaluationResult, Gate, Reason

# status.evaluation.reason and the Evaluated condition's reason (seed 001's reason names).
EVALUATION_FAILED: Final = EvaluationFailed.reason
EVALUATION_PASSED: Final = Reason.EVALUATION_PASSED

GateName = Gate


class EvaluationGates(BaseModel):
    """The thresholds of ``spec.rollout.evaluation``. Built from the CRD's camelCase keys
    (``minAccuracy``…) or the field names; other keys of the spec are ignored, so the whole
    ``evaluation`` object can be passed. Serialises back to the strings as written ("0.90")."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    min_accuracy: Decimal = Field(alias="minAccuracy")
    max_accuracy_drop: Decimal | None = Field(default=None, alias="maxAccuracyDrop")
    max_ece: Decimal | None = Field(default=None, alias="maxECE")
    max_ece_increase: Decimal | None = Field(default=None, alias="maxECEIncrease")
    max_negative_flip_rate: Decimal | None = Field(default=None, alias="maxNegativeFlipRate")

    @field_validator(
        "min_accuracy",
        "max_accuracy_drop",
        "max_ece",
        "max_ece_increase",
        "max_negative_flip_rate",
        mode="before",
    )
    @classmethod
    def _decimal_string(cls, value: Any) -> Any:
        # Thresholds are decimal strings: a float would carry its binary error into the gate
        # (0.1 is 0.1000000000000000055…), so floats are refused rather than converted.
        if value is None or isinstance(value, Decimal):
            parsed = value
        elif isinstance(value, str):
            try:
                parsed = Decimal(value.strip())
            except InvalidOperation:
                raise ValueError('must be a decimal string such as "0.90"') from None
        else:
            raise ValueError('must be a decimal string such as "0.90"')
        if parsed is not None and not (parsed.is_finite() and 0 <= parsed <= 1):
            raise ValueError("must be a decimal in [0, 1]")
        return parsed

    @property
    def needs_baseline(self) -> bool:
        """Whether a relative gate is set, i.e. whether the stable revision must be evaluated
        on the same dataset (REFERENCE.md: only then, and only when a stable exists)."""
        return (
            self.max_accuracy_drop is not None
            or self.max_ece_increase is not None
            or self.max_negative_flip_rate is not None
        )


class GateVerdict(BaseModel):
    """``result`` and ``reason`` for status; ``gate`` names the failing gate (None when passed);
    ``message`` names the gates and the figures compared."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    result: EvaluationResult
    reason: str
    gate: GateName | None = None
    message: str


def evaluate_gates(
    candidate: EvaluationFigures,
    gates: EvaluationGates,
    baseline: EvaluationFigures | None = None,
    negative_flips: Decimal | None = None,
) -> GateVerdict:
    """Apply the gates in order; the first that fails decides. Relative gates are skipped
    without a baseline (and say so in the message). ``negative_flips`` is the 4-place share of
    cases the baseline got right and the candidate wrong (None without a baseline)."""
    # The differences of two 4-place figures in [0, 1] are exact at any precision ≥ 5; a local
    # context keeps a caller's global decimal settings out of the verdict.
    with localcontext(prec=28):
        found = _evaluate(candidate, gates, baseline)
        if found.result != EvaluationResult.PASSED or gates.max_negative_flip_rate is None:
            return found
        return _flips(found, gates.max_negative_flip_rate, negative_flips)


def _flips(passed: GateVerdict, limit: Decimal, rate: Decimal | None) -> GateVerdict:
    if rate is None:
        checked = "maxNegativeFlipRate not checked (no baseline)"
    elif rate > limit:
        return _failed(
            Gate.MAX_NEGATIVE_FLIP_RATE, f"negative flips {rate} > maxNegativeFlipRate {limit}"
        )
    else:
        checked = f"negative flips {rate} <= maxNegativeFlipRate {limit}"
    return passed.model_copy(update={"message": f"{passed.message}; {checked}"})


def _evaluate(
    candidate: EvaluationFigures, gates: EvaluationGates, baseline: EvaluationFigures | None
) -> GateVerdict:
    accuracy = candidate.accuracy_4dp()
    ece = candidate.ece_4dp()
    checked: list[str] = []

    if accuracy < gates.min_accuracy:
        return _failed(Gate.MIN_ACCURACY, f"accuracy {accuracy} < minAccuracy {gates.min_accuracy}")
    checked.append(f"accuracy {accuracy} >= minAccuracy {gates.min_accuracy}")

    if gates.max_accuracy_drop is not None:
        if baseline is None:
            checked.append("maxAccuracyDrop not checked (no baseline)")
        else:
            base = baseline.accuracy_4dp()
            drop = base - accuracy
            figures = f"accuracy drop {drop} (baseline {base} - accuracy {accuracy})"
            if drop > gates.max_accuracy_drop:
                return _failed(
                    Gate.MAX_ACCURACY_DROP, f"{figures} > maxAccuracyDrop {gates.max_accuracy_drop}"
                )
            checked.append(f"{figures} <= maxAccuracyDrop {gates.max_accuracy_drop}")

    if gates.max_ece is not None:
        if ece > gates.max_ece:
            return _failed(Gate.MAX_ECE, f"ECE {ece} > maxECE {gates.max_ece}")
        checked.append(f"ECE {ece} <= maxECE {gates.max_ece}")

    if gates.max_ece_increase is not None:
        if baseline is None:
            checked.append("maxECEIncrease not checked (no baseline)")
        else:
            base_ece = baseline.ece_4dp()
            increase = ece - base_ece
            figures = f"ECE increase {increase} (ECE {ece} - baseline ECE {base_ece})"
            if increase > gates.max_ece_increase:
                return _failed(
                    Gate.MAX_ECE_INCREASE, f"{figures} > maxECEIncrease {gates.max_ece_increase}"
                )
            checked.append(f"{figures} <= maxECEIncrease {gates.max_ece_increase}")

    return GateVerdict(
        result=EvaluationResult.PASSED,
        reason=EVALUATION_PASSED,
        message="passed: " + "; ".join(checked),
    )


def _failed(gate: GateName, message: str) -> GateVerdict:
    return GateVerdict(
        result=EvaluationResult.FAILED, reason=EVALUATION_FAILED, gate=gate, message=message
    )

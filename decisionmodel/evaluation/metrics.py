"""Accuracy, expected calibration error and Brier score, and the figures they make.

REFERENCE.md "Evaluation": accuracy = correct / all (case, expected qid) pairs; ECE over 10
equal-width bins, index ``min(int(c·10), 9)``, ``Σ (n_b/N)·|acc_b - conf_b|`` (empty bins
contribute nothing); Brier = mean ``(c - correct)²`` over the calibration points.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.evaluation.decimal_format import quantize4, render4

ECE_BINS: Final = 10


def ece_bin_index(confidence: float) -> int:
    """Bin of a confidence in [0, 1]: ``min(int(c·10), 9)``, so c = 1.0 falls in the last bin
    and c = 0.1 in bin 1 (0.1 · 10 is exactly 1.0 in binary floating point)."""
    return min(int(confidence * ECE_BINS), ECE_BINS - 1)


def expected_calibration_error(
    counts: Sequence[float], correct: Sequence[float], confidence_sums: Sequence[float]
) -> float:
    """ECE from per-bin counts, calibration-correct counts and confidence sums (counts may be
    fractional when weighted)."""
    total = sum(counts)
    if total == 0:
        return 0.0
    ece = 0.0
    for n, right, conf_sum in zip(counts, correct, confidence_sums, strict=True):
        if n:
            ece += (n / total) * abs(right / n - conf_sum / n)
    return ece


class EvaluationFigures(BaseModel):
    """The outcome of one evaluation run: numbers only, safe for workflow history and status.

    ``cases`` counts evaluated cases, ``failed_cases`` those with at least one wrong or missing
    answer (a refused request counts: all its pairs are wrong), ``pairs`` the (case, expected
    question) pairs, ``correct`` the right ones. ``accuracy``, ``ece``, ``brier`` are the raw
    values; status and the gates use the 4-place decimals below.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    accuracy: float = Field(ge=0.0, le=1.0)
    ece: float = Field(ge=0.0, le=1.0)
    brier: float = Field(ge=0.0, le=1.0)
    cases: int = Field(ge=0)
    pairs: int = Field(ge=0)
    correct: int = Field(ge=0)
    failed_cases: int = Field(ge=0)

    def accuracy_4dp(self) -> Decimal:
        """Accuracy rounded as the exact ratio correct/pairs (0 when there is no pair)."""
        return quantize4(Fraction(self.correct, self.pairs) if self.pairs else 0)

    def ece_4dp(self) -> Decimal:
        return quantize4(self.ece)

    def brier_4dp(self) -> Decimal:
        return quantize4(self.brier)

    def rendered(self) -> dict[str, str]:
        """The status strings: ``{"accuracy": "0.9400", "ece": "…", "brier": "…"}``."""
        return {
            "accuracy": str(self.accuracy_4dp()),
            "ece": render4(self.ece),
            "brier": render4(self.brier),
        }

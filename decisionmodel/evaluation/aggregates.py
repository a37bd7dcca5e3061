"""The aggregates an evaluation hands out for its report: per-bin calibration sums and
per-label confusion counts.

Counts and sums only: no case, no question id, no label of the dataset (confusion.py names
classes from the runtime's vocabulary or by position). They travel in the evaluation's result
and in ``status.evaluation``; ``dmrollout report`` draws the reliability diagram and the
confusion matrix from them. The ECE recomputed from the bins is the evaluation's own ECE
(same sums, same formula, :func:`metrics.expected_calibration_error`).
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.evaluation.confusion import KINDS, Kind, kind_labels, split_key
from decisionmodel.evaluation.metrics import ECE_BINS, expected_calibration_error

MAX_BINS: Final = 15
MAX_CELLS: Final = 256


class ReliabilityBin(BaseModel):
    """One equal-width confidence bin: pairs in it, calibration-correct ones, Σ confidence."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    count: int = Field(default=0, ge=0)
    correct: int = Field(default=0, ge=0)
    confidence_sum: float = Field(default=0.0, ge=0.0)


class ConfusionCell(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Kind
    expected: str = Field(max_length=16)
    predicted: str = Field(max_length=16)
    count: int = Field(ge=0)


class EvaluationAggregates(BaseModel):
    """What the report needs of one revision's evaluation."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    bins: list[ReliabilityBin] = Field(default_factory=list, max_length=MAX_BINS)
    confusion: list[ConfusionCell] = Field(default_factory=list, max_length=MAX_CELLS)

    def ece(self) -> float:
        return expected_calibration_error(
            [b.count for b in self.bins],
            [b.correct for b in self.bins],
            [b.confidence_sum for b in self.bins],
        )


def build_aggregates(
    bin_counts: list[int],
    bin_correct: list[int],
    bin_confidence_sums: list[float],
    confusion: dict[str, int],
) -> EvaluationAggregates:
    """The aggregates of an evaluation's counts, cells in a fixed order (deterministic)."""
    assert len(bin_counts) == ECE_BINS
    bins = [
        ReliabilityBin(count=n, correct=right, confidence_sum=conf)
        for n, right, conf in zip(bin_counts, bin_correct, bin_confidence_sums, strict=True)
    ]
    cells = [
        ConfusionCell(kind=kind, expected=expected, predicted=predicted, count=count)
        for (kind, expected, predicted), count in (
            (split_key(key), count) for key, count in confusion.items() if count
        )
    ]
    cells.sort(key=_cell_order)
    return EvaluationAggregates(bins=bins, confusion=cells)


def _cell_order(cell: ConfusionCell) -> tuple[int, int, int]:
    labels = kind_labels(cell.kind)

    def rank(label: str) -> int:
        return labels.index(label) if label in labels else len(labels)

    return KINDS.index(cell.kind), rank(cell.expected), rank(cell.predicted)

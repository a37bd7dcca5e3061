"""What the interval maths needs of one evaluated case: counts and its calibration points.

A :class:`CaseRecord` lives only in the evaluate activity's memory (never in a heartbeat, a
result or history): the statistics resample cases, so they need each case's own numbers, but
what leaves the activity is figures and intervals. A record holds no dataset content: pair
counts, the Brier sum, (bin, confidence, calibration-correct) per pair and whether each pair
was right, by position.

phase_memory.py keeps them per phase in the worker process, for a retried attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from decisionmodel.evaluation.metrics import ece_bin_index
from decisionmodel.evaluation.scoring import PairOutcome


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """One case: its pairs, the right ones, Σ (confidence - correct)² and calibration points."""

    pairs: int
    correct: int
    brier: float
    points: tuple[tuple[int, float, bool], ...]
    slice: str | None = None
    # Each expected question right or wrong, in the case's order: figures by position
    # ("question 3"), never by question id (dataset content).
    rights: tuple[bool, ...] = ()

    @property
    def right(self) -> bool:
        """Every expected question answered right: the unit a flip is counted in."""
        return self.correct == self.pairs

    @classmethod
    def of(cls, outcomes: Sequence[PairOutcome], slice: str | None = None) -> CaseRecord:
        points = []
        brier = 0.0
        for outcome in outcomes:
            confidence = min(max(outcome.confidence, 0.0), 1.0)
            points.append((ece_bin_index(confidence), confidence, outcome.calibration_correct))
            brier += (confidence - outcome.calibration_correct) ** 2
        return cls(
            pairs=len(outcomes),
            correct=sum(o.correct for o in outcomes),
            brier=brier,
            points=tuple(points),
            slice=slice,
            rights=tuple(o.correct for o in outcomes),
        )

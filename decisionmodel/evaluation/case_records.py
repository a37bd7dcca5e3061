"""What the interval maths needs of one evaluated case: counts and its calibration points.

A :class:`CaseRecord` lives only in the evaluate activity's memory (never in a heartbeat, a
result or history): the statistics resample cases, so they need each case's own numbers, but
what leaves the activity is figures and intervals. A record holds no dataset content: pair
counts, the Brier sum and (bin, confidence, calibration-correct) per pair.

:class:`RecordStore` keeps the records of an attempt in the worker process, so a retried
attempt on the same worker (a Pod lost, a QUEUE_FULL streak) resumes where the heartbeat says;
an attempt on another worker finds none and runs its phase again from the first case, because
intervals over a part of the cases would not be the intervals of the run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from decisionmodel.evaluation.metrics import ece_bin_index
from decisionmodel.evaluation.scoring import PairOutcome

# Evaluations kept per worker process: a few rollouts' worth (500 cases is ~100 KiB each).
STORE_SIZE: Final = 32


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """One case: its pairs, the right ones, Σ (confidence - correct)² and calibration points."""

    pairs: int
    correct: int
    brier: float
    points: tuple[tuple[int, float, bool], ...]
    slice: str | None = None

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
        )


RecordKey = tuple[str, ...]


class RecordStore:
    """Case records per (activity run, phase, revision, dataset digest), least recently used
    dropped first."""

    def __init__(self, size: int = STORE_SIZE) -> None:
        self._size = size
        self._records: OrderedDict[RecordKey, list[CaseRecord]] = OrderedDict()

    def records(self, key: RecordKey, done: int) -> list[CaseRecord]:
        """The list to append this phase's records to: the kept one when it holds exactly the
        ``done`` cases the heartbeat counts, else a new empty one."""
        kept = self._records.get(key)
        if kept is None or len(kept) != done:
            kept = []
            self._records[key] = kept
        self._records.move_to_end(key)
        while len(self._records) > self._size:
            self._records.popitem(last=False)
        return kept

    def forget(self, key: RecordKey) -> None:
        self._records.pop(key, None)

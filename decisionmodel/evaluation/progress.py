"""The resumable accumulator of an evaluation run.

An evaluation activity heartbeats :class:`EvaluationProgress` after each case; a retried attempt
reads it back from the heartbeat details and continues at ``next_case_index``. It holds only
counts and sums — no dataset content, no per-case data — so it is small (a few hundred bytes
whatever the dataset size) and safe in workflow history.

Resuming gives the same figures as one uninterrupted pass: the sums are accumulated in the same
order either way, and a float survives a JSON round trip exactly (Python writes the shortest
text that reads back to the same float).

Typical use in an activity::

    progress = EvaluationProgress.model_validate(details[0]) if details else \\
        EvaluationProgress(dataset_digest=digest)
    if progress.dataset_digest != digest:   # the dataset changed between attempts
        progress = EvaluationProgress(dataset_digest=digest)
    for case in cases[progress.next_case_index:]:
        ...  # POST case.request_body(model)
        progress.add_case(case, response["answers"])   # or progress.add_failed_case(case)
        activity.heartbeat(progress.model_dump(mode="json"))
    figures = finalize(progress)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from decisionmodel.evaluation.aggregates import EvaluationAggregates, build_aggregates
from decisionmodel.evaluation.confusion import classify, split_key
from decisionmodel.evaluation.dataset import GoldenCase
from decisionmodel.evaluation.metrics import (
    ECE_BINS,
    EvaluationFigures,
    ece_bin_index,
    expected_calibration_error,
)
from decisionmodel.evaluation.scoring import MISSING, PairOutcome, score_case


def _zeros() -> list[int]:
    return [0] * ECE_BINS


def _float_zeros() -> list[float]:
    return [0.0] * ECE_BINS


class EvaluationProgress(BaseModel):
    """Counts and sums of an evaluation so far; updated one case at a time, in dataset order."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    dataset_digest: str | None = Field(
        default=None,
        description="sha256 of the dataset these counts belong to; a resumed attempt that reads "
        "a different dataset must start over rather than mix two datasets.",
    )
    next_case_index: int = Field(default=0, ge=0, description="cases done, = next case to run")
    failed_cases: int = Field(
        default=0,
        ge=0,
        description="cases with at least one wrong or missing answer (status.evaluation."
        "failedCases, as the API documents it), a refused request included",
    )
    pairs: int = Field(default=0, ge=0, description="(case, expected question) pairs scored")
    correct: int = Field(default=0, ge=0, description="pairs answered correctly (accuracy)")
    bin_counts: list[int] = Field(default_factory=_zeros, min_length=ECE_BINS, max_length=ECE_BINS)
    bin_correct: list[int] = Field(
        default_factory=_zeros,
        min_length=ECE_BINS,
        max_length=ECE_BINS,
        description="calibration points judged correct, per bin",
    )
    bin_confidence_sums: list[float] = Field(
        default_factory=_float_zeros, min_length=ECE_BINS, max_length=ECE_BINS
    )
    brier_sum: float = Field(default=0.0, ge=0.0, description="Σ (confidence - correct)²")
    # Added later: a heartbeat of an older worker has none, so its cells may fall short of
    # ``pairs`` (they never exceed it).
    confusion: dict[str, int] = Field(
        default_factory=dict,
        description="pairs per confusion cell, keyed kind/expected/predicted (confusion.py)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        # Heartbeat details come back from the server: treat them as input and refuse counts
        # that one pass could never have produced.
        if self.correct > self.pairs or self.failed_cases > self.next_case_index:
            raise ValueError("progress counts are inconsistent")
        if sum(self.bin_counts) != self.pairs:
            raise ValueError("progress bins do not add up to the pair count")
        for n, right, conf_sum in zip(
            self.bin_counts, self.bin_correct, self.bin_confidence_sums, strict=True
        ):
            if not (0 <= right <= n and math.isfinite(conf_sum) and 0.0 <= conf_sum <= n):
                raise ValueError("progress bins are inconsistent")
        if not math.isfinite(self.brier_sum) or self.brier_sum > self.pairs:
            raise ValueError("progress Brier sum is inconsistent")
        for key, count in self.confusion.items():
            split_key(key)
            if count < 0:
                raise ValueError("progress confusion counts are inconsistent")
        if sum(self.confusion.values()) > self.pairs:
            raise ValueError("progress confusion counts exceed the pair count")
        return self

    @property
    def cases(self) -> int:
        """Cases evaluated so far (answered or failed)."""
        return self.next_case_index

    def add_case(self, case: GoldenCase, response_answers: object) -> list[PairOutcome]:
        """Score the runtime's ``answers`` for ``case`` and count them; the outcomes are
        returned for the case's record (case_records), which stays in the activity.

        ``case`` must be the next one (``case.index == next_case_index``): feeding a case twice
        or skipping one after a resume is a bug, and it would corrupt the figures silently."""
        self._expect(case)
        outcomes = score_case(case, response_answers)
        answers = response_answers if isinstance(response_answers, Mapping) else {}
        for (qid, expectation), outcome in zip(case.expectations.items(), outcomes, strict=True):
            self._add_pair(outcome)
            self._count(classify(expectation, outcome, answers.get(qid)))
        if not all(outcome.correct for outcome in outcomes):
            self.failed_cases += 1
        self.next_case_index += 1
        return outcomes

    def add_failed_case(self, case: GoldenCase) -> list[PairOutcome]:
        """Count a case whose request failed permanently: every pair wrong, confidence 0."""
        self._expect(case)
        for expectation in case.expectations.values():
            self._add_pair(MISSING)
            self._count(classify(expectation, MISSING, None))
        self.failed_cases += 1
        self.next_case_index += 1
        return [MISSING for _ in case.expectations]

    def _expect(self, case: GoldenCase) -> None:
        if case.index != self.next_case_index:
            raise ValueError(
                f"case {case.index} given, but the next case to evaluate is {self.next_case_index}"
            )

    def _count(self, key: str) -> None:
        self.confusion[key] = self.confusion.get(key, 0) + 1

    def aggregates(self) -> EvaluationAggregates:
        """Per-bin sums and confusion cells, for the report (counts only)."""
        return build_aggregates(
            self.bin_counts, self.bin_correct, self.bin_confidence_sums, self.confusion
        )

    def _add_pair(self, outcome: PairOutcome) -> None:
        confidence = min(max(outcome.confidence, 0.0), 1.0)
        b = ece_bin_index(confidence)
        self.pairs += 1
        self.correct += outcome.correct
        self.bin_counts[b] += 1
        self.bin_correct[b] += outcome.calibration_correct
        self.bin_confidence_sums[b] += confidence
        self.brier_sum += (confidence - outcome.calibration_correct) ** 2


def finalize(progress: EvaluationProgress) -> EvaluationFigures:
    """The figures of a finished (or partial) run. With no pair at all every figure is 0."""
    pairs = progress.pairs
    return EvaluationFigures(
        accuracy=progress.correct / pairs if pairs else 0.0,
        # min(): both are ≤ 1 mathematically; a float sum could still land an ulp above the
        # bound EvaluationFigures enforces.
        ece=min(
            expected_calibration_error(
                progress.bin_counts, progress.bin_correct, progress.bin_confidence_sums
            ),
            1.0,
        ),
        brier=min(progress.brier_sum / pairs, 1.0) if pairs else 0.0,
        cases=progress.cases,
        pairs=pairs,
        correct=progress.correct,
        failed_cases=progress.failed_cases,
    )

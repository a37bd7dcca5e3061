"""ECE intervals by a streaming Poisson bootstrap over cases (ECE has no closed-form variance).

Each of :data:`BOOTSTRAP_RESAMPLES` resamples weighs every case with an independent Poisson(1)
count (how many times the case is drawn), the large-sample equivalent of drawing ``n`` cases
with replacement that needs no ``n`` in advance and no list of draws: a case's weights are
generated when its answers arrive, and its calibration points are added, weighted, to each
resample's per-bin sums (:class:`EceResamples`). The evaluation pays ~0.5 ms per case while it
waits on the runtime anyway, and the interval costs nothing after the last case. The ECE of a
resample is the evaluation's formula (10 equal-width bins, metrics.expected_calibration_error)
on its weighted sums; the interval is the ``(1-c)/2`` and ``(1+c)/2`` order statistics.

Pairing: a case's weights depend only on the seed and the case's index, so the stable and the
candidate see the same resampled cases and their difference is sharper than two intervals.

Determinism: each case's generator is ``random.Random`` (Mersenne Twister, whose integer
seeding CPython keeps stable across versions and platforms) seeded from sha256 of the dataset
digest and the revisions plus the case index, so one rollout gets one interval, to the digit.

Known bias, stated in docs/evaluation.md: the ECE of a sample is biased upwards (bin gaps do not
cancel), more so on few cases; the percentile interval carries that bias, which errs towards
holding a candidate on ``maxECE`` rather than promoting it.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import random
from collections.abc import Sequence
from typing import Final

from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.intervals import BOOTSTRAP, BOOTSTRAP_RESAMPLES, Interval
from decisionmodel.evaluation.metrics import ECE_BINS, expected_calibration_error

# Poisson(1)'s cumulative distribution up to 12 (beyond: below 1e-9, counted as 12).
_POISSON_CDF: Final = tuple(
    sum(math.exp(-1) / math.factorial(k) for k in range(j + 1)) for j in range(12)
)


def seed_of(*parts: str) -> int:
    """The bootstrap's seed: sha256 of the parts (dataset digest, revisions, figure)."""
    return int.from_bytes(hashlib.sha256("|".join(parts).encode()).digest()[:8], "big")


def case_weights(seed: int, index: int) -> list[int]:
    """The Poisson(1) weight of case ``index`` in every resample."""
    rng = random.Random(seed * 1_000_003 + index)
    cdf = _POISSON_CDF
    return [bisect.bisect_right(cdf, rng.random()) for _ in range(BOOTSTRAP_RESAMPLES)]


class EceResamples:
    """One revision's per-bin sums under every resample, fed one case at a time."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.cases = 0
        self._sums = [[0.0] * (3 * ECE_BINS) for _ in range(BOOTSTRAP_RESAMPLES)]

    def add(self, index: int, record: CaseRecord) -> None:
        sparse = _sparse(record)
        self.cases += 1
        if not sparse:
            return
        for sums, weight in zip(self._sums, case_weights(self.seed, index), strict=True):
            if weight:
                for b, n, right, conf in sparse:
                    sums[b] += weight * n
                    sums[ECE_BINS + b] += weight * right
                    sums[2 * ECE_BINS + b] += weight * conf

    def values(self) -> list[float]:
        """The ECE of every resample, in resample order."""
        k = ECE_BINS
        return [expected_calibration_error(s[:k], s[k : 2 * k], s[2 * k :]) for s in self._sums]


def resamples_of(records: Sequence[CaseRecord], seed: int) -> EceResamples:
    found = EceResamples(seed)
    for index, record in enumerate(records):
        found.add(index, record)
    return found


def ece_of(records: Sequence[CaseRecord]) -> float:
    counts, correct, sums = [0] * ECE_BINS, [0] * ECE_BINS, [0.0] * ECE_BINS
    for record in records:
        for b, n, right, conf in _sparse(record):
            counts[b] += n
            correct[b] += right
            sums[b] += conf
    return expected_calibration_error(counts, correct, sums)


def ece_interval(records: Sequence[CaseRecord], confidence: float, seed: int) -> Interval:
    return ece_intervals(records, None, confidence, seed)[0]


def ece_difference(
    candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord], confidence: float, seed: int
) -> Interval:
    """Candidate - stable ECE, both on the same resampled cases."""
    difference = ece_intervals(candidate, stable, confidence, seed)[1]
    assert difference is not None
    return difference


def ece_intervals(
    candidate: Sequence[CaseRecord],
    stable: Sequence[CaseRecord] | None,
    confidence: float,
    seed: int,
    fed: tuple[EceResamples | None, EceResamples | None] = (None, None),
) -> tuple[Interval, Interval | None]:
    """The candidate's ECE interval and, with a stable, the paired difference. ``fed`` are
    resamples the evaluation already accumulated case by case (used when complete)."""
    if stable is not None and len(stable) != len(candidate):
        raise ValueError("paired figures need the same cases")
    own = _complete(fed[0], candidate, seed)
    estimate, n = ece_of(candidate), len(candidate)
    found = Interval(estimate, *_percentiles(sorted(own.values()), confidence), n, BOOTSTRAP)
    if stable is None:
        return found, None
    base = _complete(fed[1], stable, seed)
    differences = sorted(c - s for c, s in zip(own.values(), base.values(), strict=True))
    diff = Interval(estimate - ece_of(stable), *_percentiles(differences, confidence), n, BOOTSTRAP)
    return found, diff


def _complete(fed: EceResamples | None, records: Sequence[CaseRecord], seed: int) -> EceResamples:
    if fed is not None and fed.seed == seed and fed.cases == len(records):
        return fed
    return resamples_of(records, seed)


def _sparse(record: CaseRecord) -> tuple[tuple[int, int, int, float], ...]:
    """Per bin the case touches: (bin, pairs, calibration-correct, Σ confidence)."""
    bins: dict[int, list[float]] = {}
    for b, confidence, right in record.points:
        acc = bins.setdefault(b, [0, 0, 0.0])
        acc[0] += 1
        acc[1] += right
        acc[2] += confidence
    return tuple((b, int(v[0]), int(v[1]), v[2]) for b, v in sorted(bins.items()))


def _percentiles(values: Sequence[float], confidence: float) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    alpha = (1 - confidence) / 2
    last = len(values) - 1
    low = min(last, max(0, math.floor(alpha * len(values))))
    high = min(last, max(0, math.ceil((1 - alpha) * len(values)) - 1))
    return values[low], values[high]

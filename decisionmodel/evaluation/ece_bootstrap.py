"""ECE intervals by a percentile bootstrap over cases (ECE has no closed-form variance).

Each resample draws ``n`` case indices with replacement; the ECE of the resampled cases is the
same formula as the evaluation's (10 equal-width bins, metrics.expected_calibration_error). For
the paired difference both revisions' ECE are computed on the *same* resampled indices, which
is what makes the difference sharper than two separate intervals. The interval is the
``(1-c)/2`` and ``(1+c)/2`` order statistics of the resampled values.

Determinism: the generator is ``random.Random`` (Mersenne Twister, whose integer seeding and
``randrange`` CPython keeps stable across versions and platforms) seeded with sha256 of the
dataset digest and the revisions, so one rollout gets one interval, to the last digit.

Known bias, stated in docs/evaluation.md: the ECE of a sample is biased upwards (bin gaps do not
cancel), more so on few cases; the percentile interval carries that bias, which errs towards
holding a candidate on ``maxECE`` rather than promoting it.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence

from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.intervals import BOOTSTRAP, BOOTSTRAP_RESAMPLES, Interval
from decisionmodel.evaluation.metrics import ECE_BINS, expected_calibration_error

# Per case, per bin it touches: (bin, pairs, calibration-correct, Σ confidence).
_Sparse = tuple[tuple[int, int, int, float], ...]


def seed_of(*parts: str) -> int:
    """The generator's seed: sha256 of the parts (dataset digest, revisions, figure)."""
    return int.from_bytes(hashlib.sha256("|".join(parts).encode()).digest()[:8], "big")


def ece_of(records: Sequence[CaseRecord]) -> float:
    return _ece([_sparse(r) for r in records], range(len(records)))


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
) -> tuple[Interval, Interval | None]:
    """The candidate's ECE interval and, with a stable, the paired difference: one pass of
    resamples serves both (the cost is the resampling, ~1 µs per case and resample)."""
    if stable is not None and len(stable) != len(candidate):
        raise ValueError("paired figures need the same cases")
    cand = [_sparse(r) for r in candidate]
    base = [_sparse(r) for r in stable] if stable is not None else None
    every = range(len(cand))
    own, differences = [], []
    for idx in _resamples(len(cand), seed):
        value = _ece(cand, idx)
        own.append(value)
        if base is not None:
            differences.append(value - _ece(base, idx))
    estimate = _ece(cand, every)
    found = Interval(estimate, *_percentiles(sorted(own), confidence), len(cand), BOOTSTRAP)
    if base is None:
        return found, None
    diff = estimate - _ece(base, every)
    lower, upper = _percentiles(sorted(differences), confidence)
    return found, Interval(diff, lower, upper, len(cand), BOOTSTRAP)


def _sparse(record: CaseRecord) -> _Sparse:
    bins: dict[int, list[float]] = {}
    for b, confidence, right in record.points:
        acc = bins.setdefault(b, [0, 0, 0.0])
        acc[0] += 1
        acc[1] += right
        acc[2] += confidence
    return tuple((b, int(v[0]), int(v[1]), v[2]) for b, v in sorted(bins.items()))


def _resamples(n: int, seed: int) -> list[list[int]]:
    if n == 0:
        return []
    rng = random.Random(seed)
    return [[rng.randrange(n) for _ in range(n)] for _ in range(BOOTSTRAP_RESAMPLES)]


def _ece(sparse: Sequence[_Sparse], indices: Sequence[int] | range) -> float:
    counts, correct, sums = [0] * ECE_BINS, [0] * ECE_BINS, [0.0] * ECE_BINS
    for i in indices:
        for b, n, right, conf in sparse[i]:
            counts[b] += n
            correct[b] += right
            sums[b] += conf
    return expected_calibration_error(counts, correct, sums)


def _percentiles(values: Sequence[float], confidence: float) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    alpha = (1 - confidence) / 2
    last = len(values) - 1
    low = min(last, max(0, math.floor(alpha * len(values))))
    high = min(last, max(0, math.ceil((1 - alpha) * len(values)) - 1))
    return values[low], values[high]

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
    sparse = [_sparse(r) for r in records]
    draws = _resamples(len(records), seed)
    values = sorted(_ece(sparse, idx) for idx in draws)
    lower, upper = _percentiles(values, confidence)
    return Interval(_ece(sparse, range(len(records))), lower, upper, len(records), BOOTSTRAP)


def ece_difference(
    candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord], confidence: float, seed: int
) -> Interval:
    """Candidate - stable ECE, both on the same resampled cases."""
    if len(candidate) != len(stable):
        raise ValueError("paired figures need the same cases")
    cand, base = [_sparse(r) for r in candidate], [_sparse(r) for r in stable]
    every = range(len(candidate))
    values = sorted(_ece(cand, idx) - _ece(base, idx) for idx in _resamples(len(cand), seed))
    lower, upper = _percentiles(values, confidence)
    return Interval(_ece(cand, every) - _ece(base, every), lower, upper, len(cand), BOOTSTRAP)


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

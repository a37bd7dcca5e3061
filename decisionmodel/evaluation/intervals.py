"""Confidence intervals of the evaluation's figures, with cases as the unit of resampling.

docs/evaluation.md states the methods and their assumptions; in short:

- Accuracy (correct / pairs): Wilson score interval. The questions of one case are not
  independent, so the pair count is divided by the design effect (the cluster variance of the
  ratio over the binomial one, at least 1); with one question per case the design effect is 1
  and this is exactly Wilson's interval (``statsmodels`` ``proportion_confint(method="wilson")``).
- Brier (a mean over pairs) and the paired differences candidate - stable of accuracy and
  Brier: the ratio estimator over cases with its linearised (delta-method) variance
  ``n/(n-1) Σ (y_i - R m_i)² / (Σ m_i)²`` and a normal quantile. With one question per case that
  is the z interval of the per-case mean (``DescrStatsW.zconfint_mean``). A difference never
  claims more precision than one case changing sides: its standard error is at least 1/Σ m.
- Flip rates (the share of cases the stable got right and the candidate wrong, and the
  reverse): Wilson on the case counts.
- ECE and its paired difference: no closed form; a streaming Poisson bootstrap over cases
  (ece_bootstrap.py: :data:`BOOTSTRAP_RESAMPLES` resamples, the same case weights for both
  revisions), seeded with sha256 of the dataset digest and the revisions, so the same inputs
  give the same interval on any machine.

Everything here is pure arithmetic on :class:`~decisionmodel.evaluation.case_records.CaseRecord`
lists; the results are numbers only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Final

from decisionmodel.evaluation.case_records import CaseRecord

BOOTSTRAP_RESAMPLES: Final = 1000

WILSON: Final = "wilson"
WILSON_CLUSTERED: Final = "wilson, cluster design effect"
RATIO_Z: Final = "paired ratio estimator, normal"
BOOTSTRAP: Final = f"Poisson bootstrap over cases ({BOOTSTRAP_RESAMPLES}), percentile"


@dataclass(frozen=True, slots=True)
class Interval:
    """An estimate with its two-sided interval, the cases it came from and the method."""

    estimate: float
    lower: float
    upper: float
    n: int
    method: str

    @property
    def half_width(self) -> float:
        return (self.upper - self.lower) / 2

    def negated(self) -> Interval:
        """The interval of minus the figure (candidate - stable → the drop stable - candidate)."""
        return Interval(-self.estimate, -self.upper, -self.lower, self.n, self.method)


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (0.95 → 1.959964…)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score interval of ``successes`` out of ``n`` (both may be effective, i.e.
    fractional, counts)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy(records: Sequence[CaseRecord], z: float) -> Interval:
    """Accuracy with Wilson's interval on the pair count over the design effect."""
    pairs = sum(r.pairs for r in records)
    correct = sum(r.correct for r in records)
    if pairs == 0:
        return Interval(0.0, 0.0, 1.0, len(records), WILSON)
    p = correct / pairs
    binomial = p * (1 - p) / pairs
    clustered = sum((r.correct - p * r.pairs) ** 2 for r in records) / pairs**2
    deff = max(1.0, clustered / binomial) if binomial > 0 else 1.0
    lower, upper = wilson(correct / deff, pairs / deff, z)
    single = all(r.pairs == 1 for r in records)
    return Interval(p, lower, upper, len(records), WILSON if single else WILSON_CLUSTERED)


def _ratio(
    numerators: Sequence[float], denominators: Sequence[int], z: float, floor: float = 0.0
) -> Interval:
    n, total = len(numerators), sum(denominators)
    if n < 2 or total == 0:
        return Interval(0.0, -1.0, 1.0, n, RATIO_Z)
    ratio = sum(numerators) / total
    spread = sum((y - ratio * m) ** 2 for y, m in zip(numerators, denominators, strict=True))
    se = max(math.sqrt(n / (n - 1) * spread) / total, floor)
    return Interval(ratio, ratio - z * se, ratio + z * se, n, RATIO_Z)


def brier(records: Sequence[CaseRecord], z: float) -> Interval:
    found = _ratio([r.brier for r in records], [r.pairs for r in records], z)
    return _clipped(found, 0.0, 1.0)


def accuracy_difference(
    candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord], z: float
) -> Interval:
    """Candidate - stable accuracy on the same cases (paired)."""
    _same_cases(candidate, stable)
    pairs = [c.pairs for c in candidate]
    floor = 1 / sum(pairs) if sum(pairs) else 0.0
    diffs = [float(c.correct - s.correct) for c, s in zip(candidate, stable, strict=True)]
    return _clipped(_ratio(diffs, pairs, z, floor), -1.0, 1.0)


def brier_difference(
    candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord], z: float
) -> Interval:
    """Candidate - stable Brier score on the same cases (paired)."""
    _same_cases(candidate, stable)
    pairs = [c.pairs for c in candidate]
    diffs = [c.brier - s.brier for c, s in zip(candidate, stable, strict=True)]
    return _clipped(_ratio(diffs, pairs, z), -1.0, 1.0)


def flip_rates(
    candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord], z: float
) -> tuple[Interval, Interval]:
    """(negative, positive) flips: cases the stable got right and the candidate wrong, and
    the reverse, as shares of the cases, with Wilson intervals."""
    n = len(candidate)
    negative = negative_flip_count(candidate, stable)
    positive = negative_flip_count(stable, candidate)

    def rate(count: int) -> Interval:
        lower, upper = wilson(count, n, z)
        return Interval(count / n if n else 0.0, lower, upper, n, WILSON)

    return rate(negative), rate(positive)


def negative_flip_count(candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord]) -> int:
    """Cases the stable answered right (every question) and the candidate did not."""
    _same_cases(candidate, stable)
    return sum(s.right and not c.right for c, s in zip(candidate, stable, strict=True))


def _same_cases(candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord]) -> None:
    if len(candidate) != len(stable):
        raise ValueError(f"paired figures need the same cases ({len(candidate)} vs {len(stable)})")


def _clipped(found: Interval, low: float, high: float) -> Interval:
    return Interval(
        found.estimate, max(low, found.lower), min(high, found.upper), found.n, found.method
    )

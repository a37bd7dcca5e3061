"""Confidence intervals of the evaluation's figures, with cases as the unit of resampling.

docs/evaluation.md states the methods and their assumptions; in short:

- Accuracy (correct / pairs): Clopper-Pearson's exact bounds (exact_binomial.py; Wilson's
  missed one side near 0 and 1). The questions of one case are not independent, so the counts
  are divided by the design effect (the cluster variance of the ratio, with its n/(n-1), over
  the binomial one, at least 1); when every pair is right (or wrong) the data cannot show how
  alike a case's questions are and the design effect is the mean questions per case (the most
  it can be). With one question per case this is exactly ``proportion_confint(method="beta")``.
- Brier (a mean over pairs) and the paired difference candidate - stable of Brier: the ratio
  estimator over cases with its linearised (delta-method) variance
  ``n/(n-1) Σ (y_i - R m_i)² / (Σ m_i)²`` and a normal quantile. With one question per case that
  is the z interval of the per-case mean (``DescrStatsW.zconfint_mean``).
- The paired accuracy difference: Tango's score interval on the discordant counts over the
  difference's design effect (paired_score.py); the Wald interval it replaces passed at the
  margin up to 7 % of the time when few cases were discordant.
- Flip rates (the share of cases the stable got right and the candidate wrong, and the
  reverse): Clopper-Pearson on the case counts.
- ECE and its paired difference: one-sided bounds built for each side (ece_bounds.py), since
  the plug-in ECE is biased upwards at few cases.

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
from decisionmodel.evaluation.exact_binomial import clopper_pearson
from decisionmodel.evaluation.paired_score import tango_interval

WILSON: Final = "wilson"
EXACT: Final = "clopper-pearson"
EXACT_CLUSTERED: Final = "clopper-pearson, cluster design effect"
RATIO_Z: Final = "paired ratio estimator, normal"
SCORE_DIFFERENCE: Final = "tango score, cluster design effect"


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


def _tail(z: float) -> float:
    """The one-sided miss of a two-sided normal quantile ``z``."""
    return 1 - NormalDist().cdf(z)


def design_effect(records: Sequence[CaseRecord]) -> float:
    """The cluster variance of correct/pairs over the binomial one (at least 1). With every
    pair right or every pair wrong the data cannot show it: the mean pairs per case, its most."""
    n = len(records)
    pairs = sum(r.pairs for r in records)
    correct = sum(r.correct for r in records)
    if n == 0 or all(r.pairs == 1 for r in records):  # one question a case: binomial
        return 1.0
    if correct in (0, pairs) or n < 2:  # nothing to tell how alike a case's questions are
        return max(1.0, pairs / n)
    p = correct / pairs
    binomial = p * (1 - p) / pairs
    _, se = cluster_ratio([r.correct for r in records], [r.pairs for r in records]) or (p, 0.0)
    return max(1.0, se**2 / binomial)


def accuracy(records: Sequence[CaseRecord], z: float) -> Interval:
    """Accuracy with Clopper-Pearson bounds on the counts over the design effect; ``z`` the
    two-sided normal quantile of the confidence (each side misses at most 1 - Φ(z))."""
    pairs = sum(r.pairs for r in records)
    correct = sum(r.correct for r in records)
    if pairs == 0:
        return Interval(0.0, 0.0, 1.0, len(records), EXACT)
    deff = design_effect(records)
    lower, upper = clopper_pearson(correct / deff, pairs / deff, _tail(z))
    single = all(r.pairs == 1 for r in records)
    return Interval(
        correct / pairs, lower, upper, len(records), EXACT if single else EXACT_CLUSTERED
    )


def cluster_ratio(
    numerators: Sequence[float], denominators: Sequence[int]
) -> tuple[float, float] | None:
    """Σy / Σm over cases (a case's questions are one cluster) and its cluster-robust standard
    error; None with fewer than 2 cases or no question."""
    n, total = len(numerators), sum(denominators)
    if n < 2 or total == 0:
        return None
    ratio = sum(numerators) / total
    spread = sum((y - ratio * m) ** 2 for y, m in zip(numerators, denominators, strict=True))
    return ratio, math.sqrt(n / (n - 1) * spread) / total


def _ratio(
    numerators: Sequence[float], denominators: Sequence[int], z: float, floor: float = 0.0
) -> Interval:
    found = cluster_ratio(numerators, denominators)
    if found is None:
        return Interval(0.0, -1.0, 1.0, len(numerators), RATIO_Z)
    ratio, se = found[0], max(found[1], floor)
    return Interval(ratio, ratio - z * se, ratio + z * se, len(numerators), RATIO_Z)


def brier(records: Sequence[CaseRecord], z: float) -> Interval:
    found = _ratio([r.brier for r in records], [r.pairs for r in records], z)
    return _clipped(found, 0.0, 1.0)


def accuracy_difference(
    candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord], z: float
) -> Interval:
    """Candidate - stable accuracy on the same cases (paired): Tango's score interval on the
    discordant pair counts over the difference's design effect (paired_score.py)."""
    _same_cases(candidate, stable)
    n = len(candidate)
    pairs = sum(c.pairs for c in candidate)
    if n == 0 or pairs == 0:
        return Interval(0.0, -1.0, 1.0, n, SCORE_DIFFERENCE)
    diffs = [c.correct - s.correct for c, s in zip(candidate, stable, strict=True)]
    up = sum(d for d in diffs if d > 0)
    down = -sum(d for d in diffs if d < 0)
    estimate = (up - down) / pairs
    deff = _difference_design_effect(diffs, [c.pairs for c in candidate], up + down)
    lower, upper = tango_interval(up / deff, down / deff, pairs / deff, z)
    return Interval(estimate, lower, upper, n, SCORE_DIFFERENCE)


def _difference_design_effect(diffs: Sequence[int], pairs: Sequence[int], discordant: int) -> float:
    """The cluster variance of Σ d / Σ m over the one of independent pairs, at least 1; with no
    discordant pair seen, the mean questions per case (the most it can be)."""
    n, total = len(diffs), sum(pairs)
    if all(m == 1 for m in pairs):  # one question per case: independent pairs
        return 1.0
    if discordant == 0 or n < 2:
        return max(1.0, total / n) if n else 1.0
    ratio, se = cluster_ratio(diffs, pairs) or (0.0, 0.0)
    independent = (discordant / total - ratio * ratio) / total
    return max(1.0, se**2 / independent) if independent > 0 else max(1.0, total / n)


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
    the reverse, as shares of the cases, with Clopper-Pearson bounds."""
    n = len(candidate)
    negative = negative_flip_count(candidate, stable)
    positive = negative_flip_count(stable, candidate)

    def rate(count: int) -> Interval:
        lower, upper = clopper_pearson(count, n, _tail(z))
        return Interval(count / n if n else 0.0, lower, upper, n, EXACT)

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

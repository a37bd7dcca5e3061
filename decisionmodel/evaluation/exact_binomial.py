"""Clopper-Pearson's exact binomial bounds, from the regularised incomplete beta function.

Wilson's score interval misses one side near 0 and 1 (issue 35: a ``minAccuracy: "0.98"`` gate
at 50 cases failed a candidate truly at 0.98 in 8 % of runs, against the promised 2.5 %); the
exact bounds never miss a side more often than asked, at any n and p. The counts may be
fractional (effective counts after a design effect): the bounds are beta quantiles, defined for
real parameters. Stdlib only: Lentz's continued fraction for the incomplete beta (Numerical
Recipes §6.4) and bisection for its inverse, to 1e-12; statsmodels ``proportion_confint(method=
"beta")`` agrees to 1e-9 (tests/unit/evaluation/test_eval_intervals.py).
"""

from __future__ import annotations

import math
from typing import Final

_EPS: Final = 1e-15
_TINY: Final = 1e-300


def _continued_fraction(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the CDF of Beta(a, b) at x."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        + a * math.log(x) + b * math.log1p(-x)
    )  # fmt: skip
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x with I_x(a, b) = q (bisection: the CDF is monotone)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if regularized_beta(a, b, mid) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def clopper_pearson(successes: float, n: float, tail: float) -> tuple[float, float]:
    """Bounds of a proportion from ``successes`` of ``n`` (both may be fractional), each
    missing its side with probability at most ``tail``."""
    if n <= 0:
        return 0.0, 1.0
    x = min(max(successes, 0.0), n)
    lower = 0.0 if x <= 0 else beta_quantile(tail, x, n - x + 1)
    upper = 1.0 if x >= n else beta_quantile(1 - tail, x + 1, n - x)
    return lower, upper

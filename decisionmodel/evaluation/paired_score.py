"""Tango's score interval for a paired difference of proportions (Tango 1998).

``maxAccuracyDrop`` judges candidate - stable accuracy on the same cases. A Wald interval takes
its variance from the discordant pairs it happened to see: with few of them it is too narrow,
and it passed a candidate whose true drop was the margin 4-7 % of the time (issue 35; bound
2.5 %). The score interval takes the variance *under each hypothesised difference* from the
restricted maximum-likelihood fit, so a sample short of discordant pairs does not shrink it.

With ``up`` pairs the candidate got right and the stable wrong, ``down`` the reverse, out of
``n``: for a difference ``d`` the restricted fit is the ``q`` (share of ``down`` pairs) that
maximises ``up·log(q + d) + down·log(q) + (n - up - down)·log(1 - 2q - d)``, and
``Z(d) = (up - down - n·d) / √(n·(2q + d - d²))``. The interval is every ``d`` with
``|Z(d)| ≤ z``; both ends are found by bisection (``Z`` falls as ``d`` grows). Counts may be
fractional: the questions of one case are not independent, so the counts are divided by the
design effect of the difference (its cluster variance over the one of independent pairs).
"""

from __future__ import annotations

import math
from typing import Final

CONTINUITY: Final = 0.5  # half a discordant pair


def _restricted_down_share(up: float, down: float, n: float, d: float) -> float:
    """The maximum-likelihood share of ``down`` pairs given difference ``d`` (bisection on the
    score, which falls from +∞ to -∞ over the feasible range)."""
    low, high = max(0.0, -d), (1.0 - d) / 2
    if high <= low:
        return low
    concordant = n - up - down
    for _ in range(80):
        q = (low + high) / 2
        slope = 0.0
        if up:
            slope += up / (q + d) if q + d > 0 else math.inf
        if down:
            slope += down / q if q > 0 else math.inf
        if concordant:
            room = 1 - 2 * q - d
            slope -= 2 * concordant / room if room > 0 else math.inf
        if slope > 0:
            low = q
        else:
            high = q
    return (low + high) / 2


def score(up: float, down: float, n: float, d: float) -> float:
    """Tango's Z for the hypothesised difference ``d`` (up - down)/n, continuity-corrected:
    the counts are whole pairs, and without the half-pair correction one side missed up to
    5 % at 200 cases (bound 2.5 %, bench/gate_errors.py)."""
    q = _restricted_down_share(up, down, n, d)
    variance = n * (2 * q + d - d * d)
    excess = up - down - n * d
    corrected = math.copysign(max(0.0, abs(excess) - CONTINUITY), excess)
    if variance <= 0:
        return math.copysign(math.inf, corrected) if corrected else 0.0
    return corrected / math.sqrt(variance)


def tango_interval(up: float, down: float, n: float, z: float) -> tuple[float, float]:
    """Every difference ``d`` with ``|Z(d)| ≤ z``, as (lower, upper)."""
    if n <= 0:
        return -1.0, 1.0

    def solve(target: float) -> float:
        low, high = -1.0, 1.0
        for _ in range(60):
            mid = (low + high) / 2
            if score(up, down, n, mid) > target:
                low = mid
            else:
                high = mid
        return (low + high) / 2

    return solve(z), solve(-z)

"""What a golden set can decide, known before a rollout starts (issue 35 item 6).

Only the dataset's shape is needed (how many cases the evaluation reads, how many in each
slice), never a case's content, so this runs on the workflow's first step and its result is
numbers only. For each gate judged on intervals (``confidence`` set):

- **can pass / can fail**: whether any outcome at all of that many cases could pass (or fail)
  the gate at its level. A gate that can neither pass nor fail is refused (it could only ever be
  Inconclusive: bad input, naming the field and the fix); a gate that can never pass, under
  ``onInconclusive`` Reject, would roll back every candidate, and is refused too.
- **power**: the chance the gate passes a candidate *one margin* better than its threshold,
  exactly (binomial sums over the same Clopper-Pearson bounds the evaluation uses), and the cases
  that would give :data:`DESIGN_POWER`. The margin: a gate with one states it
  (``maxNegativeFlipRate`` f: a candidate with f/2 negative flips); ``minAccuracy`` t has none,
  so its design candidate is halfway between t and perfect (0.90 → 0.95, 0.98 → 0.99), the
  point the gate bench measures cases to a decision at.
- **sequential**: the betting test's power and its mean cases to a decision at the same point,
  by seeded simulation of the product's own test (:mod:`sequential`), capped at the dataset.

Cases are counted as one question each: questions of one case share the case (the intervals
correct for it by the design effect), so this is the conservative reading. Paired gates
(``maxAccuracyDrop``) depend on how often the two revisions answer differently, unknown before
they answer: only whether the best case (no disagreement) can pass is checked. The ECE gates
depend on the confidences the model will state: not estimated.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import lru_cache
from statistics import NormalDist
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.evaluation import intervals as iv
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.dataset import MAX_CASES
from decisionmodel.evaluation.exact_binomial import clopper_pearson, regularized_beta
from decisionmodel.evaluation.sequential import run_until_decided
from decisionmodel.evaluation.sequential_gates import fed, fresh
from decisionmodel.vocabulary import EvaluationResult, Gate

DESIGN_POWER: Final = 0.8
# Seeded runs of the sequential test per estimate: the power's Monte Carlo error is about 4
# points, enough to tell a dataset that decides from one that does not.
SEQUENTIAL_RUNS: Final = 100


class GateDesign(BaseModel):
    """One gate against the dataset's size: numbers only (status.evaluationDesign)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gate: str = Field(max_length=80)  # the spec field: minAccuracy, slices[fraud].minAccuracy
    threshold: str = Field(max_length=16)
    design: str = Field(max_length=40)  # the candidate the power is for: "accuracy 0.95"
    cases: int = Field(ge=0)
    can_pass: bool
    can_fail: bool
    power: float | None = None  # None: depends on answers not known before the evaluation
    cases_for_power: int | None = None  # None: more than MAX_CASES, or not estimated
    expected_cases: int | None = None  # sequential: mean cases to a verdict, capped at cases

    @property
    def underpowered(self) -> bool:
        return self.power is not None and self.power < DESIGN_POWER

    @property
    def weak(self) -> bool:
        """Worth a warning: too little power, or no outcome can pass it."""
        return self.underpowered or not self.can_pass

    def line(self) -> str:
        head = f"{self.gate} {self.threshold} on {self.cases} cases"
        if not self.can_pass and not self.can_fail:
            return f"{head}: no outcome can decide it"
        if not self.can_pass:
            return f"{head}: no outcome can pass it (even every case right)"
        if self.power is None:
            return f"{head}: can be decided; its power depends on answers not known yet"
        text = f"{head}: passes a candidate with {self.design} {self.power:.0%} of the time"
        if self.expected_cases is not None:
            text += f", after about {self.expected_cases} cases"
        if self.underpowered:
            text += (
                f"; about {self.cases_for_power} cases give {DESIGN_POWER:.0%}"
                if self.cases_for_power is not None
                else f"; {DESIGN_POWER:.0%} needs more than the {MAX_CASES:,}-case limit"
            )
        return text


def design(
    gates: Mapping[str, str | None],
    confidence: Decimal,
    cases: int,
    slices: Mapping[str, int] | None = None,
    slice_gates: Mapping[str, str | None] | None = None,
    slice_min_cases: int = 30,
    sequential: bool = False,
) -> list[GateDesign]:
    """Each interval-judged gate against ``cases`` (and each slice's count): wire names in
    ``gates`` (minAccuracy, maxNegativeFlipRate, maxAccuracyDrop; others are not estimated)."""
    tail = float((1 - confidence) / 2)
    found: list[GateDesign] = []
    t = gates.get("minAccuracy")
    if t is not None:
        found.append(
            _sequential(t, cases, tail)
            if sequential
            else _min_accuracy("minAccuracy", t, cases, tail)
        )
    drop = gates.get("maxAccuracyDrop")
    if drop is not None:
        found.append(
            _sequential(drop, cases, tail, Gate.MAX_ACCURACY_DROP)
            if sequential
            else _drop("maxAccuracyDrop", drop, cases, tail)
        )
    flips = gates.get("maxNegativeFlipRate")
    if flips is not None:
        found.append(
            _sequential(flips, cases, tail, Gate.MAX_NEGATIVE_FLIP_RATE)
            if sequential
            else _flip_rate(flips, cases, tail)
        )
    if slices and slice_gates:
        found += _slices(slices, slice_gates, slice_min_cases, tail)
    return found


def _slices(
    slices: Mapping[str, int], gates: Mapping[str, str | None], least: int, tail: float
) -> list[GateDesign]:
    """The slices the evaluation gates (at least ``least`` cases), each at the Bonferroni
    share of the tail, as decision._slices judges them."""
    compared = {name: n for name, n in sorted(slices.items()) if n >= least}
    set_gates = [g for g in ("minAccuracy", "maxAccuracyDrop") if gates.get(g) is not None]
    share = tail / max(1, len(compared) * len(set_gates))
    found = []
    for name, n in compared.items():
        if (t := gates.get("minAccuracy")) is not None:
            found.append(_min_accuracy(f"slices[{name}].minAccuracy", t, n, share))
        if (m := gates.get("maxAccuracyDrop")) is not None:
            found.append(_drop(f"slices[{name}].maxAccuracyDrop", m, n, share))
    return found


def _min_accuracy(gate: str, threshold: str, n: int, tail: float) -> GateDesign:
    t = float(threshold)
    p = _design_accuracy(t)
    need = _least_right(n, t, tail)
    power = _upper_tail(n, p, need) if need is not None else 0.0
    return GateDesign(
        gate=gate,
        threshold=threshold,
        design=f"accuracy {p:.4g}",
        cases=n,
        can_pass=need is not None,
        can_fail=n > 0 and clopper_pearson(0, n, tail)[1] < t,
        power=power,
        cases_for_power=_cases_for(lambda k: _accuracy_power(k, t, p, tail), _normal_n(t, p, tail)),
    )


def _flip_rate(threshold: str, n: int, tail: float) -> GateDesign:
    f = float(threshold)
    p = f / 2
    most = _most_flips(n, f, tail)
    power = _lower_tail(n, p, most) if most is not None else 0.0
    return GateDesign(
        gate="maxNegativeFlipRate",
        threshold=threshold,
        design=f"negative flips {p:.4g}",
        cases=n,
        can_pass=most is not None,
        can_fail=n > 0 and clopper_pearson(n, n, tail)[0] > f,
        power=power,
        cases_for_power=_cases_for(lambda k: _flip_power(k, f, p, tail), _normal_n(f, p, tail)),
    )


def _drop(gate: str, threshold: str, n: int, tail: float) -> GateDesign:
    """A candidate as accurate as the stable passes at best when the two answer alike on
    every case (the narrowest interval of a difference of 0): whether that passes is its
    power, 0 or 1. Whether any outcome passes: the candidate right on every case the stable
    got wrong, all of them."""
    m = float(threshold)
    z = NormalDist().inv_cdf(1 - tail)
    best = _drop_bounds(n, z, better=True)
    return GateDesign(
        gate=gate,
        threshold=threshold,
        design="no drop, answering alike",
        cases=n,
        can_pass=best is not None and best[1] <= m,
        can_fail=n >= 2,
        power=_alike_power(n, z, m),
        cases_for_power=_cases_for(lambda k: _alike_power(k, z, m), math.ceil(3 / m)),
    )


def _drop_bounds(n: int, z: float, better: bool) -> tuple[float, float] | None:
    if n < 2:
        return None
    right = CaseRecord(pairs=1, correct=1, brier=0.0, points=())
    wrong = CaseRecord(pairs=1, correct=0, brier=1.0, points=())
    found = iv.accuracy_difference([right] * n, [wrong if better else right] * n, z).negated()
    return found.lower, found.upper


def _alike_power(n: int, z: float, m: float) -> float:
    bounds = _drop_bounds(n, z, better=False)
    return 1.0 if bounds is not None and bounds[1] <= m else 0.0


def _sequential(threshold: str, n: int, tail: float, gate: Gate = Gate.MIN_ACCURACY) -> GateDesign:
    """The product's own test (sequential_gates.py) at the gate's design candidate: one margin
    better for minAccuracy, half the ceiling for negative flips, and for a drop a candidate
    answering every case as the stable does (as the fixed-n design: whether it can pass)."""
    design = _sequential_design(gate, float(threshold))
    stops = _pass_times(gate, threshold, tail)
    passed = [s for s in stops if s is not None]
    within = [s for s in passed if s <= n]
    ordered = sorted(passed)
    at = math.ceil(DESIGN_POWER * len(stops)) - 1
    test = fresh(gate, threshold, tail)
    best = test.hi if test.side == "min" else test.lo
    worst = test.lo if test.side == "min" else test.hi
    return GateDesign(
        gate=str(gate),
        threshold=threshold,
        design=design,
        cases=n,
        can_pass=fed(test, [best] * n).verdict() == EvaluationResult.PASSED,
        can_fail=n > 0 and worst != test.threshold,
        power=len(within) / len(stops),
        cases_for_power=ordered[at] if at < len(ordered) else None,
        expected_cases=round(sum(min(s, n) if s is not None else n for s in stops) / len(stops)),
    )


def _sequential_design(gate: Gate, t: float) -> str:
    if gate == Gate.MIN_ACCURACY:
        return f"accuracy {_design_accuracy(t):.4g}"
    if gate == Gate.MAX_NEGATIVE_FLIP_RATE:
        return f"negative flips {t / 2:.4g}"
    return "no drop, answering alike"


def _design_accuracy(t: float) -> float:
    return t + (1 - t) / 2


def _design_outcome(gate: Gate, t: float, rng: random.Random) -> float:
    if gate == Gate.MIN_ACCURACY:
        return 1.0 if rng.random() < _design_accuracy(t) else 0.0
    if gate == Gate.MAX_NEGATIVE_FLIP_RATE:
        return 1.0 if rng.random() < t / 2 else 0.0
    return 0.0


@lru_cache(maxsize=256)
def _pass_times(gate: Gate, threshold: str, tail: float) -> tuple[int | None, ...]:
    """When the test passes each seeded run at the design candidate (None: failed, or not by
    the case limit). Seeded: the same gate and confidence give the same figures everywhere."""
    t = float(threshold)
    found: list[int | None] = []
    for run in range(SEQUENTIAL_RUNS):
        # minAccuracy's seeds as before other gates were sequential: its figures stay put.
        seed = f"design|{t}|{tail}|{run}"
        rng = random.Random(seed if gate == Gate.MIN_ACCURACY else f"{gate}|{seed}")
        outcomes = [_design_outcome(gate, t, rng) for _ in range(MAX_CASES)]
        test, used = run_until_decided(fresh(gate, threshold, tail), outcomes)
        found.append(used if test.verdict() == EvaluationResult.PASSED else None)
    return tuple(found)


def _least_right(n: int, t: float, tail: float) -> int | None:
    """The fewest right cases of ``n`` whose lower bound reaches ``t`` (None: not even n)."""
    if n == 0 or clopper_pearson(n, n, tail)[0] < t:
        return None
    lo, hi = 0, n  # the lower bound grows with the right cases: bisect
    while lo < hi:
        mid = (lo + hi) // 2
        if clopper_pearson(mid, n, tail)[0] >= t:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _most_flips(n: int, f: float, tail: float) -> int | None:
    """The most negative flips of ``n`` cases whose upper bound stays within ``f``."""
    if n == 0 or clopper_pearson(0, n, tail)[1] > f:
        return None
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if clopper_pearson(mid, n, tail)[1] <= f:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _accuracy_power(n: int, t: float, p: float, tail: float) -> float:
    need = _least_right(n, t, tail)
    return _upper_tail(n, p, need) if need is not None else 0.0


def _flip_power(n: int, f: float, p: float, tail: float) -> float:
    most = _most_flips(n, f, tail)
    return _lower_tail(n, p, most) if most is not None else 0.0


def _upper_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the regularized incomplete beta I_p(k, n - k + 1)."""
    return 1.0 if k <= 0 else regularized_beta(k, n - k + 1, p)


def _lower_tail(n: int, p: float, k: int) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return 1.0 if k >= n else 1.0 - _upper_tail(n, p, k + 1)


def _normal_n(t: float, p: float, tail: float) -> int:
    """The normal approximation of the cases for DESIGN_POWER: where the exact search starts."""
    za, zb = NormalDist().inv_cdf(1 - tail), NormalDist().inv_cdf(DESIGN_POWER)
    spread = za * math.sqrt(t * (1 - t)) + zb * math.sqrt(p * (1 - p))
    return max(2, math.ceil((spread / abs(p - t)) ** 2))


def _cases_for(power_at: Callable[[int], float], guess: int) -> int | None:
    """About the fewest cases whose exact power reaches DESIGN_POWER (exact tests' power is a
    sawtooth in n: steps of 1 % of n from below the normal approximation's guess)."""
    n = max(2, guess * 3 // 4)
    while n <= MAX_CASES:
        if power_at(n) >= DESIGN_POWER:
            return n
        n += max(1, n // 100)
    return None

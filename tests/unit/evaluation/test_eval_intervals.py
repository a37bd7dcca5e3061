"""The evaluation's intervals against the reference statistics libraries, where both apply.

With one question per case the design effect is 1 and the cluster formulas reduce to the
textbook ones: Wilson's interval (statsmodels ``proportion_confint``), the z interval of a mean
(statsmodels ``DescrStatsW.zconfint_mean``) for Brier and the paired differences. The ECE
bounds have no library counterpart: their arithmetic is checked here against a direct
computation, their error rates by ``make bench-gates`` (bench/gate_errors.py).
"""

from __future__ import annotations

import math
import random

import pytest
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from decisionmodel.evaluation import ece_bounds
from decisionmodel.evaluation import intervals as iv
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.scoring import PairOutcome


def single(correct: bool, confidence: float) -> CaseRecord:
    return CaseRecord.of([PairOutcome(correct, confidence, correct)])


def sample(n: int, accuracy: float, seed: int) -> list[CaseRecord]:
    rng = random.Random(seed)
    return [single(rng.random() < accuracy, rng.uniform(0.5, 1.0)) for _ in range(n)]


@pytest.mark.parametrize(
    ("n", "p", "confidence"), [(500, 0.91, 0.95), (50, 0.6, 0.9), (200, 0.99, 0.99)]
)
def test_accuracy_is_clopper_pearson_with_one_question_per_case(
    n: int, p: float, confidence: float
) -> None:
    records = sample(n, p, seed=n)
    found = iv.accuracy(records, iv.z_of(confidence))
    correct = sum(r.correct for r in records)
    lower, upper = proportion_confint(correct, n, alpha=1 - confidence, method="beta")
    assert found.lower == pytest.approx(lower, abs=1e-9)
    assert found.upper == pytest.approx(upper, abs=1e-9)
    assert found.method == iv.EXACT


def test_brier_is_the_z_interval_of_the_per_case_mean() -> None:
    records = sample(300, 0.8, seed=7)
    found = iv.brier(records, iv.z_of(0.95))
    lower, upper = DescrStatsW([r.brier for r in records]).zconfint_mean(alpha=0.05)
    assert (round(found.lower, 4), round(found.upper, 4)) == (round(lower, 4), round(upper, 4))


def _tango_by_scipy(up: int, down: int, n: int, z: float) -> tuple[float, float]:
    """Tango's continuity-corrected score interval, solved independently with scipy."""
    from scipy.optimize import brentq, minimize_scalar

    def z_of(d: float) -> float:
        def minus_loglik(q: float) -> float:
            rest = 1 - 2 * q - d
            return -(up * math.log(q + d) + down * math.log(q) + (n - up - down) * math.log(rest))

        q = minimize_scalar(
            minus_loglik, bounds=(max(0, -d) + 1e-12, (1 - d) / 2 - 1e-12), method="bounded",
            options={"xatol": 1e-13},
        ).x  # fmt: skip
        excess = up - down - n * d
        return math.copysign(max(0.0, abs(excess) - 0.5), excess) / math.sqrt(
            n * (2 * q + d - d * d)
        )

    return brentq(lambda d: z_of(d) - z, -0.99, 0.99), brentq(lambda d: z_of(d) + z, -0.99, 0.99)


def test_paired_accuracy_difference_is_tango_s_score_interval() -> None:
    stable = sample(400, 0.9, seed=1)
    rng = random.Random(2)
    # The candidate agrees with the stable on most cases: pairing is what makes it sharp.
    candidate = [
        single(not s.right if rng.random() < 0.06 else s.right, s.points[0][1]) for s in stable
    ]
    found = iv.accuracy_difference(candidate, stable, iv.z_of(0.95))
    up = sum(c.right and not s.right for c, s in zip(candidate, stable, strict=True))
    down = sum(s.right and not c.right for c, s in zip(candidate, stable, strict=True))
    lower, upper = _tango_by_scipy(up, down, 400, iv.z_of(0.95))
    assert found.lower == pytest.approx(lower, abs=1e-5)
    assert found.upper == pytest.approx(upper, abs=1e-5)
    assert found.estimate == (up - down) / 400 and found.method == iv.SCORE_DIFFERENCE
    # Sharper than the two separate intervals would allow.
    separate = iv.accuracy(candidate, 1.96).half_width + iv.accuracy(stable, 1.96).half_width
    assert found.half_width < separate / 2


def test_flip_rates_are_clopper_pearson_on_case_counts() -> None:
    stable = sample(250, 0.85, seed=3)
    candidate = sample(250, 0.85, seed=4)
    negative, positive = iv.flip_rates(candidate, stable, iv.z_of(0.95))
    count = sum(s.right and not c.right for c, s in zip(candidate, stable, strict=True))
    lower, upper = proportion_confint(count, 250, alpha=0.05, method="beta")
    assert negative.estimate == count / 250
    assert negative.lower == pytest.approx(lower, abs=1e-9)
    assert negative.upper == pytest.approx(upper, abs=1e-9)
    assert positive.lower <= positive.estimate <= positive.upper


def test_clustered_questions_widen_the_accuracy_interval() -> None:
    """Three questions per case, all right or all wrong together: the information is that of
    the cases, not of three times as many independent pairs."""
    rng = random.Random(5)
    records = []
    for _ in range(200):
        right = rng.random() < 0.8
        records.append(CaseRecord.of([PairOutcome(right, 0.8, right)] * 3))
    clustered = iv.accuracy(records, iv.z_of(0.95))
    lower, upper = proportion_confint(sum(r.correct for r in records) // 3, 200, 0.05, "beta")
    assert clustered.method == iv.EXACT_CLUSTERED
    # The design effect is 3 · n/(n-1): the 200 cases count as 199.
    assert clustered.lower == pytest.approx(lower, abs=2e-3)
    assert clustered.upper == pytest.approx(upper, abs=2e-3)


def test_all_right_clustered_cases_count_as_cases_not_pairs() -> None:
    """Issue 35: 100 cases of 10 all-or-nothing questions, every one right. The data cannot
    show how alike the questions are: the design effect is the most it can be (10), so the
    bound is that of 100 cases, not 1,000 pairs, and minAccuracy 0.98 is not proven."""
    records = [CaseRecord.of([PairOutcome(True, 0.9, True)] * 10) for _ in range(100)]
    found = iv.accuracy(records, iv.z_of(0.95))
    lower, _ = proportion_confint(100, 100, alpha=0.05, method="beta")
    assert found.lower == pytest.approx(lower, abs=1e-9)
    assert found.lower < 0.98


def test_no_discordant_case_still_leaves_an_interval() -> None:
    stable = sample(100, 0.9, seed=9)
    found = iv.accuracy_difference(stable, stable, iv.z_of(0.95))
    assert found.estimate == 0
    assert found.lower < 0 < found.upper  # one case changing sides is the finest claim


def test_the_ece_bounds_are_the_plug_in_plus_and_minus_their_linear_terms() -> None:
    from statistics import NormalDist

    from decisionmodel.evaluation.metrics import ece_bin_index

    records = sample(300, 0.8, seed=11)
    found = ece_bounds.ece_interval(records, 0.95)
    # The plug-in by hand: Σ_b |Σ (right - confidence)| / N.
    gaps = [0.0] * 10
    for r in records:
        ((_, confidence, right),) = r.points
        gaps[ece_bin_index(confidence)] += right - confidence
    assert found.estimate == pytest.approx(sum(abs(g) for g in gaps) / 300, abs=1e-12)
    # Upper: z at 0.975 times the standard error of the signed residuals' mean (one point per
    # case: statsmodels' std_mean), or the binomial floor when larger, on top of the plug-in.
    signs = [1.0 if g >= 0 else -1.0 for g in gaps]
    y = [signs[r.points[0][0]] * (r.points[0][2] - r.points[0][1]) for r in records]
    right = sum(r.correct for r in records)
    floor = ((right + 1) / 302 * (1 - (right + 1) / 302) / 300) ** 0.5
    z = NormalDist().inv_cdf(0.975)
    se = max(DescrStatsW(y).std_mean, floor)
    assert found.upper == pytest.approx(found.estimate + z * se, abs=1e-12)
    assert 0.0 <= found.lower <= found.estimate <= found.upper
    assert ece_bounds.ece_interval(records, 0.95) == found  # no seed, no randomness


def test_a_calibrated_sample_s_lower_bound_ignores_the_plug_in_bias() -> None:
    rng = random.Random(3)
    calibrated = []
    for _ in range(50):
        c = rng.uniform(0.5, 0.9)
        calibrated.append(single(rng.random() < c, c))
    found = ece_bounds.ece_interval(calibrated, 0.95)
    assert found.estimate > 0.05  # the plug-in's upward bias at 50 cases
    assert found.lower == 0.0


def test_the_ece_difference_of_a_revision_with_itself_straddles_zero() -> None:
    records = sample(200, 0.8, seed=12)
    found = ece_bounds.ece_difference(records, records, 0.95)
    assert found.estimate == 0.0 and found.lower < 0.0 < found.upper
    own = ece_bounds.ece_bounds(records, 0.0125)
    assert found.upper == pytest.approx(own.upper - own.lower)


def test_phase_memory_resumes_only_what_the_heartbeat_counts() -> None:
    from decisionmodel.evaluation.phase_memory import PhaseMemoryStore

    store = PhaseMemoryStore(size=2)
    memory = store.memory(("wf", "1", "candidate"), 0)
    for record in sample(3, 0.9, seed=14):
        memory.add(record)
    assert store.memory(("wf", "1", "candidate"), 3) is memory
    # The last heartbeat the server kept lags: the first two cases.
    lagging = store.memory(("wf", "1", "candidate"), 2)
    assert lagging.records == memory.records[:2]
    assert store.memory(("wf", "1", "candidate"), 5).records == []  # more than kept


def test_one_case_of_several_questions_counts_as_one_case() -> None:
    """A single case has no spread to show how alike its questions are: its ten questions are
    not ten independent pairs."""
    one = [CaseRecord.of([PairOutcome(i < 7, 0.8, i < 7) for i in range(10)])]
    found = iv.accuracy(one, iv.z_of(0.95))
    lower, upper = proportion_confint(0.7, 1, alpha=0.05, method="beta")
    assert found.lower == pytest.approx(lower, abs=1e-9) and found.upper == pytest.approx(upper)

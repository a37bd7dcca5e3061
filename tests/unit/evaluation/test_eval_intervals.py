"""The evaluation's intervals against the reference statistics libraries, where both apply.

With one question per case the design effect is 1 and the cluster formulas reduce to the
textbook ones: Wilson's interval (statsmodels ``proportion_confint``), the z interval of a mean
(statsmodels ``DescrStatsW.zconfint_mean``) for Brier and the paired differences. The ECE
bootstrap has no library counterpart; it is checked for determinism, for pairing (the
difference interval is narrower than the separate ones suggest) and for covering its estimate.
"""

from __future__ import annotations

import random

import pytest
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from decisionmodel.evaluation import ece_bootstrap as boot
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
def test_accuracy_is_wilson_with_one_question_per_case(n: int, p: float, confidence: float) -> None:
    records = sample(n, p, seed=n)
    found = iv.accuracy(records, iv.z_of(confidence))
    correct = sum(r.correct for r in records)
    lower, upper = proportion_confint(correct, n, alpha=1 - confidence, method="wilson")
    assert (round(found.lower, 4), round(found.upper, 4)) == (round(lower, 4), round(upper, 4))
    assert found.method == iv.WILSON


def test_brier_is_the_z_interval_of_the_per_case_mean() -> None:
    records = sample(300, 0.8, seed=7)
    found = iv.brier(records, iv.z_of(0.95))
    lower, upper = DescrStatsW([r.brier for r in records]).zconfint_mean(alpha=0.05)
    assert (round(found.lower, 4), round(found.upper, 4)) == (round(lower, 4), round(upper, 4))


def test_paired_accuracy_difference_is_the_z_interval_of_per_case_differences() -> None:
    stable = sample(400, 0.9, seed=1)
    rng = random.Random(2)
    # The candidate agrees with the stable on most cases: pairing is what makes it sharp.
    candidate = [
        single(not s.right if rng.random() < 0.06 else s.right, s.points[0][1]) for s in stable
    ]
    found = iv.accuracy_difference(candidate, stable, iv.z_of(0.95))
    diffs = [c.correct - s.correct for c, s in zip(candidate, stable, strict=True)]
    lower, upper = DescrStatsW(diffs).zconfint_mean(alpha=0.05)
    assert (round(found.lower, 4), round(found.upper, 4)) == (round(lower, 4), round(upper, 4))
    # Sharper than the two separate Wilson intervals would allow.
    separate = iv.accuracy(candidate, 1.96).half_width + iv.accuracy(stable, 1.96).half_width
    assert found.half_width < separate / 2


def test_flip_rates_are_wilson_on_case_counts() -> None:
    stable = sample(250, 0.85, seed=3)
    candidate = sample(250, 0.85, seed=4)
    negative, positive = iv.flip_rates(candidate, stable, iv.z_of(0.95))
    count = sum(s.right and not c.right for c, s in zip(candidate, stable, strict=True))
    lower, upper = proportion_confint(count, 250, alpha=0.05, method="wilson")
    assert negative.estimate == count / 250
    assert (round(negative.lower, 4), round(negative.upper, 4)) == (
        round(lower, 4),
        round(upper, 4),
    )
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
    lower, upper = proportion_confint(sum(r.correct for r in records) // 3, 200, 0.05, "wilson")
    assert clustered.method == iv.WILSON_CLUSTERED
    assert round(clustered.lower, 3) == round(lower, 3)
    assert round(clustered.upper, 3) == round(upper, 3)


def test_no_discordant_case_still_leaves_an_interval() -> None:
    stable = sample(100, 0.9, seed=9)
    found = iv.accuracy_difference(stable, stable, iv.z_of(0.95))
    assert found.estimate == 0
    assert found.lower < 0 < found.upper  # one case changing sides is the finest claim


def test_ece_bootstrap_is_deterministic_and_covers_its_estimate() -> None:
    records = sample(300, 0.8, seed=11)
    first = boot.ece_interval(records, 0.95, boot.seed_of("digest", "rev"))
    again = boot.ece_interval(records, 0.95, boot.seed_of("digest", "rev"))
    other = boot.ece_interval(records, 0.95, boot.seed_of("digest", "other"))
    assert first == again
    assert first != other
    assert first.lower <= first.estimate <= first.upper
    assert abs(first.estimate - boot.ece_of(records)) < 1e-12


def test_ece_difference_of_a_revision_with_itself_is_exactly_zero() -> None:
    records = sample(200, 0.8, seed=12)
    found = boot.ece_difference(records, records, 0.95, boot.seed_of("d"))
    assert (found.estimate, found.lower, found.upper) == (0.0, 0.0, 0.0)


def test_ece_sums_fed_case_by_case_give_the_batch_interval() -> None:
    records = sample(120, 0.8, seed=13)
    seed = boot.seed_of("digest", "rev", "ece")
    fed = boot.EceResamples(seed)
    for index, record in enumerate(records):
        fed.add(index, record)
    streamed = boot.ece_intervals(records, None, 0.95, seed, (fed, None))[0]
    assert streamed == boot.ece_interval(records, 0.95, seed)
    # Sums fed for other cases (a resumed attempt's partial feed) are not used.
    partial = boot.resamples_of(records[:60], seed)
    assert boot.ece_intervals(records, None, 0.95, seed, (partial, None))[0] == streamed


def test_phase_memory_resumes_only_what_the_heartbeat_counts() -> None:
    from decisionmodel.evaluation.phase_memory import PhaseMemoryStore

    store = PhaseMemoryStore(size=2)
    memory = store.memory(("wf", "1", "candidate"), 0, seed=5)
    for record in sample(3, 0.9, seed=14):
        memory.add(record)
    assert store.memory(("wf", "1", "candidate"), 3, seed=5) is memory
    # The last heartbeat the server kept lags: the first two cases, sums rebuilt for them.
    lagging = store.memory(("wf", "1", "candidate"), 2, seed=5)
    assert lagging.records == memory.records[:2] and lagging.resamples is not None
    assert lagging.resamples.values() == boot.resamples_of(memory.records[:2], 5).values()
    assert store.memory(("wf", "1", "candidate"), 5, seed=5).records == []  # more than kept
    assert store.memory(("wf", "1", "candidate"), 0, seed=None).resamples is None

"""Always-valid ECE gates (issue 35 item 4): bounds that hold at every case, a calibrated model
never failed for the plug-in's bias, a miscalibrated one failed, an increase against the stable,
and a state the ledger continues exactly."""

from __future__ import annotations

import random

import pytest

from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.scoring import PairOutcome
from decisionmodel.evaluation.sequential_ece import EceGate, case_gaps, ece_fed
from decisionmodel.vocabulary import EvaluationResult

PASSED, FAILED = EvaluationResult.PASSED, EvaluationResult.FAILED


def case(rng: random.Random, confidence: float, accuracy: float, points: int = 1) -> CaseRecord:
    outcomes = []
    for _ in range(points):
        right = rng.random() < accuracy
        outcomes.append(PairOutcome(right, confidence, right))
    return CaseRecord.of(outcomes)


def calibrated(rng: random.Random, points: int = 1) -> CaseRecord:
    c = rng.uniform(0.55, 1.0)
    return case(rng, c, c, points)


def test_a_case_gap_is_its_points_gap_per_bin_over_its_points() -> None:
    record = CaseRecord.of(
        [PairOutcome(True, 0.9, True), PairOutcome(False, 0.9, False), PairOutcome(True, 0.3, True)]
    )
    gaps = case_gaps(record)
    assert gaps[9] == pytest.approx((0.1 - 0.9) / 3) and gaps[3] == pytest.approx(0.7 / 3)
    assert sum(1 for g in gaps if g) == 2


def test_a_calibrated_model_passes_and_is_never_failed() -> None:
    """maxECE 0.1: a calibrated model passes within 1,500 cases (one point each) in every
    one of 20 seeded runs; its lower bound never leaves 0 in 200 runs of 300 cases."""
    for seed in range(20):
        rng = random.Random(seed)
        gate = ece_fed(
            EceGate.fresh(0.1, 0.025, False), [calibrated(rng) for _ in range(1500)], None
        )
        assert gate.verdict() == PASSED
    for seed in range(200):
        rng = random.Random(f"never-{seed}")
        gate = EceGate.fresh(0.02, 0.025, False)
        for _ in range(300):
            gate = gate.after(calibrated(rng), None)
            assert gate.verdict() != FAILED


def test_a_miscalibrated_model_fails_its_maxece() -> None:
    rng = random.Random(3)
    cases = [case(rng, 0.9, 0.7) for _ in range(1000)]  # ECE 0.2
    gate = ece_fed(EceGate.fresh(0.05, 0.025, False), cases, None)
    lower, _ = gate.bounds()
    assert gate.verdict() == FAILED and lower > 0.05 and gate.cases < 1000


def test_an_increase_against_the_stable() -> None:
    rng = random.Random(5)
    stable = [case(rng, 0.8, 0.8) for _ in range(3000)]
    same = [case(rng, 0.8, 0.8) for _ in range(3000)]
    worse = [case(rng, 0.8, 0.55) for _ in range(3000)]  # ECE 0.25 more
    passed = ece_fed(EceGate.fresh(0.1, 0.025, True), same, stable)
    failed = ece_fed(EceGate.fresh(0.1, 0.025, True), worse, stable)
    assert passed.verdict() == PASSED and failed.verdict() == FAILED
    assert failed.bounds()[0] > 0.1 >= passed.bounds()[1]


def test_the_wire_state_continues_the_gate_exactly() -> None:
    rng = random.Random(9)
    cases = [calibrated(rng, points=3) for _ in range(400)]
    whole = ece_fed(EceGate.fresh(0.02, 0.025, False), cases, None)
    half = ece_fed(EceGate.fresh(0.02, 0.025, False), cases[:200], None)
    continued = ece_fed(EceGate.from_wire(half.to_wire()), cases[200:], None)
    assert continued == whole


def test_a_stricter_confidence_judges_the_same_sums_again() -> None:
    rng = random.Random(1)
    gate = ece_fed(EceGate.fresh(0.1, 0.05, False), [calibrated(rng) for _ in range(1500)], None)
    assert gate.verdict() == PASSED
    stricter = gate.at_alpha(1e-9)
    assert stricter.bounds()[1] > gate.bounds()[1] and stricter.candidate.n == gate.candidate.n


@pytest.mark.parametrize("increase", [False, True])
def test_at_its_threshold_the_gate_errs_within_its_bound(increase: bool) -> None:
    """The candidate's ECE exactly at the threshold (one bin: confidence 0.8, accuracy 0.7; an
    increase: the stable calibrated at 0.8), 150 runs of 600 cases, a look after every case:
    each side's error within alpha plus 2.58 Monte Carlo standard errors
    (bench/gate_looks.py runs more)."""
    passes = fails = 0
    runs = 150
    for seed in range(runs):
        rng = random.Random(f"{increase}-{seed}")
        cand = [case(rng, 0.8, 0.7) for _ in range(600)]
        stable = [case(rng, 0.8, 0.8) for _ in range(600)] if increase else None
        verdict = ece_fed(EceGate.fresh(0.1, 0.025, increase), cand, stable).verdict()
        passes += verdict == PASSED
        fails += verdict == FAILED
    bound = 0.025 + 2.58 * (0.025 * 0.975 / runs) ** 0.5
    assert passes / runs <= bound and fails / runs <= bound

"""Always-valid gates by betting (decisionmodel/evaluation/sequential.py): the error at the
threshold under a look after every case stays within alpha, a clear candidate is decided
early, and the state carried to a later evaluation continues the same test."""

from __future__ import annotations

import json
import random

import pytest

from decisionmodel.evaluation.sequential import SequentialGate, run_until_decided
from decisionmodel.vocabulary import EvaluationResult

ALPHA = 0.025  # confidence 0.95: each side's bound


def _bernoulli(rng: random.Random, p: float, n: int) -> list[float]:
    return [1.0 if rng.random() < p else 0.0 for _ in range(n)]


@pytest.mark.parametrize(("threshold", "side"), [(0.9, "min"), (0.6, "min"), (0.05, "max")])
def test_at_the_threshold_a_look_after_every_case_errs_at_most_alpha(
    threshold: float, side: str
) -> None:
    """The truth is the threshold: both nulls hold, so Passed and Failed each within alpha,
    although the gate is judged after every one of 400 cases and stops at its first verdict.
    (1,000 seeded runs: the Monte Carlo error of alpha is about 0.005.)"""
    rng = random.Random(35)
    runs, passed, failed = 1000, 0, 0
    for _ in range(runs):
        gate = SequentialGate(threshold, "min" if side == "min" else "max", ALPHA)
        gate, _ = run_until_decided(gate, _bernoulli(rng, threshold, 400))
        passed += gate.verdict() == EvaluationResult.PASSED
        failed += gate.verdict() == EvaluationResult.FAILED
    bound = ALPHA + 3 * (ALPHA * (1 - ALPHA) / runs) ** 0.5
    assert passed / runs <= bound and failed / runs <= bound, (passed, failed)


def test_a_clear_candidate_is_decided_long_before_the_dataset_ends() -> None:
    rng = random.Random(36)
    used = []
    for _ in range(200):
        gate, n = run_until_decided(SequentialGate(0.85, "min", ALPHA), _bernoulli(rng, 0.95, 2000))
        assert gate.verdict() == EvaluationResult.PASSED
        used.append(n)
    assert sum(used) / len(used) < 200, sum(used) / len(used)


def test_a_clearly_worse_candidate_fails_early() -> None:
    rng = random.Random(37)
    gate, n = run_until_decided(SequentialGate(0.9, "min", ALPHA), _bernoulli(rng, 0.7, 2000))
    assert gate.verdict() == EvaluationResult.FAILED and n < 150


def test_a_later_evaluation_continues_the_same_test() -> None:
    """Carrying the state and feeding more cases is the same as one run over all of them:
    added cases extend the test, they do not start a fresh one."""
    rng = random.Random(38)
    outcomes = _bernoulli(rng, 0.9, 300)
    once = SequentialGate(0.88, "min", ALPHA)
    for x in outcomes:
        once = once.after(x)
    first = SequentialGate(0.88, "min", ALPHA)
    for x in outcomes[:120]:
        first = first.after(x)
    # What a ledger keeps between the two evaluations, through JSON and back.
    later = SequentialGate.from_wire(json.loads(json.dumps(first.to_wire())))
    assert later == first and later.cases == 120
    for x in outcomes[120:]:
        later = later.after(x)
    assert once == later and once.cases == 300
    fresh = SequentialGate(0.88, "min", ALPHA)
    for x in outcomes[120:]:
        fresh = fresh.after(x)
    assert fresh.evidence() != once.evidence()  # a fresh start is another test


def test_an_outcome_outside_its_range_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        SequentialGate(0.1, "max", ALPHA, lo=-1.0, hi=1.0).after(1.5)

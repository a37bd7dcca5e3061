"""Accumulating an evaluation one case at a time, and the figures: accuracy, ECE, Brier.

Every expected figure is computed by hand in the comments next to it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic import ValidationError

from decisionmodel.evaluation import (
    EvaluationFigures,
    EvaluationProgress,
    GoldenCase,
    ece_bin_index,
    finalize,
    parse_dataset,
)
from decisionmodel.evaluation.scoring import score_case

MARKER = "SECRET-GOLDEN-CONTENT"


def dataset(*lines: dict[str, Any]) -> list[GoldenCase]:
    return parse_dataset("\n".join(json.dumps(line) for line in lines).encode())


ROUTE = {"type": "choice", "criteria": {"billing": MARKER, "tech": "bugs"}}
URGENT = {"type": "noul"}
SEVERITY = {"type": "score", "criteria": ["low", "mid", "high"]}


def noul(p: float) -> dict[str, Any]:
    return {"type": "noul", "noul": p}


def choice(label: str, p: float) -> dict[str, Any]:
    return {"type": "choice", "choice": label, "probabilities": {label: p}}


# --- bins -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("confidence", "index"),
    [
        (0.0, 0),
        (0.0999, 0),
        (0.1, 1),  # exactly on the boundary: bin 1 (0.1 * 10 == 1.0 in binary)
        (0.25, 2),
        (0.5, 5),
        (0.95, 9),
        (0.9999, 9),
        (1.0, 9),  # int(1.0 * 10) = 10, capped to the last bin
    ],
)
def test_ece_bin_index(confidence: float, index: int) -> None:
    assert ece_bin_index(confidence) == index


def test_every_tenth_lands_in_its_own_bin() -> None:
    # 0.3 * 10 and 0.6 * 10 and 0.7 * 10 must not fall just below their integer.
    assert [ece_bin_index(k / 10) for k in range(11)] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9]


# --- a hand-computed run --------------------------------------------------------------------

HAND_CASES: list[dict[str, Any]] = [
    {
        "state": MARKER,
        "questions": {"route": ROUTE, "urgent": URGENT},
        "expected": {"route": "billing", "urgent": False},
    },
    {
        "state": {"text": MARKER},
        "questions": {"route": ROUTE, "urgent": URGENT, "severity": SEVERITY},
        "expected": {"route": "billing", "urgent": False, "severity": 2},
    },
    {"state": [MARKER], "questions": {"urgent": URGENT}, "expected": {"urgent": True}},
]
HAND_ANSWERS: list[dict[str, Any]] = [
    # A: choice right, confidence 0.9 (bin 9). C: p = 0.2 → false, right, confidence 0.8 (bin 8).
    {"route": choice("billing", 0.9), "urgent": noul(0.2)},
    # B: choice wrong, confidence 0.7 (bin 7). D: p = 0.95 → true, wrong, confidence 0.95
    # (bin 9). F: score 1.5, |1.5 - 2| = 0.5 <= 0.5 right; max probability 0.6 at level 2
    # == expected: calibration point (0.6, True) (bin 6).
    {
        "route": choice("tech", 0.7),
        "urgent": noul(0.95),
        "severity": {
            "type": "score",
            "score": 1.5,
            "probabilities": {"0": 0.1, "1": 0.3, "2": 0.6},
        },
    },
    # E: missing, (0.0, False) in bin 0.
    {},
]


def run(cases: list[GoldenCase], answers: list[dict[str, Any]]) -> EvaluationProgress:
    progress = EvaluationProgress()
    for case, answer in zip(cases, answers, strict=True):
        progress.add_case(case, answer)
    return progress


def test_hand_computed_accuracy_ece_and_brier() -> None:
    progress = run(dataset(*HAND_CASES), HAND_ANSWERS)
    # Six pairs A..F; right: A, C, F → 3.
    assert (progress.pairs, progress.correct, progress.cases) == (6, 3, 3)
    assert progress.bin_counts == [1, 0, 0, 0, 0, 0, 1, 1, 1, 2]
    assert progress.bin_correct == [0, 0, 0, 0, 0, 0, 1, 0, 1, 1]
    figures = finalize(progress)
    assert figures.accuracy == 0.5  # 3 / 6
    # ECE, per non-empty bin (n_b/N)·|acc_b - conf_b|, N = 6:
    #   bin 0: E      1/6 · |0 - 0.0|             = 0
    #   bin 6: F      1/6 · |1 - 0.6|             = 0.4/6
    #   bin 7: B      1/6 · |0 - 0.7|             = 0.7/6
    #   bin 8: C      1/6 · |1 - 0.8|             = 0.2/6
    #   bin 9: A, D   2/6 · |1/2 - (0.9+0.95)/2|  = 2/6 · 0.425 = 0.85/6
    #   sum = (0.4 + 0.7 + 0.2 + 0.85) / 6 = 2.15 / 6 = 0.358333…
    assert figures.ece == pytest.approx(2.15 / 6, abs=1e-12)
    # Brier = mean (c - correct)²:
    #   A (0.9-1)² = 0.01, B 0.7² = 0.49, C (0.8-1)² = 0.04, D 0.95² = 0.9025, E 0, F
    #   (0.6-1)² = 0.16; sum 1.6025; / 6 = 0.267083…
    assert figures.brier == pytest.approx(1.6025 / 6, abs=1e-12)
    assert figures.model_dump() == {
        "accuracy": 0.5,
        "ece": figures.ece,
        "brier": figures.brier,
        "cases": 3,
        "pairs": 6,
        "correct": 3,
        "failed_cases": 2,  # cases with a wrong or missing answer: the 2nd (B, D), the 3rd (E)
    }
    assert figures.rendered() == {"accuracy": "0.5000", "ece": "0.3583", "brier": "0.2671"}


def test_a_missing_answer_dilutes_ece_and_brier() -> None:
    # One point (0.9, right): ECE = |1 - 0.9| = 0.1, Brier = 0.01.
    (one,) = dataset(HAND_CASES[2])
    alone = EvaluationProgress()
    alone.add_case(one, {"urgent": noul(0.9)})
    assert finalize(alone).ece == pytest.approx(0.1)
    assert finalize(alone).brier == pytest.approx(0.01)
    # Plus a missing pair (0.0, wrong): bin 0 adds |0 - 0| = 0 and N doubles: ECE = 1/2 · 0.1
    # = 0.05, Brier = 0.01 / 2 = 0.005, accuracy 1/2. This is the documented price of giving a
    # missing answer confidence 0; the accuracy gate carries the penalty.
    (two,) = dataset(
        {
            "state": "s",
            "questions": {"urgent": URGENT, "gone": URGENT},
            "expected": {"urgent": True, "gone": True},
        }
    )
    diluted = EvaluationProgress()
    diluted.add_case(two, {"urgent": noul(0.9)})
    figures = finalize(diluted)
    assert (figures.accuracy, figures.ece, figures.brier) == pytest.approx((0.5, 0.05, 0.005))


def test_empty_bins_contribute_nothing() -> None:
    # All four points in bin 7: confidences 0.7, 0.7, 0.75, 0.75; right 3 of 4.
    # ECE = 4/4 · |3/4 - (0.7+0.7+0.75+0.75)/4| = |0.75 - 0.725| = 0.025; the nine empty bins
    # add nothing (and do not divide by zero).
    cases = dataset(*[HAND_CASES[2]] * 4)
    answers = [{"urgent": noul(p)} for p in (0.7, 0.3, 0.75, 0.75)]  # 0.3 → false: wrong
    progress = run(cases, answers)
    assert progress.bin_counts == [0, 0, 0, 0, 0, 0, 0, 4, 0, 0]
    figures = finalize(progress)
    assert figures.accuracy == 0.75
    assert figures.ece == pytest.approx(0.025)
    # Brier: (0.7-1)² + 0.7² + (0.75-1)² · 2 = 0.09 + 0.49 + 0.125 = 0.705; / 4 = 0.17625.
    assert figures.brier == pytest.approx(0.17625)


def test_bin_boundaries_one_and_a_tenth_exactly() -> None:
    # c = 1.0 right → bin 9; c = 0.1 (a wrong choice with probability 0.1) → bin 1.
    line = {
        "state": "s",
        "questions": {"route": ROUTE, "urgent": URGENT},
        "expected": {"route": "billing", "urgent": True},
    }
    (case,) = dataset(line)
    progress = EvaluationProgress()
    progress.add_case(case, {"route": choice("tech", 0.1), "urgent": noul(1.0)})
    assert progress.bin_counts == [0, 1, 0, 0, 0, 0, 0, 0, 0, 1]
    assert progress.bin_correct == [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    # ECE = 1/2 · |0 - 0.1| + 1/2 · |1 - 1.0| = 0.05. Brier = (0.1² + 0²) / 2 = 0.005.
    figures = finalize(progress)
    assert (figures.ece, figures.brier) == pytest.approx((0.05, 0.005))


def test_score_calibration_with_probabilities_not_summing_to_one() -> None:
    # Probabilities sum to 0.8, used as given: confidence 0.5 at level 1 (argmax) != expected 2,
    # so the calibration point is (0.5, False) in bin 5, though |1.8 - 2| = 0.2 is right.
    (case,) = dataset({"state": "s", "questions": {"s": SEVERITY}, "expected": {"s": 2}})
    progress = EvaluationProgress()
    answer = {"type": "score", "score": 1.8, "probabilities": {"0": 0.0, "1": 0.5, "2": 0.3}}
    progress.add_case(case, {"s": answer})
    assert progress.bin_counts[5] == 1 and progress.bin_correct[5] == 0
    figures = finalize(progress)
    # Accuracy 1/1; ECE |0 - 0.5| = 0.5; Brier 0.5² = 0.25.
    assert (figures.accuracy, figures.ece, figures.brier) == pytest.approx((1.0, 0.5, 0.25))


def test_a_failed_case_counts_all_its_pairs_wrong() -> None:
    cases = dataset(*HAND_CASES)
    progress = EvaluationProgress()
    progress.add_case(cases[0], HAND_ANSWERS[0])
    progress.add_failed_case(cases[1])  # three pairs, all (0.0, False)
    progress.add_case(cases[2], {"urgent": noul(0.9)})
    figures = finalize(progress)
    # Pairs: 2 + 3 + 1 = 6. Right: A (0.9), C (0.8), the last one (0.9) → 3 of 6.
    assert (figures.cases, figures.failed_cases, figures.pairs, figures.correct) == (3, 1, 6, 3)
    assert progress.bin_counts == [3, 0, 0, 0, 0, 0, 0, 0, 1, 2]
    # ECE: bin 0 three (0, wrong) → 0; bin 8: 1/6 · |1 - 0.8| = 0.2/6;
    # bin 9: 2/6 · |1 - 0.9| = 0.2/6; total 0.4/6 = 0.0666…
    assert figures.ece == pytest.approx(0.4 / 6)
    # Brier: (0.01 + 0.04 + 0.01) / 6 = 0.01.
    assert figures.brier == pytest.approx(0.01)


def test_cases_must_be_fed_in_order() -> None:
    cases = dataset(*HAND_CASES)
    progress = EvaluationProgress()
    with pytest.raises(ValueError, match="case 1 given, but the next case to evaluate is 0"):
        progress.add_case(cases[1], {})
    progress.add_case(cases[0], {})
    with pytest.raises(ValueError):
        progress.add_failed_case(cases[0])  # fed twice
    assert progress.next_case_index == 1


def test_no_pairs_gives_zero_figures() -> None:
    figures = finalize(EvaluationProgress())
    assert figures == EvaluationFigures(
        accuracy=0.0, ece=0.0, brier=0.0, cases=0, pairs=0, correct=0, failed_cases=0
    )
    assert figures.rendered() == {"accuracy": "0.0000", "ece": "0.0000", "brier": "0.0000"}


# --- resume ---------------------------------------------------------------------------------


def random_run(seed: int, n: int) -> tuple[list[GoldenCase], list[dict[str, Any]]]:
    """n cases with three questions each and answers with arbitrary float probabilities (not
    4-decimal ones), so any change of summation order would show in the last bits."""
    rng = random.Random(seed)
    cases = dataset(
        *[
            {
                "state": f"{MARKER}-{i}",
                "questions": {"route": ROUTE, "urgent": URGENT, "severity": SEVERITY},
                "expected": {
                    "route": rng.choice(["billing", "tech"]),
                    "urgent": rng.random() < 0.5,
                    "severity": rng.randrange(3),
                },
                "tolerance": {"severity": rng.choice([0, 0.5, 1])},
            }
            for i in range(n)
        ]
    )
    answers: list[dict[str, Any]] = []
    for _ in range(n):
        p0, p1 = rng.random() / 2, rng.random() / 2
        answer: dict[str, Any] = {
            "route": choice(rng.choice(["billing", "tech"]), rng.random()),
            "urgent": noul(rng.random()),
            "severity": {
                "type": "score",
                "score": rng.uniform(0, 2),
                "probabilities": {"0": p0, "1": p1, "2": 1 - p0 - p1},
            },
        }
        if rng.random() < 0.2:
            del answer[rng.choice(["route", "urgent", "severity"])]
        answers.append(answer)
    return cases, answers


def feed(progress: EvaluationProgress, cases: list[GoldenCase], answers: list[Any]) -> None:
    for case in cases[progress.next_case_index :]:
        answer = answers[case.index]
        if case.index % 7 == 3:
            progress.add_failed_case(case)
        else:
            progress.add_case(case, answer)


@pytest.mark.parametrize("split", [0, 1, 5, 12, 29, 30])
def test_resuming_from_a_heartbeat_gives_identical_figures(split: int) -> None:
    cases, answers = random_run(seed=20260, n=30)
    whole = EvaluationProgress()
    feed(whole, cases, answers)

    first = EvaluationProgress()
    feed(first, cases[:split], answers)
    # What Temporal stores: the JSON of the heartbeat details, read back on the next attempt.
    heartbeat = json.dumps(first.model_dump(mode="json"))
    resumed = EvaluationProgress.model_validate(json.loads(heartbeat))
    assert resumed.next_case_index == split
    feed(resumed, cases, answers)

    assert resumed == whole
    assert finalize(resumed) == finalize(whole)  # exactly, not approximately
    # Cases with a wrong or missing answer: the 4 refused (indices 3, 10, 17, 24) and every
    # answered one with a pair scored wrong.
    answered_wrong = sum(
        1
        for case in cases
        if case.index % 7 != 3 and not all(o.correct for o in score_case(case, answers[case.index]))
    )
    assert finalize(whole).failed_cases == 4 + answered_wrong


def test_pydantic_json_round_trip_is_exact_too() -> None:
    cases, answers = random_run(seed=7, n=12)
    progress = EvaluationProgress(dataset_digest="ab" * 32)
    feed(progress, cases, answers)
    again = EvaluationProgress.model_validate_json(progress.model_dump_json())
    assert again == progress
    assert finalize(again) == finalize(progress)


def test_progress_holds_numbers_only_and_stays_small() -> None:
    cases, answers = random_run(seed=1, n=200)
    progress = EvaluationProgress()
    feed(progress, cases, answers)
    text = progress.model_dump_json()
    assert MARKER not in text
    for word in ("billing", "tech", "urgent", "route", "severity"):
        assert word not in text
    # Independent of the dataset size: 10 bins and at most 172 confusion cells of a fixed
    # vocabulary (confusion.py).
    assert len(text) < 8192


@pytest.mark.parametrize(
    "change",
    [
        {"bin_counts": [0] * 9},  # not 10 bins
        {"pairs": 1},  # bins add up to 0
        {"correct": 1},  # more right than pairs
        {"failed_cases": 1},  # more failed than cases
        {"bin_counts": [1] + [0] * 9, "pairs": 1, "bin_correct": [2] + [0] * 9},
        {"bin_counts": [1] + [0] * 9, "pairs": 1, "bin_confidence_sums": [1.5] + [0.0] * 9},
        {"bin_counts": [1] + [0] * 9, "pairs": 1, "brier_sum": 2.0},
        {"next_case_index": -1},
        {"unknown": 1},
    ],
)
def test_inconsistent_heartbeat_details_are_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        EvaluationProgress.model_validate(EvaluationProgress().model_dump() | change)

"""Scoring one answer: correctness and the calibration point, per question type."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from decisionmodel.evaluation import (
    MISSING,
    Expectation,
    PairOutcome,
    parse_dataset,
    score_answer,
    score_case,
)

CHOICE = Expectation("choice", "billing")
NOUL_TRUE = Expectation("noul", True)
NOUL_FALSE = Expectation("noul", False)
SCORE_2 = Expectation("score", 2, Decimal("0.5"))


def choice(label: str, probabilities: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "choice", "choice": label, "probabilities": probabilities, **extra}


def score(value: Any, probabilities: Any) -> dict[str, Any]:
    return {"type": "score", "score": value, "probabilities": probabilities}


# --- choice ---------------------------------------------------------------------------------


def test_choice_right_label_uses_the_probability_of_the_chosen_label() -> None:
    # RUNTIME_API.md's example: confidence 0.84 is the normalised figure; the calibration point
    # is probabilities[choice] = 0.92.
    answer = choice("billing", {"billing": 0.92, "tech": 0.08}, confidence=0.84)
    assert score_answer(CHOICE, answer) == PairOutcome(True, 0.92, True)


def test_choice_wrong_label_keeps_the_models_confidence_in_its_own_choice() -> None:
    answer = choice("tech", {"billing": 0.3, "tech": 0.7})
    assert score_answer(CHOICE, answer) == PairOutcome(False, 0.7, False)


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "billing",
        choice("billing", {"tech": 1.0}),  # no probability for the chosen label
        choice("billing", []),
        {"type": "choice", "choice": "billing"},
        choice("billing", {"billing": 1.2}),
        choice("billing", {"billing": -0.1}),
        choice("billing", {"billing": float("nan")}),
        choice("billing", {"billing": True}),
        choice("billing", {"billing": "0.9"}),
        {"type": "noul", "noul": 0.9},  # an answer of another type
        {"type": "choice", "choice": 1, "probabilities": {"1": 0.9}},
    ],
)
def test_a_malformed_choice_answer_is_missing(answer: Any) -> None:
    assert score_answer(CHOICE, answer) == MISSING == PairOutcome(False, 0.0, False)


def test_the_type_field_may_be_absent_but_not_different() -> None:
    answer = {"choice": "billing", "probabilities": {"billing": 0.6, "tech": 0.4}}
    assert score_answer(CHOICE, answer) == PairOutcome(True, 0.6, True)


# --- noul -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expectation", "p", "outcome"),
    [
        (NOUL_TRUE, 0.71, PairOutcome(True, 0.71, True)),
        # p = 0.5 means true (p >= 0.5); confidence max(0.5, 0.5) = 0.5.
        (NOUL_TRUE, 0.5, PairOutcome(True, 0.5, True)),
        (NOUL_FALSE, 0.5, PairOutcome(False, 0.5, False)),
        # p = 0.2 means false: confidence max(0.2, 1 - 0.2) = 0.8.
        (NOUL_TRUE, 0.2, PairOutcome(False, 0.8, False)),
        (NOUL_FALSE, 0.2, PairOutcome(True, 0.8, True)),
        (NOUL_FALSE, 0, PairOutcome(True, 1.0, True)),
        (NOUL_TRUE, 1, PairOutcome(True, 1.0, True)),
    ],
)
def test_noul(expectation: Expectation, p: float, outcome: PairOutcome) -> None:
    assert score_answer(expectation, {"type": "noul", "noul": p}) == outcome


@pytest.mark.parametrize("p", [None, True, "0.7", 1.01, -0.01, float("inf")])
def test_a_malformed_noul_answer_is_missing(p: Any) -> None:
    assert score_answer(NOUL_TRUE, {"type": "noul", "noul": p}) is MISSING


# --- score ----------------------------------------------------------------------------------


def test_score_within_the_band_with_a_matching_argmax() -> None:
    # RUNTIME_API.md's example: score 1.7 = 0·0.1 + 1·0.1 + 2·0.8; |1.7 - 2| = 0.3 <= 0.5;
    # calibration: max probability 0.8 at level 2 == expected 2.
    answer = score(1.7, {"0": 0.1, "1": 0.1, "2": 0.8})
    assert score_answer(SCORE_2, answer) == PairOutcome(True, 0.8, True)


def test_score_band_is_inclusive() -> None:
    probs = {"0": 0.0, "1": 0.5, "2": 0.5}
    # |1.5 - 2| = 0.5 <= 0.5. Argmax tie between levels 1 and 2 goes to the lowest: 1 != 2.
    assert score_answer(SCORE_2, score(1.5, probs)) == PairOutcome(True, 0.5, False)
    # |1.4999 - 2| = 0.5001 > 0.5.
    assert score_answer(SCORE_2, score(1.4999, probs)).correct is False
    # |2.5 - 2| = 0.5 on the other side.
    assert score_answer(SCORE_2, score(2.5, probs)).correct is True


def test_score_band_is_compared_on_the_decimals_as_written() -> None:
    # In binary floats 2.6 - 2 = 0.6000000000000001 > 0.6; as written it is 0.6 <= 0.6.
    assert 2.6 - 2 > 0.6
    tol_06 = Expectation("score", 2, Decimal("0.6"))
    probs = {"0": 0.2, "1": 0.2, "2": 0.6}
    assert score_answer(tol_06, score(2.6, probs)).correct is True
    assert score_answer(tol_06, score(2.6001, probs)).correct is False
    assert score_answer(tol_06, score(1.4, probs)).correct is True


def test_zero_tolerance_means_exactly_the_level() -> None:
    exact = Expectation("score", 2, Decimal("0"))
    probs = {"0": 0.0, "1": 0.0, "2": 1.0}
    assert score_answer(exact, score(2, probs)) == PairOutcome(True, 1.0, True)
    assert score_answer(exact, score(2.0001, probs)).correct is False


def test_score_right_by_band_but_wrong_by_argmax() -> None:
    # |1.6 - 2| = 0.4 <= 0.5: correct for accuracy. Argmax is level 1 (0.5) != 2: the
    # calibration point is (0.5, False).
    answer = score(1.6, {"0": 0.0, "1": 0.5, "2": 0.4, "3": 0.1})
    assert score_answer(SCORE_2, answer) == PairOutcome(True, 0.5, False)


def test_score_probabilities_that_do_not_sum_to_one_are_used_as_given() -> None:
    # Sum 0.3 + 0.3 + 0.2 = 0.8. Renormalised, the max would be 0.3 / 0.8 = 0.375; as given it
    # stays 0.3. Argmax tie 0/1 goes to level 0 != 2. |0.7 - 2| = 1.3 > 0.5: wrong.
    answer = score(0.7, {"0": 0.3, "1": 0.3, "2": 0.2})
    assert score_answer(SCORE_2, answer) == PairOutcome(False, 0.3, False)
    # Sum 0.9 + 0.9 = 1.8 > 1: the max 0.9 is used as given too.
    answer = score(1.9, {"1": 0.9, "2": 0.9, "0": 0.0})
    assert score_answer(SCORE_2, answer) == PairOutcome(True, 0.9, False)


def test_score_levels_are_read_as_numbers_not_strings() -> None:
    # "10" sorts before "2" as text; level 10 beats level 2 only by probability.
    expected_10 = Expectation("score", 10, Decimal("0.5"))
    probs = {str(i): 0.0 for i in range(11)} | {"2": 0.4, "10": 0.6}
    assert score_answer(expected_10, score(9.8, probs)) == PairOutcome(True, 0.6, True)


@pytest.mark.parametrize(
    "answer",
    [
        score(None, {"0": 0.5, "1": 0.5}),
        score("2", {"0": 0.5, "1": 0.5}),
        score(float("nan"), {"0": 0.5, "1": 0.5}),
        score(2, None),
        score(2, {}),
        score(2, {"0": 0.5, "01": 0.5}),
        score(2, {"a": 0.5, "1": 0.5}),
        score(2, {"-1": 0.5, "1": 0.5}),
        score(2, {"0": 0.5, "1": 1.5}),
        {"type": "choice", "score": 2, "probabilities": {"2": 1.0}},
    ],
)
def test_a_malformed_score_answer_is_missing(answer: Any) -> None:
    assert score_answer(SCORE_2, answer) is MISSING


# --- a whole case ---------------------------------------------------------------------------


def test_score_case_follows_the_expected_questions_in_dataset_order() -> None:
    line = {
        "state": "s",
        "questions": {
            "a": {"type": "noul"},
            "b": {"type": "noul"},
            "unscored": {"type": "noul"},
        },
        "expected": {"b": True, "a": False},
    }
    (case,) = parse_dataset(json.dumps(line).encode())
    answers = {
        "a": {"type": "noul", "noul": 0.1},
        "unscored": {"type": "noul", "noul": 0.9},
    }
    # b is missing; a: p = 0.1 → false == expected false, confidence 0.9.
    assert score_case(case, answers) == [MISSING, PairOutcome(True, 0.9, True)]
    assert score_case(case, None) == [MISSING, MISSING]
    assert score_case(case, ["not", "an", "object"]) == [MISSING, MISSING]

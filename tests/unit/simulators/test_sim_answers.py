from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulators.answers import (
    calibration_point,
    case_uniform,
    confidence_of,
    count_correct_pairs,
    expected_accuracy,
    make_golden_set,
    model_answer,
    pair_correct,
    true_answer,
)

CHOICE = {"type": "choice", "criteria": {"a": "A", "b": "B", "c": "C", "d": "D"}}
NOUL = {"type": "noul", "criteria": {"true": "yes", "false": "no"}}


def score_q(levels: int) -> dict[str, Any]:
    return {"type": "score", "criteria": [f"level {i}" for i in range(levels)]}


def test_case_uniform_is_the_documented_hash() -> None:
    # Pinned formula: golden sets generated today must mean the same tomorrow.
    raw = json.dumps(["case", {"x": 1}, "q1"], sort_keys=True, separators=(",", ":"))
    digest = int.from_bytes(hashlib.sha256(raw.encode()).digest(), "big")
    assert case_uniform({"x": 1}, "q1") == (digest >> 203) / 2**53
    assert 0.0 <= case_uniform({"x": 1}, "q1") < 1.0


def test_true_answer_is_the_documented_hash() -> None:
    raw = json.dumps(["truth", "s", "q", CHOICE], sort_keys=True, separators=(",", ":"))
    digest = int.from_bytes(hashlib.sha256(raw.encode()).digest(), "big")
    assert true_answer("s", "q", CHOICE) == ["a", "b", "c", "d"][digest % 4]
    raw = json.dumps(["truth", "s", "q", score_q(5)], sort_keys=True, separators=(",", ":"))
    digest = int.from_bytes(hashlib.sha256(raw.encode()).digest(), "big")
    assert true_answer("s", "q", score_q(5)) == digest % 5


def test_true_answer_ignores_key_order_and_depends_on_question() -> None:
    reordered = {"criteria": {"d": "D", "c": "C", "b": "B", "a": "A"}, "type": "choice"}
    assert true_answer("s", "q", CHOICE) == true_answer("s", "q", reordered)
    values = {true_answer(f"state {i}", "q", NOUL) for i in range(40)}
    assert values == {True, False}
    levels = {true_answer(f"state {i}", "q", score_q(3)) for i in range(60)}
    assert levels == {0, 1, 2}


def test_choice_answer_probabilities_and_confidence() -> None:
    right = model_answer("s", "q", CHOICE, accuracy=1.0, confidence=0.8)
    truth = true_answer("s", "q", CHOICE)
    assert right["type"] == "choice" and right["choice"] == truth
    assert right["probabilities"] == {
        label: (0.8 if label == truth else 0.0667) for label in ("a", "b", "c", "d")
    }
    # (4 * 0.8 - 1) / 3 = 0.73333
    assert right["confidence"] == 0.7333
    assert list(right["probabilities"]) == ["a", "b", "c", "d"]  # request order
    wrong = model_answer("s", "q", CHOICE, accuracy=0.0, confidence=0.8)
    assert wrong["choice"] != truth and wrong["probabilities"][wrong["choice"]] == 0.8


def test_noul_answer_has_no_confidence() -> None:
    truth = true_answer("s", "q", NOUL)
    right = model_answer("s", "q", NOUL, accuracy=1.0, confidence=0.8)
    wrong = model_answer("s", "q", NOUL, accuracy=0.0, confidence=0.8)
    assert right == {"type": "noul", "noul": 0.8 if truth else 0.2}
    assert wrong == {"type": "noul", "noul": 0.2 if truth else 0.8}


def test_score_answer_interior_and_edges() -> None:
    # Find cases whose truth is an interior level (2 of 5) and an edge (0 of 3).
    interior = next(s for s in map(str, range(500)) if true_answer(s, "q", score_q(5)) == 2)
    answer = model_answer(interior, "q", score_q(5), accuracy=1.0, confidence=0.8)
    assert answer["probabilities"] == {"0": 0.0, "1": 0.1, "2": 0.8, "3": 0.1, "4": 0.0}
    assert answer["score"] == 2.0  # 0.1*1 + 0.8*2 + 0.1*3
    assert answer["confidence"] == 0.75  # (5*0.8 - 1) / 4
    assert answer["legend"] == {str(i): f"level {i}" for i in range(5)}
    edge = next(s for s in map(str, range(500)) if true_answer(s, "q", score_q(3)) == 0)
    answer = model_answer(edge, "q", score_q(3), accuracy=1.0, confidence=0.8)
    assert answer["probabilities"] == {"0": 0.8, "1": 0.2, "2": 0.0}
    assert answer["score"] == 0.2
    assert answer["confidence"] == 0.7  # (3*0.8 - 1) / 2
    top = next(s for s in map(str, range(500)) if true_answer(s, "q", score_q(2)) == 1)
    answer = model_answer(top, "q", score_q(2), accuracy=1.0, confidence=0.9)
    assert answer["probabilities"] == {"0": 0.1, "1": 0.9}
    assert answer["score"] == 0.9 and answer["confidence"] == 0.8


def test_confidence_formula_clamps() -> None:
    assert confidence_of([0.5, 0.5]) == 0.0
    assert confidence_of([1.0, 0.0, 0.0]) == 1.0
    assert confidence_of([0.2, 0.2, 0.2, 0.2, 0.2]) == 0.0
    assert confidence_of([0.1, 0.1, 0.1]) == 0.0  # below uniform clamps at 0


def test_pair_rules() -> None:
    assert pair_correct(CHOICE, "a", {"choice": "a"})
    assert not pair_correct(CHOICE, "a", {"choice": "b"})
    assert pair_correct(NOUL, True, {"noul": 0.5})
    assert not pair_correct(NOUL, False, {"noul": 0.5})
    assert pair_correct(score_q(3), 1, {"score": 1.5})
    assert not pair_correct(score_q(3), 1, {"score": 1.5001})
    assert pair_correct(score_q(3), 1, {"score": 1.2}, tolerance=0.2)
    assert not pair_correct(score_q(3), 1, None)


def test_calibration_points() -> None:
    choice = {"choice": "b", "probabilities": {"a": 0.1, "b": 0.9}}
    assert calibration_point(CHOICE, "b", choice, True) == (0.9, True)
    assert calibration_point(NOUL, False, {"noul": 0.3}, True) == (0.7, True)
    score = {"score": 1.0, "probabilities": {"0": 0.1, "1": 0.8, "2": 0.1}}
    assert calibration_point(score_q(3), 2, score, False) == (0.8, False)


def test_golden_set_is_deterministic_and_labelled_with_the_truth() -> None:
    cases = make_golden_set(30, seed=7)
    assert cases == make_golden_set(30, seed=7)
    assert cases != make_golden_set(30, seed=8)
    assert len(cases) == 30
    for case in cases:
        json.dumps(case)  # JSONL-ready
        assert set(case["questions"]) == {"q_choice", "q_noul", "q_score"}
        for qid, question in case["questions"].items():
            assert case["expected"][qid] == true_answer(case["state"], qid, question)
        assert case["tolerance"] == {"q_score": 0.5}
    shapes = {type(c["state"]) for c in cases}
    assert shapes == {str, dict, list}
    only_choice = make_golden_set(5, seed=1, kinds=("choice",))
    assert all(set(c["questions"]) == {"q_choice"} and "tolerance" not in c for c in only_choice)


def test_accuracies_of_two_profiles_differ_by_the_pairs_between_them() -> None:
    cases = make_golden_set(200, seed=3)
    pairs = [(c["state"], qid) for c in cases for qid in c["expected"]]
    below = {a: sum(case_uniform(s, q) < a for s, q in pairs) for a in (0.9, 0.7)}
    between = sum(0.7 <= case_uniform(s, q) < 0.9 for s, q in pairs)
    assert count_correct_pairs(cases, 0.9, 0.85) == (below[0.9], 600)
    assert count_correct_pairs(cases, 0.7, 0.6) == (below[0.7], 600)
    assert below[0.9] - below[0.7] == between > 0
    assert expected_accuracy(cases, 0.9) == below[0.9] / 600
    assert expected_accuracy(cases, 1.0) == 1.0
    assert expected_accuracy(cases, 0.0) == 0.0


def test_missing_question_counts_wrong() -> None:
    expected = {"q": true_answer("s", "q", NOUL), "gone": True}
    case = {"state": "s", "questions": {"q": NOUL}, "expected": expected}
    assert count_correct_pairs([case], 1.0) == (1, 2)


labels = st.lists(
    st.text(alphabet="abcdefgh", min_size=1, max_size=4), min_size=2, max_size=6, unique=True
)
questions = st.one_of(
    labels.map(lambda ls: {"type": "choice", "criteria": ls}),
    st.just({"type": "noul"}),
    st.integers(2, 10).map(score_q),
)


@settings(max_examples=200, deadline=None)
@given(
    state=st.one_of(st.text(max_size=20), st.dictionaries(st.text(max_size=5), st.integers())),
    qid=st.text(min_size=1, max_size=8),
    question=questions,
    accuracy=st.floats(0.0, 1.0),
    confidence=st.floats(0.5001, 1.0),
)
def test_correct_exactly_when_uniform_below_accuracy(
    state: Any, qid: str, question: dict[str, Any], accuracy: float, confidence: float
) -> None:
    answer = model_answer(state, qid, question, accuracy, confidence)
    truth = true_answer(state, qid, question)
    assert pair_correct(question, truth, answer) == (case_uniform(state, qid) < accuracy)
    assert answer == model_answer(state, qid, question, accuracy, confidence)


@pytest.mark.parametrize("confidence", [0.51, 0.8, 1.0])
def test_choice_chosen_label_has_the_largest_probability(confidence: float) -> None:
    for state in map(str, range(30)):
        answer = model_answer(state, "q", CHOICE, 0.5, confidence)
        probs = answer["probabilities"]
        assert max(probs, key=probs.__getitem__) == answer["choice"]

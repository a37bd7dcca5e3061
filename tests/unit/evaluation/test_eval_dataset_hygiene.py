"""Dataset errors name a case by number and line, never a question id or any content, and
every malformed number ends as DatasetInvalid, never OverflowError/ValueError (issue 12)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from decisionmodel.evaluation import GoldenDatasetInvalid, parse_dataset

QID = "SECRET-CUSTOMER-ACME-refund-over-10k"  # seen quoted in a DatasetInvalid message
LABEL = "SECRET-LABEL-ACME"


def line(**overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "state": "hello",
        "questions": {
            "plain": {"type": "noul"},
            QID: {"type": "choice", "criteria": {LABEL: "a", "other": "b"}},
            "level": {"type": "score", "criteria": ["l", "m", "h"]},
        },
        "expected": {"plain": True, QID: LABEL},
    }
    obj.update(overrides)
    return obj


def refused(*lines: dict[str, Any] | str) -> GoldenDatasetInvalid:
    raw = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines).encode()
    with pytest.raises(GoldenDatasetInvalid) as info:
        parse_dataset(raw)
    message = str(info.value)
    for content in (QID, "ACME", LABEL, "hello"):
        assert content not in message
    return info.value


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (line(expected={"plain": True, QID: "nope"}), "expected entry 2 is not one of the"),
        (line(expected={"plain": True, QID: 3}), "expected entry 2 must be a label"),
        (line(expected={QID + "x": True}), "expected entry 1 is not one of the questions"),
        (
            line(questions={"plain": {"type": "noul"}, QID: {"type": "x"}}),
            "questions entry 2: type must be",
        ),
        (line(questions={QID: "x"}, expected={QID: 1}), "questions entry 1 must be an object"),
        (line(tolerance={QID: 0.5}), "tolerance entry 1: a tolerance applies to score"),
        (line(tolerance={"level": 1}), "tolerance entry 1 names a question that is not"),
    ],
)
def test_a_case_is_named_by_number_and_line_never_by_a_question_id(
    bad: dict[str, Any], problem: str
) -> None:
    err = refused(line(), "", bad)
    assert (err.case, err.line) == (2, 3)
    assert str(err).startswith(f"case 2 (line 3): {problem}")


@pytest.mark.parametrize(
    ("fragment", "problem"),
    [
        ('"state": ' + "9" * 5000, "an integer has too many digits"),
        ('"state": {"n": -' + "1" * 5000 + "}", "an integer has too many digits"),
        ('"state": [1e400]', "a number is too large for a float"),
        ('"state": "a \\ud800 b"', "a string holds a lone surrogate escape"),
    ],
)
def test_numbers_and_strings_no_request_can_carry_are_dataset_invalid(
    fragment: str, problem: str
) -> None:
    body = json.dumps(line())[1:]  # without its "{"; the fragment's key comes first and wins
    err = refused("{" + fragment + ", " + body.replace('"state": "hello", ', ""))
    assert err.problem.startswith(problem)
    assert "position" not in str(err) and "\\ud800" not in str(err)


def test_a_huge_integer_level_or_tolerance_is_typed_not_an_overflow() -> None:
    """``math.isfinite(10**400)`` raises OverflowError: it retried until EvaluationTimeout."""
    huge = 10**400
    err = refused(line(expected={"level": huge}))
    assert err.problem == "expected entry 1 must be a level from 0 to 2"
    (case,) = parse_dataset(
        json.dumps(line(expected={"level": 1}, tolerance={"level": huge})).encode()
    )
    assert case.expectations["level"].tolerance == huge

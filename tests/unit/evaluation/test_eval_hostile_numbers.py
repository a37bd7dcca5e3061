"""Numbers and strings no well-behaved dataset or runtime holds: each is a typed refusal or a
wrong answer, never an OverflowError, ValueError or UnicodeEncodeError (found by make fuzz)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from decisionmodel.evaluation import (
    MISSING,
    Expectation,
    GoldenDatasetInvalid,
    parse_dataset,
    score_answer,
)

HEAD = b'{"state": "s", "questions": {"q": {"type": "score", "criteria": ["a", "b"]}}, '


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        # int() refuses more than 4300 digits with a ValueError that is not a JSONDecodeError.
        (HEAD + b'"expected": {"q": ' + b"9" * 5000 + b"}}", "too many digits"),
        # math.isfinite(10**400) raises OverflowError.
        (HEAD + b'"expected": {"q": ' + b"9" * 400 + b"}}", "must be a level"),
        # 1e400 reads as inf, which httpx's encoder (allow_nan=False) refuses when sending.
        (b'{"state": [1e400], "questions": {"q": {"type": "noul"}}, "expected": {"q": true}}',
         "too large for a float"),
        # An unpaired surrogate cannot be encoded as UTF-8 for the request body.
        (b'{"state": "\\ud800", "questions": {"q": {"type": "noul"}}, "expected": {"q": true}}',
         "surrogate"),
    ],
)  # fmt: skip
def test_a_hostile_line_is_dataset_invalid(line: bytes, problem: str) -> None:
    with pytest.raises(GoldenDatasetInvalid) as info:
        parse_dataset(line)
    assert info.value.line == 1
    assert problem in str(info.value)


def test_a_huge_integer_tolerance_is_a_wide_band_not_an_overflow() -> None:
    line = HEAD + b'"expected": {"q": 1}, "tolerance": {"q": ' + b"9" * 400 + b"}}"
    (case,) = parse_dataset(line)
    assert case.expectations["q"].tolerance == Decimal("9" * 400)


def test_every_parsed_case_can_be_sent() -> None:
    line = '{"state": "\\ud83d\\ude00 caf\\u00e9", "questions": {"q": {"type": "noul"}}, '
    line += '"expected": {"q": true}}'
    (case,) = parse_dataset(line.encode())
    request = httpx.Request("POST", "http://runtime.invalid/", json=case.request_body("m"))
    assert json.loads(request.content)["state"] == "\U0001f600 café"


SCORE_1 = Expectation("score", 1, Decimal("0.5"))
NOUL = Expectation("noul", True)


@pytest.mark.parametrize(
    ("expectation", "answer"),
    [
        (NOUL, {"type": "noul", "noul": 10**400}),
        (NOUL, {"type": "noul", "noul": -(10**400)}),
        (SCORE_1, {"type": "score", "score": 1, "probabilities": {"1": 10**400}}),
        (Expectation("choice", "a"),
         {"type": "choice", "choice": "a", "probabilities": {"a": 10**400}}),
    ],
)  # fmt: skip
def test_a_huge_integer_in_an_answer_is_a_malformed_answer(
    expectation: Expectation, answer: dict[str, Any]
) -> None:
    assert score_answer(expectation, answer) == MISSING


def test_a_huge_integer_score_is_simply_out_of_the_band() -> None:
    answer = {"type": "score", "score": 10**400, "probabilities": {"0": 0.2, "1": 0.8}}
    outcome = score_answer(SCORE_1, answer)
    assert (outcome.correct, outcome.confidence, outcome.calibration_correct) == (False, 0.8, True)

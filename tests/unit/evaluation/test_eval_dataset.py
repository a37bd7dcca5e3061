"""Golden JSONL parsing: limits, line numbers, validation, and that errors never leak content."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Any

import pytest

from decisionmodel.errors import DatasetInvalid, DmrolloutError
from decisionmodel.evaluation import (
    MAX_DATASET_BYTES,
    GoldenDatasetInvalid,
    dataset_digest,
    parse_dataset,
)

# Dataset content that must never show up in an error message.
MARKER = "SECRET-GOLDEN-CONTENT"

QUESTIONS: dict[str, Any] = {
    "route": {"type": "choice", "criteria": {"billing": "money", "tech": "bugs"}},
    "urgent": {"type": "noul"},
    "severity": {"type": "score", "criteria": ["low", "mid", "high"]},
}


def case(**overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "state": f"customer says {MARKER}",
        "questions": QUESTIONS,
        "expected": {"route": "billing", "urgent": True, "severity": 2},
    }
    obj.update(overrides)
    return {k: v for k, v in obj.items() if v is not _DROP}


_DROP = object()


def jsonl(*lines: dict[str, Any] | str) -> bytes:
    return "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines).encode()


def invalid(raw: bytes, max_cases: int = 500) -> GoldenDatasetInvalid:
    with pytest.raises(GoldenDatasetInvalid) as info:
        parse_dataset(raw, max_cases)
    assert MARKER not in str(info.value)
    return info.value


def test_a_valid_case_parses_into_expectations_and_a_request_body() -> None:
    cases = parse_dataset(jsonl(case(tolerance={"severity": 0.25})))
    assert len(cases) == 1
    c = cases[0]
    assert (c.index, c.line) == (0, 1)
    assert [(q, e.kind, e.value) for q, e in c.expectations.items()] == [
        ("route", "choice", "billing"),
        ("urgent", "noul", True),
        ("severity", "score", 2),
    ]
    assert c.expectations["severity"].tolerance == Decimal("0.25")
    assert c.expectations["route"].tolerance is None
    assert c.request_body("laya:en") == {
        "model": "laya:en",
        "state": f"customer says {MARKER}",
        "questions": QUESTIONS,
    }


def test_score_tolerance_defaults_to_half_a_level_per_case() -> None:
    cases = parse_dataset(jsonl(case(), case(tolerance={"severity": 1})))
    assert cases[0].expectations["severity"].tolerance == Decimal("0.5")
    assert cases[1].expectations["severity"].tolerance == Decimal("1")


def test_blank_lines_are_skipped_but_line_numbers_stay_physical() -> None:
    raw = jsonl(case(), "", "   \t", case(), "") + b"\n\n"
    cases = parse_dataset(raw)
    assert [(c.index, c.line) for c in cases] == [(0, 1), (1, 4)]
    err = invalid(jsonl(case(), "", "  ", "{not json"))
    assert err.line == 4


def test_only_the_first_max_cases_cases_are_read() -> None:
    # Line 3 is blank and does not count; line 5 is broken but lies after the 3rd case.
    raw = jsonl(case(), case(), "", case(), "{broken")
    assert [c.line for c in parse_dataset(raw, max_cases=3)] == [1, 2, 4]
    assert [c.line for c in parse_dataset(raw, max_cases=2)] == [1, 2]
    assert invalid(raw, max_cases=4).line == 5


def test_max_cases_must_be_positive() -> None:
    with pytest.raises(ValueError):
        parse_dataset(jsonl(case()), max_cases=0)


def test_a_dataset_of_exactly_1_mib_is_accepted_and_one_byte_more_is_not() -> None:
    line = json.dumps(case()).encode()
    # Exactly 1 MiB: one good case, then a blank line of spaces (blank lines are skipped).
    raw = line + b"\n" + b" " * (MAX_DATASET_BYTES - len(line) - 1)
    assert len(raw) == MAX_DATASET_BYTES
    assert len(parse_dataset(raw)) == 1
    err = invalid(raw + b" ")
    assert err.line is None
    assert str(err) == "dataset is 1048577 bytes; the limit is 1048576 bytes (1 MiB)"


def test_bad_json_names_the_line_and_the_problem_not_the_content() -> None:
    err = invalid(jsonl(case(), case(), '{"state": "' + MARKER + '", "questions": '))
    assert err.line == 3
    assert str(err).startswith("case 3 (line 3): invalid JSON (")
    assert "column" in str(err)


def test_the_error_is_the_permanent_dataset_invalid_of_the_rollout() -> None:
    err = invalid(jsonl("[]"))
    assert isinstance(err, DatasetInvalid) and isinstance(err, DmrolloutError)
    assert (err.reason, err.permanent) == ("DatasetInvalid", True)
    assert str(err) == "case 1 (line 1): a case must be a JSON object"


def test_a_dataset_without_cases_is_invalid() -> None:
    err = invalid(b"\n  \n\n")
    assert (err.line, str(err)) == (None, "dataset has no cases")
    assert invalid(b"").problem == "dataset has no cases"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (case(expected={}), "expected is empty"),
        (case(expected=_DROP), "expected is missing"),
        (case(expected=["route"]), "expected must be an object"),
        (case(questions=_DROP), "questions is missing"),
        (case(questions={}), "questions must hold 1 to 256 questions, it holds 0"),
        (case(questions=[MARKER]), "questions must be an object"),
        (case(state=_DROP), "state is missing"),
        (case(state=3), "state must be a string, an object or an array"),
        (case(state=None), "state must be a string, an object or an array"),
        (
            case(expected={"nope": True}),
            "expected entry 1 is not one of the questions",
        ),
        (
            case(questions={"q": {"type": "ranking", "criteria": [MARKER]}}, expected={"q": 1}),
            "questions entry 1: type must be choice, noul or score",
        ),
        (
            case(questions={"q": MARKER}, expected={"q": 1}),
            "questions entry 1 must be an object",
        ),
        (
            case(questions={"q": {"type": "choice", "criteria": [MARKER]}}, expected={"q": MARKER}),
            "questions entry 1: choice criteria must hold 2 to 255 labels",
        ),
        (
            case(questions={"q": {"type": "choice", "criteria": [1, 2]}}, expected={"q": "1"}),
            "questions entry 1: choice criteria must be an object or an array of labels",
        ),
        (
            case(questions={"q": {"type": "score", "criteria": [MARKER]}}, expected={"q": 0}),
            "questions entry 1: score criteria must be an array of 2 to 10 levels",
        ),
        # Wrong value type for the question type.
        (
            case(expected={"route": 1}),
            "expected entry 1 must be a label (a string) for a choice question",
        ),
        (case(expected={"route": MARKER}), "expected entry 1 is not one of the question's labels"),
        (
            case(expected={"urgent": "true"}),
            "expected entry 1 must be true or false for a noul question",
        ),
        (
            case(expected={"urgent": 1}),
            "expected entry 1 must be true or false for a noul question",
        ),
        (
            case(expected={"severity": "2"}),
            "expected entry 1 must be an integer level for a score question",
        ),
        (
            case(expected={"severity": True}),
            "expected entry 1 must be an integer level for a score question",
        ),
        (
            case(expected={"severity": 1.5}),
            "expected entry 1 must be an integer level for a score question",
        ),
        (case(expected={"severity": 3}), "expected entry 1 must be a level from 0 to 2"),
        (case(expected={"severity": -1}), "expected entry 1 must be a level from 0 to 2"),
        # Tolerance.
        (case(tolerance=[0.5]), "tolerance must be an object"),
        (case(tolerance={"severity": -0.1}), "tolerance entry 1 must be a number >= 0"),
        (case(tolerance={"severity": "1"}), "tolerance entry 1 must be a number >= 0"),
        (case(tolerance={"severity": True}), "tolerance entry 1 must be a number >= 0"),
        (
            case(tolerance={"route": 0.5}),
            "tolerance entry 1: a tolerance applies to score questions only",
        ),
        (
            case(expected={"route": "tech"}, tolerance={"severity": 1}),
            "tolerance entry 1 names a question that is not expected",
        ),
    ],
)
def test_bad_lines_are_refused_with_line_and_problem(line: dict[str, Any], problem: str) -> None:
    err = invalid(jsonl(case(), "", line))
    assert err.line == 3
    assert err.problem == problem
    assert err.case == 2
    assert str(err) == f"case 2 (line 3): {problem}"


def test_too_many_questions() -> None:
    questions = {f"q{i}": {"type": "noul"} for i in range(257)}
    err = invalid(jsonl(case(questions=questions, expected={"q0": True})))
    assert err.problem == "questions must hold 1 to 256 questions, it holds 257"


def test_score_expected_may_be_written_as_an_integral_float() -> None:
    (c,) = parse_dataset(jsonl(case(expected={"severity": 2.0})))
    assert c.expectations["severity"].value == 2
    assert isinstance(c.expectations["severity"].value, int)


def test_choice_criteria_may_be_an_array_of_labels() -> None:
    questions = {"q": {"type": "choice", "criteria": ["a", "b", "c"]}}
    (c,) = parse_dataset(jsonl(case(questions=questions, expected={"q": "c"})))
    assert c.expectations["q"].value == "c"


def test_nan_and_infinity_are_not_json() -> None:
    err = invalid(b'{"state": "s", "questions": {"q": {"type": "noul"}}, "expected": {"q": NaN}}')
    assert err.problem == "NaN is not a JSON value"
    err = invalid(jsonl(case()) + b'\n{"state": -Infinity}')
    assert (err.line, err.problem) == (2, "-Infinity is not a JSON value")


def test_an_overflowing_tolerance_is_refused() -> None:
    raw = jsonl(case())[:-1] + b', "tolerance": {"severity": 1e400}}'
    assert invalid(raw).problem == "a number is too large for a float (at most about 1.8e308)"


def test_deep_nesting_is_refused_not_crashing() -> None:
    raw = b'{"state": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert invalid(raw).problem.startswith("invalid JSON")


def test_invalid_utf8_names_its_line() -> None:
    raw = jsonl(case()) + b'\n{"state": "\xff\xfe"}'
    assert (invalid(raw).line, invalid(raw).problem) == (2, "not valid UTF-8")


def test_bom_crlf_and_u2028_inside_strings_are_fine() -> None:
    state = "one\u2028two\u2029three"
    raw = b"\xef\xbb\xbf" + json.dumps(case(state=state), ensure_ascii=False).encode() + b"\r\n"
    raw += json.dumps(case()).encode() + b"\r\n"
    cases = parse_dataset(raw)
    assert [c.line for c in cases] == [1, 2]
    assert cases[0].state == state


def test_unknown_top_level_keys_are_ignored() -> None:
    (c,) = parse_dataset(jsonl(case(comment=MARKER)))
    assert list(c.expectations) == ["route", "urgent", "severity"]


def test_dataset_digest_is_sha256_hex_of_the_raw_bytes() -> None:
    assert dataset_digest(b"") == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert dataset_digest(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    raw = jsonl(case(), case())
    assert dataset_digest(raw) == hashlib.sha256(raw).hexdigest()
    assert dataset_digest(raw) != dataset_digest(raw + b"\n")


def test_a_slice_name_is_read_and_a_bad_one_names_the_case() -> None:
    cases = parse_dataset(jsonl(case(slice="enterprise"), case()))
    assert [c.slice for c in cases] == ["enterprise", None]
    for bad in (f"has {MARKER} spaces", "", 7, "x" * 64, "-leading"):
        err = invalid(jsonl(case(), case(slice=bad)))
        assert "case 2" in str(err) and "slice must be a short name" in str(err)


def test_more_than_twenty_slices_is_refused() -> None:
    err = invalid(jsonl(*(case(slice=f"s{i}") for i in range(21))))
    assert "21 slices" in str(err)

"""The golden dataset: JSONL parsing, validation and the dataset digest.

REFERENCE.md "Evaluation": at most 1 MiB, blank lines skipped, the first ``maxCases`` cases
used, each line ``{"state": …, "questions": {…}, "expected": {qid: value},
"tolerance": {qid: float}?}`` with ``expected`` non-empty; any bad line makes the whole dataset
invalid (permanent). Errors name the case (its number among the cases) and its physical line
and the problem, never the content: not a question id, a label or a value either (an id such
as ``SECRET-CUSTOMER-ACME-refund-over-10k`` is content). A question is named by its position
in ``questions``, ``expected`` or ``tolerance`` ("expected entry 2").

Rules this module adds, each to turn a mistake into a clear ``DatasetInvalid`` at parse time
instead of a silently wrong score later:

- Lines are split on ``\\n`` only (a JSON string may legally hold U+2028, which
  ``str.splitlines`` would split on); a trailing ``\\r`` and a UTF-8 BOM on line 1 are dropped.
- Lines after the first ``maxCases`` cases are not read, so they cannot invalidate the dataset
  (the reference stops reading there too).
- ``NaN``/``Infinity`` are refused: they are not JSON and cannot be compared; so are numbers no
  float can hold (``1e400``) and integers beyond Python's digit limit, anywhere in the line.
- A string the request body cannot carry (a lone surrogate such as ``"\\ud800"``, legal as a
  JSON escape but not encodable as UTF-8) is refused here instead of failing every request.
- ``state`` must be a string, object or array: the runtime answers any other type with 422
  (RUNTIME_API.md), which would count every pair of the case wrong.
- Each question needs a known ``type``; choice and score questions need the ``criteria`` the
  runtime requires (2-255 labels, 2-10 levels) because the expected value is checked against it.
- Expected values: choice → one of the question's labels; noul → ``true``/``false``; score → an
  integral level ``0 … levels-1`` (``2`` and ``2.0`` accepted, ``2.5`` refused, as the reference's
  ``ParseScoreExpected``), so comparing it with the argmax level needs no rounding.
- ``tolerance`` may only name expected score questions, with a finite value ≥ 0; anything else
  is almost certainly a typo that would leave the default band in force unnoticed.
- ``slice`` (optional) names the group a case belongs to for the per-slice gates: a short name
  (1-63 letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit). Slice names are
  the one piece of a case shown in status and the report (a slice table needs them), so they
  are meant as segment names ("enterprise", "refunds"), never content; at most
  :data:`MAX_SLICES` distinct names.
- Unknown top-level keys are ignored, as the runtime ignores unknown fields.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal, TypeGuard

from decisionmodel.errors import DatasetInvalid

QuestionType = Literal["choice", "noul", "score"]

MAX_DATASET_BYTES: Final = 1 << 20  # 1 MiB, REFERENCE.md "Evaluation"
DEFAULT_MAX_CASES: Final = 500  # REFERENCE.md spec.rollout.evaluation.maxCases default
MAX_CASES: Final = 5000  # the most spec.rollout.evaluation.maxCases allows (api.spec)
DEFAULT_SCORE_TOLERANCE: Final = Decimal("0.5")  # REFERENCE.md: "|pred - expected| ≤ 0.5"
MAX_QUESTIONS: Final = 256  # RUNTIME_API.md: 1-256 questions per request
CHOICE_OPTIONS: Final = (2, 255)  # RUNTIME_API.md: choice criteria, 2-255 options
SCORE_LEVELS: Final = (2, 10)  # RUNTIME_API.md: score criteria, 2-10 levels
_BOM: Final = b"\xef\xbb\xbf"


class GoldenDatasetInvalid(DatasetInvalid):
    """A :class:`~decisionmodel.errors.DatasetInvalid` (permanent, reason ``DatasetInvalid``)
    raised while parsing, with the case number (1-based, blank lines not counted), the physical
    line number (1-based) — both None for the whole dataset — and the problem apart.

    The message names the case, the line and what is wrong, never a question id or anything
    else of the line: it ends up in workflow history, status and Events, where dataset content
    must never appear (DESIGN.md, "Things that must hold").
    """

    def __init__(self, problem: str, line: int | None = None, case: int | None = None) -> None:
        if line is None:
            message = problem
        elif case is None:
            message = f"line {line}: {problem}"
        else:
            message = f"case {case} (line {line}): {problem}"
        super().__init__(message)
        self.problem = problem
        self.line = line
        self.case = case


def dataset_digest(raw: bytes) -> str:
    """sha256 (64 hex) of the dataset bytes as read, all of them (not only the first maxCases
    cases): binds a manual approval or a resumed evaluation to exactly this dataset."""
    return hashlib.sha256(raw).hexdigest()


# Deliberately frozen dataclasses, not pydantic models: a case carries dataset content, which
# must never be serialised into a workflow input, result or heartbeat. Only numbers leave the
# activity (see progress.EvaluationProgress).
@dataclass(frozen=True, slots=True)
class Expectation:
    """What one expected answer must be. ``tolerance`` is set for score questions only."""

    kind: QuestionType
    value: str | bool | int
    tolerance: Decimal | None = None
    # choice only: the question's labels in the criteria's order, so the confusion matrix can
    # name a label by its position (a label itself is dataset content and never leaves).
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GoldenCase:
    """One golden case: its 0-based position among the cases, its physical line, the request
    content and the expectations keyed by question id (in the dataset's order)."""

    index: int
    line: int
    state: Any
    questions: Mapping[str, Any]
    expectations: Mapping[str, Expectation]
    slice: str | None = None

    def request_body(self, model: str) -> dict[str, Any]:
        """The ``POST /v1/systemone`` body for this case (RUNTIME_API.md)."""
        return {"model": model, "state": self.state, "questions": dict(self.questions)}


def parse_dataset(
    raw: bytes,
    max_cases: int = DEFAULT_MAX_CASES,
    default_tolerance: Decimal = DEFAULT_SCORE_TOLERANCE,
) -> list[GoldenCase]:
    """Parse the first ``max_cases`` cases of a golden JSONL dataset.

    Raises :class:`GoldenDatasetInvalid` for a dataset over 1 MiB, a bad line (with its number) or a
    dataset without any case.
    """
    if max_cases < 1:
        raise ValueError(f"max_cases must be at least 1, got {max_cases}")
    if len(raw) > MAX_DATASET_BYTES:
        raise GoldenDatasetInvalid(
            f"dataset is {len(raw)} bytes; the limit is {MAX_DATASET_BYTES} bytes (1 MiB)"
        )
    cases: list[GoldenCase] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if len(cases) >= max_cases:
            break
        if number == 1 and line.startswith(_BOM):
            line = line[len(_BOM) :]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise GoldenDatasetInvalid("not valid UTF-8", number, len(cases) + 1) from None
        if not text.strip(" \t\r"):
            continue
        try:
            cases.append(_parse_case(text, len(cases), number, default_tolerance))
        except _Problem as problem:
            raise GoldenDatasetInvalid(str(problem), number, len(cases) + 1) from None
    if not cases:
        raise GoldenDatasetInvalid("dataset has no cases")
    slices = {c.slice for c in cases if c.slice is not None}
    if len(slices) > MAX_SLICES:
        raise GoldenDatasetInvalid(
            f"dataset names {len(slices)} slices; at most {MAX_SLICES} are compared (merge "
            "small ones)"
        )
    return cases


MAX_SLICES: Final = 20
_SLICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def _parse_slice(obj: dict[str, Any]) -> str | None:
    name = obj.get("slice")
    if name is None:
        return None
    if not isinstance(name, str) or not _SLICE.fullmatch(name):
        raise _Problem(
            "slice must be a short name: 1-63 letters, digits, '.', '_' or '-', starting with "
            "a letter or digit"
        )
    return name


class _Problem(Exception):
    """What is wrong with one line; becomes GoldenDatasetInvalid with the line number."""


def _reject_constant(name: str) -> Any:
    raise _Problem(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Problem("a number is too large for a float (at most about 1.8e308)")
    return value


def _bounded_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # Python's int digit limit (sys.get_int_max_str_digits)
        raise _Problem("an integer has too many digits") from None


def _parse_case(text: str, index: int, line: int, default_tolerance: Decimal) -> GoldenCase:
    try:
        obj = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except json.JSONDecodeError as err:
        # err.msg and the column are safe to show; str(err) is too, but the message is
        # rebuilt here so no future change of the json module can slip content in.
        raise _Problem(f"invalid JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise _Problem("invalid JSON (nested too deeply)") from None
    except ValueError:  # anything else the decoder refuses; its text may quote the line
        raise _Problem("invalid JSON") from None
    if not isinstance(obj, dict):
        raise _Problem("a case must be a JSON object")

    if "state" not in obj:
        raise _Problem("state is missing")
    state = obj["state"]
    if not isinstance(state, str | dict | list):
        raise _Problem("state must be a string, an object or an array")

    questions = _parse_questions(obj)
    expectations = _parse_expected(obj, questions, default_tolerance)
    _apply_tolerance(obj, questions, expectations)
    _check_encodable(state, obj["questions"])
    return GoldenCase(
        index=index,
        line=line,
        state=state,
        questions=obj["questions"],
        expectations=expectations,
        slice=_parse_slice(obj),
    )


@dataclass(frozen=True, slots=True)
class _Question:
    kind: QuestionType
    labels: frozenset[str] = frozenset()  # choice only
    order: tuple[str, ...] = ()  # choice only: the labels as the criteria list them
    levels: int = 0  # score only


def _parse_questions(obj: dict[str, Any]) -> dict[str, _Question]:
    if "questions" not in obj:
        raise _Problem("questions is missing")
    raw = obj["questions"]
    if not isinstance(raw, dict):
        raise _Problem("questions must be an object")
    if not 1 <= len(raw) <= MAX_QUESTIONS:
        raise _Problem(f"questions must hold 1 to {MAX_QUESTIONS} questions, it holds {len(raw)}")
    return {
        qid: _parse_question(f"questions entry {n}", question)
        for n, (qid, question) in enumerate(raw.items(), start=1)
    }


def _check_encodable(state: Any, questions: Any) -> None:
    """The request body must be UTF-8 JSON: a lone surrogate escape is not encodable, and
    httpx's error would quote it and its position."""
    try:
        json.dumps([state, questions], ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        raise _Problem("a string holds a lone surrogate escape (not encodable as UTF-8)") from None
    except RecursionError:
        raise _Problem("invalid JSON (nested too deeply)") from None


def _parse_question(where: str, question: Any) -> _Question:
    if not isinstance(question, dict):
        raise _Problem(f"{where} must be an object")
    kind = question.get("type")
    if kind == "noul":
        return _Question("noul")
    criteria = question.get("criteria")
    if kind == "choice":
        if isinstance(criteria, dict):
            labels = list(criteria)
        elif isinstance(criteria, list) and all(isinstance(label, str) for label in criteria):
            labels = criteria
        else:
            raise _Problem(f"{where}: choice criteria must be an object or an array of labels")
        low, high = CHOICE_OPTIONS
        if not low <= len(labels) <= high:
            raise _Problem(f"{where}: choice criteria must hold {low} to {high} labels")
        return _Question("choice", labels=frozenset(labels), order=tuple(labels))
    if kind == "score":
        low, high = SCORE_LEVELS
        if not isinstance(criteria, list) or not low <= len(criteria) <= high:
            raise _Problem(f"{where}: score criteria must be an array of {low} to {high} levels")
        return _Question("score", levels=len(criteria))
    raise _Problem(f"{where}: type must be choice, noul or score")


def _parse_expected(
    obj: dict[str, Any], questions: dict[str, _Question], default_tolerance: Decimal
) -> dict[str, Expectation]:
    if "expected" not in obj:
        raise _Problem("expected is missing")
    raw = obj["expected"]
    if not isinstance(raw, dict):
        raise _Problem("expected must be an object")
    if not raw:
        raise _Problem("expected is empty")
    expectations: dict[str, Expectation] = {}
    for n, (qid, value) in enumerate(raw.items(), start=1):
        question = questions.get(qid)
        where = f"expected entry {n}"
        if question is None:
            raise _Problem(f"{where} is not one of the questions")
        if question.kind == "choice":
            if not isinstance(value, str):
                raise _Problem(f"{where} must be a label (a string) for a choice question")
            if value not in question.labels:
                raise _Problem(f"{where} is not one of the question's labels")
            expectations[qid] = Expectation("choice", value, options=question.order)
        elif question.kind == "noul":
            if not isinstance(value, bool):
                raise _Problem(f"{where} must be true or false for a noul question")
            expectations[qid] = Expectation("noul", value)
        else:
            if not _is_finite(value) or value != int(value):
                raise _Problem(f"{where} must be an integer level for a score question")
            level = int(value)
            if not 0 <= level < question.levels:
                raise _Problem(f"{where} must be a level from 0 to {question.levels - 1}")
            expectations[qid] = Expectation("score", level, default_tolerance)
    return expectations


def _apply_tolerance(
    obj: dict[str, Any], questions: dict[str, _Question], expectations: dict[str, Expectation]
) -> None:
    raw = obj.get("tolerance")
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise _Problem("tolerance must be an object")
    for n, (qid, value) in enumerate(raw.items(), start=1):
        where = f"tolerance entry {n}"
        expectation = expectations.get(qid)
        if expectation is None:
            raise _Problem(f"{where} names a question that is not expected")
        if questions[qid].kind != "score":
            raise _Problem(f"{where}: a tolerance applies to score questions only")
        if not _is_finite(value) or value < 0:
            raise _Problem(f"{where} must be a number >= 0")
        expectations[qid] = Expectation("score", expectation.value, to_decimal(value))


def _is_finite(value: Any) -> TypeGuard[int | float]:
    # bool is an int subclass in Python, but true/false is not a number in JSON. An int is
    # finite whatever its size: math.isfinite would raise OverflowError past a float's range.
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _finite(value: int | float) -> bool:
    # math.isfinite converts an int to float first: OverflowError beyond 1.8e308.
    return isinstance(value, int) or math.isfinite(value)


def to_decimal(value: int | float) -> Decimal:
    """The decimal a JSON number was written as: ``repr`` of a float is the shortest text that
    reads back to it, so ``0.6`` becomes ``Decimal("0.6")``, not 0.59999999999999997779…"""
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))

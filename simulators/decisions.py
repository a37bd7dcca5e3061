"""Validation of `POST /v1/systemone` requests and the shape of their answers (RUNTIME_API.md).

`state` is a string, object or array; `questions` maps ids to 1-256 questions of type `choice`
(criteria: object label→description or array of labels, 2-255 options), `noul` (optional
criteria object) or `score` (criteria: array of 2-10 level descriptions). Anything else is a 422
with a FastAPI-style `detail` list naming every problem found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulators.answers import DEFAULT_CONFIDENCE, answer_case, canonical_json
from simulators.wire import detail_item, validation_error

MAX_QUESTIONS = 256
CHOICE_OPTIONS = (2, 255)
SCORE_LEVELS = (2, 10)


@dataclass(frozen=True)
class DecisionRequest:
    model: str
    state: Any
    questions: dict[str, dict[str, Any]]
    keep_alive: Any  # raw value; None when absent


def _check_labels(
    labels: list[Any], loc: list[str | int], bounds: tuple[int, int], what: str
) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    low, high = bounds
    if not low <= len(labels) <= high:
        errors.append(detail_item(loc, f"{what} must have {low}-{high} entries", "value_error"))
    if not all(isinstance(label, str) and label for label in labels):
        errors.append(detail_item(loc, f"{what} must be non-empty strings", "type_error"))
    elif what == "options" and len(set(labels)) != len(labels):
        errors.append(detail_item(loc, "options must be unique", "value_error"))
    return errors


def _check_question(qid: str, question: Any) -> list[dict[str, Any]]:
    loc: list[str | int] = ["body", "questions", qid]
    if not isinstance(question, dict):
        return [detail_item(loc, "question must be an object", "type_error")]
    kind = question.get("type")
    criteria = question.get("criteria")
    cloc = [*loc, "criteria"]
    if kind == "choice":
        if isinstance(criteria, dict):
            return _check_labels(list(criteria), cloc, CHOICE_OPTIONS, "options")
        if isinstance(criteria, list):
            return _check_labels(criteria, cloc, CHOICE_OPTIONS, "options")
        return [detail_item(cloc, "choice criteria must be an object or an array", "type_error")]
    if kind == "noul":
        if criteria is not None and not isinstance(criteria, dict):
            return [detail_item(cloc, "noul criteria must be an object", "type_error")]
        return []
    if kind == "score":
        if not isinstance(criteria, list):
            return [detail_item(cloc, "score criteria must be an array of levels", "type_error")]
        return _check_labels(criteria, cloc, SCORE_LEVELS, "levels")
    return [detail_item([*loc, "type"], "type must be one of choice, noul, score", "value_error")]


def parse_decision_request(body: Any) -> DecisionRequest:
    """The validated request, or an ApiError 422 listing every problem."""
    if not isinstance(body, dict):
        raise validation_error([detail_item(["body"], "body must be an object", "type_error")])
    errors: list[dict[str, Any]] = []
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        errors.append(detail_item(["body", "model"], "model is required", "missing"))
    if "state" not in body:
        errors.append(detail_item(["body", "state"], "state is required", "missing"))
    elif not isinstance(body["state"], str | dict | list):
        errors.append(
            detail_item(["body", "state"], "state must be a string, object or array", "type_error")
        )
    questions = body.get("questions")
    if not isinstance(questions, dict):
        errors.append(
            detail_item(["body", "questions"], "questions must be an object", "type_error")
        )
    elif not 1 <= len(questions) <= MAX_QUESTIONS:
        errors.append(
            detail_item(
                ["body", "questions"], f"1-{MAX_QUESTIONS} questions are required", "value_error"
            )
        )
    else:
        for qid, question in questions.items():
            errors.extend(_check_question(qid, question))
    if errors:
        raise validation_error(errors)
    assert isinstance(model, str) and isinstance(questions, dict)
    return DecisionRequest(
        model=model, state=body["state"], questions=questions, keep_alive=body.get("keep_alive")
    )


def input_tokens(request: DecisionRequest) -> int:
    """A stable stand-in for a tokenizer: about four characters per token."""
    size = len(canonical_json(request.state)) + len(canonical_json(request.questions))
    return max(1, size // 4)


def decision_answers(
    request: DecisionRequest, accuracy: float, confidence: float = DEFAULT_CONFIDENCE
) -> dict[str, Any]:
    return answer_case(
        {"state": request.state, "questions": request.questions}, accuracy, confidence
    )

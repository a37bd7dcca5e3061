"""Scoring one answer against its expectation: correctness and the calibration point.

REFERENCE.md "Evaluation":

- choice: correct when the label equals the expected one; calibration point
  ``(probabilities[choice], correct)``.
- noul: ``p ≥ 0.5`` means true; correct when that equals the expected bool; calibration point
  ``(max(p, 1 - p), correct)``.
- score: correct when ``|score - expected| ≤ tolerance``; calibration point
  ``(max level probability, argmax level == expected level)``.

Decisions (documented in the package docstring too):

- A missing answer, or one that does not follow the runtime's answer contract (RUNTIME_API.md:
  wrong ``type``, no ``probabilities``, a probability outside [0, 1] or not finite…), is wrong
  and gets the calibration point ``(0.0, False)``. Failing closed keeps a broken answer from
  counting as right, and one point per pair keeps N = pairs for ECE and Brier (as the Go
  reference does for a missing answer). Consequence: such a point sits in bin 0 with gap 0 and
  squared error 0, so it *dilutes* ECE and Brier by N/(N+1) rather than raising them; the
  accuracy gate is what penalises missing answers.
- Score probabilities that do not sum to 1 are used as given, never renormalised: the
  calibration point is the model's own stated confidence. (The Go reference drops the point when
  the sum is off by more than 1e-2; here a malformed distribution stays visible in calibration.)
- Score argmax ties break to the lowest level, deterministically (as the reference).
- The tolerance band is inclusive and compared in decimal on the numbers as written, so a score
  of 2.6 is within 0.6 of level 2 (in binary floats 2.6 - 2 = 0.6000000000000001 > 0.6).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from decisionmodel.evaluation.dataset import Expectation, GoldenCase, to_decimal


@dataclass(frozen=True, slots=True)
class PairOutcome:
    """The result for one (case, expected question) pair.

    ``correct`` counts for accuracy; ``confidence`` and ``calibration_correct`` are the
    calibration point. They differ only for score questions (band vs argmax)."""

    correct: bool
    confidence: float
    calibration_correct: bool


MISSING = PairOutcome(correct=False, confidence=0.0, calibration_correct=False)


def score_case(case: GoldenCase, answers: object) -> list[PairOutcome]:
    """One outcome per expected question of ``case``, in the dataset's order.

    ``answers`` is the ``answers`` object of the runtime's response; anything but a JSON
    object counts every pair as missing."""
    if not isinstance(answers, Mapping):
        return [MISSING for _ in case.expectations]
    return [score_answer(exp, answers.get(qid)) for qid, exp in case.expectations.items()]


def score_answer(expectation: Expectation, answer: object) -> PairOutcome:
    """Score one answer; a missing or malformed answer is :data:`MISSING`."""
    if not isinstance(answer, Mapping):
        return MISSING
    # The runtime always sends ``type``; an answer of another type is not an answer to this
    # question. Accept its absence, refuse a mismatch.
    if answer.get("type", expectation.kind) != expectation.kind:
        return MISSING
    if expectation.kind == "choice":
        return _score_choice(expectation, answer)
    if expectation.kind == "noul":
        return _score_noul(expectation, answer)
    return _score_score(expectation, answer)


def _score_choice(expectation: Expectation, answer: Mapping[str, Any]) -> PairOutcome:
    choice = answer.get("choice")
    probabilities = answer.get("probabilities")
    if not isinstance(choice, str) or not isinstance(probabilities, Mapping):
        return MISSING
    confidence = _probability(probabilities.get(choice))
    if confidence is None:
        return MISSING
    correct = choice == expectation.value
    return PairOutcome(correct, confidence, correct)


def _score_noul(expectation: Expectation, answer: Mapping[str, Any]) -> PairOutcome:
    p = _probability(answer.get("noul"))
    if p is None:
        return MISSING
    correct = (p >= 0.5) == expectation.value
    return PairOutcome(correct, max(p, 1.0 - p), correct)


def _score_score(expectation: Expectation, answer: Mapping[str, Any]) -> PairOutcome:
    score = answer.get("score")
    probabilities = answer.get("probabilities")
    if not _finite_number(score) or not isinstance(probabilities, Mapping) or not probabilities:
        return MISSING
    levels: dict[int, float] = {}
    for key, value in probabilities.items():
        p = _probability(value)
        # Keys are level numbers written canonically ("0", "1", …), RUNTIME_API.md.
        if p is None or not isinstance(key, str) or not key.isdecimal() or str(int(key)) != key:
            return MISSING
        levels[int(key)] = p
    argmax = min(levels, key=lambda level: (-levels[level], level))  # ties → lowest level
    assert isinstance(expectation.value, int) and expectation.tolerance is not None
    expected = expectation.value
    correct = abs(to_decimal(score) - expected) <= expectation.tolerance
    return PairOutcome(correct, levels[argmax], argmax == expected)


def _finite_number(value: object) -> TypeGuard[int | float]:
    # bool is an int subclass in Python, but true/false is not a number in JSON. An int is
    # finite, however large: math.isfinite would raise OverflowError on one beyond 1.8e308.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _probability(value: object) -> float | None:
    # Compared before float(): a huge int from the runtime is out of range, not an overflow.
    if not _finite_number(value) or not 0 <= value <= 1:
        return None
    return float(value)

"""Per-label confusion counts, in a vocabulary that holds no dataset content.

A cell counts the (case, expected question) pairs whose expected class is ``expected`` and whose
answered class is ``predicted``, for one question type. Classes are named from the runtime's
answer vocabulary (RUNTIME_API.md), never from the dataset:

- noul: ``true`` / ``false`` (the answer's ``p ≥ 0.5``).
- score: ``level 0`` … ``level 9`` (expected level against the argmax level, the calibration
  class; RUNTIME_API.md allows at most 10 levels).
- choice: ``option 1`` … ``option 6``, then ``option 7+``: a label's *position* in the question's
  ``criteria``. Choice labels are written by the dataset's author (``refund-over-10k-ACME``), so
  they are dataset content and are never named (dataset.py); their position is not.
- ``none`` as the answered class: a missing or malformed answer, a choice outside the criteria,
  a level beyond 9.

So the vocabulary is fixed and small (2 + 10 + 7 classes, plus ``none``: at most 20 labels),
whatever the dataset, which keeps status small and the matrix readable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from decisionmodel.evaluation.dataset import Expectation
from decisionmodel.evaluation.scoring import MISSING, PairOutcome

Kind = Literal["choice", "noul", "score"]

NONE: Final = "none"
CHOICE_NAMED: Final = 6  # options beyond this share one class
MAX_LEVEL: Final = 9
KINDS: Final[tuple[Kind, ...]] = ("noul", "score", "choice")


def kind_labels(kind: Kind) -> tuple[str, ...]:
    """The expected classes of a question type, in display order."""
    if kind == "noul":
        return ("false", "true")
    if kind == "score":
        return tuple(f"level {n}" for n in range(MAX_LEVEL + 1))
    return (*(f"option {n}" for n in range(1, CHOICE_NAMED + 1)), f"option {CHOICE_NAMED + 1}+")


def cell_key(kind: Kind, expected: str, predicted: str) -> str:
    """The key of a cell in the progress counts: ``kind/expected/predicted``."""
    return f"{kind}/{expected}/{predicted}"


def split_key(key: str) -> tuple[Kind, str, str]:
    kind, expected, predicted = key.split("/")
    if kind not in KINDS:
        raise ValueError(f"unknown question type in a confusion key: {kind!r}")
    return kind, expected, predicted


def classify(expectation: Expectation, outcome: PairOutcome, answer: object) -> str:
    """The key of the cell one scored pair falls in."""
    kind = expectation.kind
    expected = _expected_class(expectation)
    if outcome is MISSING or not isinstance(answer, Mapping):
        return cell_key(kind, expected, NONE)
    if kind == "noul":
        value = bool(expectation.value)
        return cell_key(kind, expected, str(value if outcome.correct else not value).lower())
    if kind == "score":
        predicted = expected if outcome.calibration_correct else _argmax_class(answer)
        return cell_key(kind, expected, predicted)
    choice = answer.get("choice")
    predicted = _option_class(expectation.options, choice) if isinstance(choice, str) else NONE
    return cell_key(kind, expected, predicted)


def _expected_class(expectation: Expectation) -> str:
    if expectation.kind == "noul":
        return str(bool(expectation.value)).lower()
    if expectation.kind == "score":
        return f"level {expectation.value}"
    return _option_class(expectation.options, str(expectation.value))


def _option_class(options: tuple[str, ...], label: str) -> str:
    if label not in options:
        return NONE
    position = options.index(label) + 1
    return f"option {position}" if position <= CHOICE_NAMED else f"option {CHOICE_NAMED + 1}+"


def _argmax_class(answer: Mapping[str, object]) -> str:
    # Scoring accepted this answer, so its probabilities are canonical levels → numbers in
    # [0, 1]; the argmax is recomputed the same way (ties to the lowest level).
    probabilities = answer.get("probabilities")
    if not isinstance(probabilities, Mapping) or not probabilities:
        return NONE
    levels = {int(k): float(v) for k, v in probabilities.items()}
    argmax = min(levels, key=lambda level: (-levels[level], level))
    return f"level {argmax}" if argmax <= MAX_LEVEL else NONE

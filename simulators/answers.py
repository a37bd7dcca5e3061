"""The simulated models' answers: a deterministic truth and a model that is right at a known rate.

Importable by tests and golden-set generators, so they can compute exactly what the runtime
simulator will answer.

- `true_answer(state, qid, question)` is the ground truth, from sha256 of the canonical JSON of
  (state, qid, question): a choice label, a bool (noul) or an int level (score).
- `case_uniform(state, qid)` is a number in [0, 1) from a hash that depends on neither the model
  nor the question. A model whose profile accuracy is `a` answers the pair correctly iff
  `case_uniform < a`, else gives a deterministic wrong answer. So on one golden set, two versions
  with accuracies a2 < a1 differ by exactly the pairs with u in [a2, a1).
- The chosen answer carries probability `confidence` (profile), the rest is spread evenly over
  the other choice labels (choice), or put on the neighbouring levels (score: split evenly
  between the levels on both sides, all of it on the one neighbour at an edge), which keeps
  `score = sum(i * p_i)` on the chosen level, or within 1 - confidence of it at an edge. With
  confidence > 0.5 (`ModelProfile` enforces it) and the default score tolerance 0.5, a pair is
  scored correct by the evaluation rules exactly when u < a; `expected_accuracy` does not rely
  on that, it simulates the answers and scores them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DEFAULT_TOLERANCE = 0.5
DEFAULT_CONFIDENCE = 0.8
KINDS = ("choice", "noul", "score")

Answer = dict[str, Any]
Truth = str | bool | int


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _hash_int(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(canonical_json(list(parts)).encode()).digest(), "big")


def _round4(value: float) -> float:
    return round(value, 4)


def choice_labels(question: Mapping[str, Any]) -> list[str]:
    """Labels in request order: keys of an object `criteria`, or the items of an array."""
    criteria = question.get("criteria")
    return [str(label) for label in criteria] if isinstance(criteria, dict | list) else []


def score_levels(question: Mapping[str, Any]) -> list[str]:
    criteria = question.get("criteria")
    return [str(level) for level in criteria] if isinstance(criteria, list) else []


def true_answer(state: Any, qid: str, question: Mapping[str, Any]) -> Truth:
    """The ground truth of one (case, question) pair."""
    kind = question.get("type")
    h = _hash_int("truth", state, qid, question)
    if kind == "choice":
        # Sorted so an object and an array listing the same labels in another order agree.
        labels = sorted(choice_labels(question))
        return labels[h % len(labels)]
    if kind == "noul":
        return bool(h & 1)
    if kind == "score":
        return h % len(score_levels(question))
    raise ValueError(f"unknown question type {kind!r}")


def case_uniform(state: Any, qid: str) -> float:
    """A number in [0, 1) fixed by (state, qid) alone: the same for every model."""
    # 53 bits so the float is exact and strictly below 1.
    return (_hash_int("case", state, qid) >> (256 - 53)) / float(1 << 53)


def _wrong_answer(state: Any, qid: str, question: Mapping[str, Any], truth: Truth) -> Truth:
    kind = question.get("type")
    h = _hash_int("wrong", state, qid, question)
    if kind == "choice":
        labels = sorted(choice_labels(question))
        index = labels.index(str(truth))
        return labels[(index + 1 + h % (len(labels) - 1)) % len(labels)]
    if kind == "noul":
        return not truth
    others = [level for level in range(len(score_levels(question))) if level != truth]
    return others[h % len(others)]


def confidence_of(probabilities: Iterable[float]) -> float:
    """`clamp((K * p_max - 1) / (K - 1), 0, 1)` for K options, rounded to 4 decimals."""
    values = list(probabilities)
    k = len(values)
    raw = (k * max(values) - 1) / (k - 1)
    return _round4(min(1.0, max(0.0, raw)))


def model_answer(
    state: Any,
    qid: str,
    question: Mapping[str, Any],
    accuracy: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Answer:
    """The answer a model with this profile gives, exactly as `/v1/systemone` returns it."""
    truth = true_answer(state, qid, question)
    chosen = (
        truth if case_uniform(state, qid) < accuracy else _wrong_answer(state, qid, question, truth)
    )
    kind = question["type"]
    if kind == "choice":
        labels = choice_labels(question)
        rest = _round4((1.0 - confidence) / (len(labels) - 1))
        probs = {label: (_round4(confidence) if label == chosen else rest) for label in labels}
        return {
            "type": "choice",
            "choice": chosen,
            "confidence": confidence_of(probs.values()),
            "probabilities": probs,
        }
    if kind == "noul":
        return {"type": "noul", "noul": _round4(confidence if chosen else 1.0 - confidence)}
    levels = score_levels(question)
    assert isinstance(chosen, int)
    level_probs = [0.0] * len(levels)
    level_probs[chosen] = _round4(confidence)
    neighbours = [n for n in (chosen - 1, chosen + 1) if 0 <= n < len(levels)]
    for n in neighbours:
        level_probs[n] = _round4((1.0 - confidence) / len(neighbours))
    return {
        "type": "score",
        "score": _round4(sum(i * p for i, p in enumerate(level_probs))),
        "confidence": confidence_of(level_probs),
        "legend": {str(i): text for i, text in enumerate(levels)},
        "probabilities": {str(i): p for i, p in enumerate(level_probs)},
    }


def answer_case(
    case: Mapping[str, Any], accuracy: float, confidence: float = DEFAULT_CONFIDENCE
) -> dict[str, Answer]:
    """All answers for one case (`state` + `questions`), as the runtime returns them."""
    state = case["state"]
    return {
        qid: model_answer(state, qid, question, accuracy, confidence)
        for qid, question in case["questions"].items()
    }


def pair_correct(
    question: Mapping[str, Any],
    expected: Any,
    answer: Mapping[str, Any] | None,
    tolerance: float | None = None,
) -> bool:
    """The evaluation rule (REFERENCE.md "Evaluation") for one pair; a missing answer is wrong."""
    if answer is None:
        return False
    kind = question.get("type")
    if kind == "choice":
        return bool(answer.get("choice") == expected)
    if kind == "noul":
        return bool((float(answer["noul"]) >= 0.5) == expected)
    if kind == "score":
        limit = DEFAULT_TOLERANCE if tolerance is None else tolerance
        return abs(float(answer["score"]) - float(expected)) <= limit
    return False


def calibration_point(
    question: Mapping[str, Any], expected: Any, answer: Mapping[str, Any], correct: bool
) -> tuple[float, bool]:
    """(confidence, correct) for ECE/Brier: choice → p[choice]; noul → max(p, 1-p);
    score → (max level probability, argmax == expected)."""
    kind = question.get("type")
    if kind == "choice":
        return float(answer["probabilities"][answer["choice"]]), correct
    if kind == "noul":
        p = float(answer["noul"])
        return max(p, 1.0 - p), correct
    probs = {int(k): float(v) for k, v in answer["probabilities"].items()}
    best = max(probs, key=lambda level: (probs[level], -level))
    return probs[best], best == expected


def count_correct_pairs(
    cases: Sequence[Mapping[str, Any]],
    accuracy: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[int, int]:
    """(correct pairs, all pairs) a model with this profile scores on `cases`."""
    correct = total = 0
    for case in cases:
        answers = answer_case(case, accuracy, confidence)
        tolerance = case.get("tolerance") or {}
        for qid, expected in case["expected"].items():
            total += 1
            question = case["questions"].get(qid)
            if question is not None and pair_correct(
                question, expected, answers.get(qid), tolerance.get(qid)
            ):
                correct += 1
    return correct, total


def count_failed_cases(
    cases: Sequence[Mapping[str, Any]],
    accuracy: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> int:
    """Cases with at least one wrong or missing answer (status.evaluation.failedCases)."""
    failed = 0
    for case in cases:
        answers = answer_case(case, accuracy, confidence)
        tolerance = case.get("tolerance") or {}
        for qid, expected in case["expected"].items():
            question = case["questions"].get(qid)
            if question is None or not pair_correct(
                question, expected, answers.get(qid), tolerance.get(qid)
            ):
                failed += 1
                break
    return failed


def expected_accuracy(
    cases: Sequence[Mapping[str, Any]],
    accuracy: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> float:
    """Exactly the accuracy (correct / all pairs) a model with this profile scores on `cases`."""
    correct, total = count_correct_pairs(cases, accuracy, confidence)
    return correct / total if total else 0.0


_LABELS = ("billing", "tech", "sales", "legal", "other")
_LEVELS = ("none", "low", "medium", "high", "critical")
_WORDS = (
    "invoice", "refund", "router", "password", "contract", "upgrade", "outage", "delay",
    "charge", "login", "license", "crash", "quote", "renewal", "timeout", "account",
)  # fmt: skip


def _pick(seed: int, index: int, what: str, n: int) -> int:
    return _hash_int("golden", seed, index, what) % n


def _golden_state(seed: int, index: int) -> Any:
    words = [_WORDS[_pick(seed, index, f"word{w}", len(_WORDS))] for w in range(6)]
    text = f"case {seed}-{index}: " + " ".join(words)
    # All three state shapes the contract allows.
    shape = index % 3
    if shape == 0:
        return text
    if shape == 1:
        return {"ticket": f"T-{seed}-{index:05d}", "text": text, "priority": index % 4}
    return [{"role": "customer", "text": text}, {"role": "agent", "text": "noted"}]


def _golden_question(seed: int, index: int, kind: str) -> dict[str, Any]:
    if kind == "choice":
        count = 2 + _pick(seed, index, "labels", len(_LABELS) - 1)
        labels = _LABELS[:count]
        criteria: Any = {label: f"about {label}" for label in labels} if index % 2 else list(labels)
        return {"type": "choice", "question": "Which team should handle it?", "criteria": criteria}
    if kind == "noul":
        return {
            "type": "noul",
            "question": "Is the customer asking for money back?",
            "criteria": {"true": "asks for a refund", "false": "does not"},
        }
    if kind == "score":
        count = 3 + _pick(seed, index, "levels", 3)
        return {"type": "score", "question": "How urgent is it?", "criteria": list(_LEVELS[:count])}
    raise ValueError(f"unknown question kind {kind!r}")


def make_golden_set(n: int, seed: int = 0, kinds: Sequence[str] = KINDS) -> list[dict[str, Any]]:
    """`n` golden cases (JSONL-ready dicts), one question per kind each, `q_<kind>` ids.

    `expected` holds the true answers; score questions get `tolerance` 0.5.
    """
    cases: list[dict[str, Any]] = []
    for index in range(n):
        state = _golden_state(seed, index)
        questions = {f"q_{kind}": _golden_question(seed, index, kind) for kind in kinds}
        case: dict[str, Any] = {
            "state": state,
            "questions": questions,
            "expected": {qid: true_answer(state, qid, q) for qid, q in questions.items()},
        }
        if "score" in kinds:
            case["tolerance"] = {"q_score": DEFAULT_TOLERANCE}
        cases.append(case)
    return cases

"""A runtime answer that cannot be read is typed, never an OverflowError/ValueError that
retries until EvaluationTimeout (issue 12, point 5).

- The body of a 2xx decide answer that is not a readable ``answers`` object (an integer past
  Python's digit limit, nesting past the recursion limit, not JSON) is RuntimeAnswerInvalid:
  permanent, and evaluate counts the case as failed (REFERENCE.md "a missing answer is wrong").
- A value inside an answer that no float holds (``10**400``) makes that answer wrong (MISSING),
  as any other answer off the contract.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from decisionmodel.engine.runtime_client import RuntimeClient
from decisionmodel.errors import RuntimeAnswerInvalid
from decisionmodel.evaluation import MISSING, Expectation, score_answer
from decisionmodel.vocabulary import PERMANENT_REASONS, Reason

QUESTIONS = {"q": {"type": "noul"}}
HUGE = 10**400


@pytest.mark.parametrize(
    "body",
    [
        b'{"answers": {"q": {"type": "noul", "noul": ' + b"1" * 5000 + b"}}}",
        b'{"answers": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"answers": {"q": {"type": "noul", "noul": 0.5}}',  # cut short
        b'{"model": "laya:en"}',
    ],
)
async def test_an_unreadable_decide_answer_is_runtime_answer_invalid(body: bytes) -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, content=body))
    async with RuntimeClient("http://10.0.0.1:11435", transport=transport) as client:
        with pytest.raises(RuntimeAnswerInvalid) as err:
            await client.decide("laya:en", "state", QUESTIONS)
    assert err.value.permanent and err.value.status == 200
    assert Reason.RUNTIME_ANSWER_INVALID in PERMANENT_REASONS
    assert "111111" not in str(err.value)


NOUL = Expectation("noul", True)
CHOICE = Expectation("choice", "a")
SCORE = Expectation("score", 1, Decimal("0.5"))


@pytest.mark.parametrize(
    ("expectation", "answer"),
    [
        (NOUL, {"type": "noul", "noul": HUGE}),
        (NOUL, {"type": "noul", "noul": -HUGE}),
        (CHOICE, {"type": "choice", "choice": "a", "probabilities": {"a": HUGE}}),
        (SCORE, {"type": "score", "score": 1, "probabilities": {"1": HUGE}}),
        (SCORE, {"type": "score", "score": 1, "probabilities": {"1" * 5000: 0.9}}),
    ],
)
def test_a_number_past_a_float_in_an_answer_makes_it_wrong(
    expectation: Expectation, answer: dict[str, Any]
) -> None:
    assert score_answer(expectation, answer) == MISSING


def test_a_huge_score_is_a_wrong_answer_not_an_overflow() -> None:
    found = score_answer(SCORE, {"type": "score", "score": HUGE, "probabilities": {"1": 0.9}})
    assert not found.correct

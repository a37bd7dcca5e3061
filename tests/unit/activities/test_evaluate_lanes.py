"""evaluate's lanes: what a case's send returns or raises, and how many cases a Pod gets."""

from __future__ import annotations

from typing import Any

import pytest

from activities.evaluate_lanes import (
    FAILED_CASE,
    IN_FLIGHT_PER_POD,
    in_flight_per_pod,
    sender,
)
from decisionmodel.errors import ProbeError, QueueFull, RuntimeAnswerInvalid, RuntimeRequestRejected
from decisionmodel.evaluation import GoldenCase

CASE = GoldenCase(index=0, line=1, state="s", questions={"q": {"type": "noul"}}, expectations={})


class Scripted:
    def __init__(self, outcome: dict[str, Any] | Exception) -> None:
        self.outcome = outcome

    async def decide(self, model: str, state: object, questions: Any) -> dict[str, Any]:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def send_with(outcome: dict[str, Any] | Exception) -> Any:
    return sender(Scripted(outcome), "laya:en")  # type: ignore[arg-type]


async def test_an_answer_is_its_answers_object() -> None:
    assert await send_with({"answers": {"q": {"noul": 0.2}}})(CASE) == {"q": {"noul": 0.2}}


@pytest.mark.parametrize(
    "error", [RuntimeRequestRejected("422", status=422), RuntimeAnswerInvalid("not JSON")]
)
async def test_a_refused_or_unreadable_case_is_a_failed_case(error: Exception) -> None:
    assert await send_with(error)(CASE) is FAILED_CASE


@pytest.mark.parametrize("error", [QueueFull("still full"), ProbeError("gone")])
async def test_queue_full_and_probe_errors_are_never_a_wrong_answer(error: Exception) -> None:
    # They fail the attempt (retried, resumed); the case is not counted.
    with pytest.raises(type(error)):
        await send_with(error)(CASE)


def pod(*env: dict[str, str], container: str = "ollaya") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "sidecar", "env": [{"name": "OLLAYA_MAX_QUEUE",
            "value": "1"}]}, {"name": container, "env": list(env)}]}}  # fmt: skip


def test_in_flight_per_pod_is_a_forward_pass_and_one_queued() -> None:
    assert IN_FLIGHT_PER_POD == 2
    assert in_flight_per_pod(pod()) == 2
    assert in_flight_per_pod({}) == 2
    assert in_flight_per_pod(pod({"name": "OLLAYA_MAX_QUEUE", "value": "512"})) == 2
    # The runtime refuses past OLLAYA_MAX_QUEUE: a Pod set lower gets no more than that.
    assert in_flight_per_pod(pod({"name": "OLLAYA_MAX_QUEUE", "value": "1"})) == 1
    assert in_flight_per_pod(pod({"name": "OLLAYA_MAX_QUEUE", "value": "0"})) == 1
    # Not a number: the runtime uses its default (512).
    assert in_flight_per_pod(pod({"name": "OLLAYA_MAX_QUEUE", "value": "many"})) == 2
    # Another container's setting is not the runtime's.
    assert in_flight_per_pod(pod(container="other")) == 2

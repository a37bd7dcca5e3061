"""How evaluate talks to each Pod: one sender per runtime client, and how many cases in flight.

RUNTIME_API.md "Concurrency": one forward pass at a time per model, at most ``OLLAYA_MAX_QUEUE``
(512) requests in flight, ``503 QUEUE_FULL`` beyond. Evaluation keeps
:data:`IN_FLIGHT_PER_POD` requests on each Pod: one in the forward pass and one queued, so the
Pod starts the next case the moment it answers one instead of waiting a round trip of the
worker. More would only queue on the Pod (no faster: the passes are serial) and, on the stable,
delay the production requests queued behind them. A Pod whose ``OLLAYA_MAX_QUEUE`` is set
lower gets no more than that.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from decisionmodel.engine.render.deployment import CONTAINER_NAME
from decisionmodel.engine.runtime_client import RuntimeClient
from decisionmodel.errors import RuntimeAnswerInvalid, RuntimeRequestRejected
from decisionmodel.evaluation import GoldenCase

IN_FLIGHT_PER_POD = 2


class _FailedCase:
    def __repr__(self) -> str:
        return "FAILED_CASE"


# What a sender returns for a case the runtime refused or answered unreadably.
FAILED_CASE: Final = _FailedCase()


def sender(client: RuntimeClient, model: str) -> Callable[[GoldenCase], Awaitable[object]]:
    """Sends one case; its ``answers`` object, or FAILED_CASE when retrying cannot help."""

    async def send(case: GoldenCase) -> object:
        try:
            answer = await client.decide(model, case.state, case.questions)
        except (RuntimeRequestRejected, RuntimeAnswerInvalid):
            # The case is wrong (a missing answer). Anything else (QueueFull past its attempts,
            # ProbeError) fails the attempt, which is retried and resumed.
            return FAILED_CASE
        return answer.get("answers")

    return send


def in_flight_per_pod(pod: Mapping[str, Any]) -> int:
    """IN_FLIGHT_PER_POD, or the runtime container's OLLAYA_MAX_QUEUE when that is lower."""
    containers = (pod.get("spec") or {}).get("containers") or []
    for container in containers:
        if container.get("name") != CONTAINER_NAME:
            continue
        for var in container.get("env") or []:
            if var.get("name") == "OLLAYA_MAX_QUEUE":
                try:
                    limit = int(str(var.get("value", "")).strip())
                except ValueError:
                    continue  # the runtime falls back to its default, 512, on a bad value
                return max(1, min(IN_FLIGHT_PER_POD, limit))
    return IN_FLIGHT_PER_POD

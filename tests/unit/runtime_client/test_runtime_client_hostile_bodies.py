"""Runtime answers that are not JSON the parser can hold: a typed error (ProbeError; for a
decide answer RuntimeAnswerInvalid, the case counts as wrong), never a ValueError or
RecursionError out of json.loads (found by make fuzz)."""

from __future__ import annotations

import httpx
import pytest

from decisionmodel.engine.runtime_client import RuntimeClient
from decisionmodel.errors import ProbeError, QueueFull, RuntimeAnswerInvalid

HOSTILE = [
    b'{"version": ' + b"9" * 5000 + b"}",  # int() refuses 4300+ digits: ValueError
    b'{"answers": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # RecursionError
]


def runtime(body: bytes, status: int = 200) -> RuntimeClient:
    return RuntimeClient(
        "http://10.1.2.3:11435",
        transport=httpx.MockTransport(lambda _: httpx.Response(status, content=body)),
    )


@pytest.mark.parametrize("body", HOSTILE, ids=["digits", "nesting"])
async def test_a_hostile_answer_is_a_probe_error(body: bytes) -> None:
    async with runtime(body) as rt:
        with pytest.raises(ProbeError):
            await rt.version()
        with pytest.raises(RuntimeAnswerInvalid):
            await rt.decide("laya:en", "s", {"q": {"type": "noul"}})
        with pytest.raises(ProbeError):
            await rt.inspect("laya:en")


@pytest.mark.parametrize("body", HOSTILE, ids=["digits", "nesting"])
async def test_a_hostile_error_body_still_maps_the_status(body: bytes) -> None:
    async with runtime(body, status=503) as rt:
        with pytest.raises(ProbeError) as info:
            await rt.version()
    assert (info.value.status, info.value.code) == (503, None)


@pytest.mark.parametrize(("header", "wait"), [("nan", 1.0), ("inf", 10.0), ("-5", 0.0)])
async def test_a_retry_after_that_is_no_number_of_seconds_waits_within_bounds(
    header: str, wait: float
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    full = httpx.Response(503, json={"code": "QUEUE_FULL"}, headers={"Retry-After": header})
    rt = RuntimeClient(
        "http://10.1.2.3:11435",
        transport=httpx.MockTransport(lambda _: full),
        sleep=sleep,
        queue_full_attempts=2,
    )
    async with rt:
        with pytest.raises(QueueFull):
            await rt.decide("laya:en", "s", {"q": {"type": "noul"}})
    assert waits == [wait]

"""A cancelled wait ends, even when an event arrives in the same instant.

Python 3.11's ``asyncio.wait_for`` returns the inner result and drops the cancellation when
both land together (bpo-42130, fixed in 3.12). A watch-fed wait that did so would keep
running after Temporal cancelled its activity: a warm-up that never ends, probing and gating
Pods and holding a worker slot."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kube.watch import ListWatch, Source


def _event(rv: int) -> dict[str, Any]:
    return {"type": "MODIFIED", "object": {"metadata": {"name": "p", "resourceVersion": str(rv)}}}


async def test_a_cancel_that_meets_an_event_still_ends_the_wait() -> None:
    queues: list[asyncio.Queue[Any]] = []

    async def stream(http: Any, rv: str, queue: asyncio.Queue[Any]) -> None:
        queues.append(queue)  # the test plays the watch's events
        await asyncio.Event().wait()

    watch = ListWatch(kube=None, src=Source(path="/api/v1/pods"), rv="1")  # type: ignore[arg-type]
    watch._stream = stream  # type: ignore[method-assign]
    events = watch._watch(None, 3600, time.monotonic() + 3600)  # type: ignore[arg-type]
    follow = asyncio.create_task(anext(events))  # type: ignore[arg-type]
    while not queues or not queues[0]._getters:  # blocked on the queue, between two events
        await asyncio.sleep(0)
    queues[0].put_nowait(_event(2))
    follow.cancel()
    # The event's wake-up runs before the cancel's: the race, every time.
    done, _ = await asyncio.wait({follow}, timeout=5)
    try:
        assert follow in done, "the cancelled wait went on waiting for the next event"
        with pytest.raises(asyncio.CancelledError):
            follow.result()
    finally:
        follow.cancel()
        await events.aclose()

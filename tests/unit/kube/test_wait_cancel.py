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

from kube import wait


def _event(rv: int) -> dict[str, Any]:
    return {"type": "MODIFIED", "object": {"metadata": {"name": "p", "resourceVersion": str(rv)}}}


async def test_a_cancel_that_meets_an_event_still_ends_the_wait() -> None:
    queue: asyncio.Queue[wait.Item] = asyncio.Queue()
    checks: list[int] = []

    async def check(objects: list[dict[str, Any]]) -> None:
        checks.append(len(objects))

    relist_at = time.monotonic() + 3600
    follow = asyncio.create_task(wait._follow(queue, {}, "1", check, 3600, relist_at))
    while not queue._getters:  # blocked on the queue, as between two watch events
        await asyncio.sleep(0)
    queue.put_nowait(_event(2))
    follow.cancel()
    # The event's wake-up runs before the cancel's: the race, every time.
    done, _ = await asyncio.wait({follow}, timeout=5)
    try:
        assert follow in done, "the cancelled wait went on waiting for the next event"
        with pytest.raises(asyncio.CancelledError):
            follow.result()
    finally:
        follow.cancel()

"""WorkQueue: client-go workqueue semantics, driven by hand on the event loop."""

from __future__ import annotations

import asyncio

import pytest

from controller.machinery.workqueue import QueueShutDown, WorkQueue

# Small real delays: long enough to order events on a loaded 2-core machine, short enough to
# keep the suite fast.
TICK = 0.05


async def get_nowait(q: WorkQueue[str]) -> str | None:
    """The next key if one is ready now, else None (without leaving a getter behind)."""
    try:
        return await asyncio.wait_for(q.get(), timeout=0.01)
    except TimeoutError:
        return None


async def test_fifo_and_duplicates_collapse() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "c", "b"):
        q.add(key)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0
    assert await get_nowait(q) is None


async def test_add_first_jumps_the_backlog() -> None:
    """A woken DecisionModel (its budget slot freed) goes ahead of every waiting key."""
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    q.add_first("c")  # already waiting: moved to the front, not duplicated
    q.add_first("new")
    assert len(q) == 4
    assert [await q.get() for _ in range(4)] == ["new", "c", "a", "b"]
    q.add_first("a")  # being processed: queued again on done, once
    assert len(q) == 0
    q.done("a")
    assert await q.get() == "a"


async def test_key_processing_is_not_handed_out_again_until_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")  # an event arrives during the reconcile: marked dirty, not queued
    q.add("a")
    assert len(q) == 0
    assert await get_nowait(q) is None  # a second worker does not get it
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"  # processed again exactly once
    q.done("a")
    assert await get_nowait(q) is None


async def test_done_without_readd_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    await q.get()
    q.done("a")
    assert len(q) == 0


async def test_two_workers_never_hold_the_same_key() -> None:
    q: WorkQueue[str] = WorkQueue()
    active: set[str] = set()
    overlaps: list[str] = []
    handled: list[str] = []

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except QueueShutDown:
                return
            if key in active:
                overlaps.append(key)
            active.add(key)
            await asyncio.sleep(0.005)
            handled.append(key)
            active.discard(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(3)]
    for _ in range(5):
        for key in ("a", "b"):
            q.add(key)
        await asyncio.sleep(0.002)
    await asyncio.sleep(TICK)
    q.shutdown()
    await asyncio.wait_for(asyncio.gather(*workers), timeout=5)
    assert overlaps == []
    assert {"a", "b"} == set(handled)


async def test_blocked_get_wakes_on_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.add("x")
    assert await asyncio.wait_for(getter, timeout=1) == "x"


async def test_cancelled_getter_does_not_swallow_a_key() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")  # wakes `first`
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, timeout=1) == "x"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_add_after_delays() -> None:
    q: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("a", 2 * TICK)
    assert len(q) == 0
    assert await get_nowait(q) is None
    assert await asyncio.wait_for(q.get(), timeout=2) == "a"
    assert loop.time() - start >= 2 * TICK - 0.005


async def test_add_after_earliest_wins_and_collapses() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 20.0)
    q.add_after("a", TICK)  # earlier: replaces the 20 s timer
    q.add_after("a", 10.0)  # later: ignored
    assert await asyncio.wait_for(q.get(), timeout=2) == "a"
    q.done("a")
    await asyncio.sleep(TICK)
    assert len(q) == 0  # only one delivery


async def test_add_after_zero_is_immediate() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 0)
    assert len(q) == 1


async def test_backoff_sequence_and_forget() -> None:
    q: WorkQueue[str] = WorkQueue()
    # 0.5 s doubling, capped at 60 s: 0.5 1 2 4 8 16 32 60 60
    delays = [q.add_rate_limited("a") for _ in range(9)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert q.num_requeues("a") == 9
    assert q.add_rate_limited("b") == 0.5  # per key
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert q.add_rate_limited("a") == 0.5
    assert q.backoff(10_000) == 60.0
    q.shutdown()  # drop the timers


async def test_rate_limited_key_arrives_after_its_backoff() -> None:
    q: WorkQueue[str] = WorkQueue(base_delay=TICK, max_delay=1.0)
    q.add_rate_limited("a")  # TICK
    q.add_rate_limited("a")  # 2*TICK, but the earlier pending delay wins
    assert await get_nowait(q) is None
    assert await asyncio.wait_for(q.get(), timeout=2) == "a"


async def test_shutdown_drains_then_raises_and_ignores_adds() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add_after("late", TICK)
    waiting: WorkQueue[str] = WorkQueue()
    blocked = asyncio.create_task(waiting.get())
    await asyncio.sleep(0)
    waiting.shutdown()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(blocked, timeout=1)

    q.shutdown()
    assert q.shutting_down
    q.add("b")
    assert await q.get() == "a"  # queued before shutdown: still handed out
    with pytest.raises(QueueShutDown):
        await q.get()
    await asyncio.sleep(2 * TICK)
    assert len(q) == 0  # the delayed key was dropped


def test_invalid_delays_rejected() -> None:
    with pytest.raises(ValueError):
        WorkQueue[str](base_delay=0)
    with pytest.raises(ValueError):
        WorkQueue[str](base_delay=2, max_delay=1)

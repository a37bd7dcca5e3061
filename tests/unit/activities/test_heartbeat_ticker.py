"""The heartbeat ticker reports progress, not only liveness: without an update for longer than
any step may take, it stops beating, so a stuck step misses its heartbeat timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from activities.warmup_inspect import HeartbeatTicker


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def beats() -> list[Any]:
    return []


def ticker(beats: list[Any], interval: float, clock: Clock) -> HeartbeatTicker:
    # Its own beat function: another test's activity still winding down in this event loop
    # beats through temporalio's, never into this list.
    return HeartbeatTicker(
        interval, {"step": 1}, stall_after=10, clock=clock, beat=lambda d: beats.append((d,))
    )


async def ticks(beats: list[Any], count: int) -> None:
    # Wait for `count` more beats or, when the ticker is silent, for that many intervals.
    start = len(beats)
    for _ in range(200):
        if len(beats) >= start + count:
            return
        await asyncio.sleep(0.01)


async def test_ticks_keep_the_heartbeat_while_a_step_runs(beats: list[Any]) -> None:
    clock = Clock()
    async with ticker(beats, 0.05, clock) as running:
        await ticks(beats, 3)
        assert len(beats) >= 3
        clock.now = 9
        running.update({"step": 2})
        clock.now = 18  # 9 s since the update: still within the stall
        before = len(beats)
        await ticks(beats, 2)
        assert len(beats) >= before + 2 and beats[-1] == ({"step": 2},)


async def test_no_update_past_the_stall_stops_the_beats(beats: list[Any]) -> None:
    clock = Clock()
    async with ticker(beats, 0.01, clock) as running:
        clock.now = 11
        assert running.stalled()
        silent_from = len(beats)
        await asyncio.sleep(0.1)  # ten intervals
        assert len(beats) == silent_from
        running.update({"step": 2})  # progress again: beats resume
        await ticks(beats, 1)
        assert not running.stalled() and len(beats) > silent_from

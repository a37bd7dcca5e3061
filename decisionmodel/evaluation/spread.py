"""Spread evaluation cases over several Pods, several in flight each, and commit them in order.

Evaluating one case at a time on one Pod runs at 1 / (latency + round trip): 17.9 cases/s at
50 ms where two replicas can answer 40 (issue 14). The runtime answers one forward pass at a time
per model and queues up to ``OLLAYA_MAX_QUEUE`` more (RUNTIME_API.md "Concurrency"), so each Pod
is kept busy by a small number of requests in flight: one in its forward pass, one queued behind
it so that the Pod never waits for the worker's round trip.

Answers come back out of order, but :func:`spread_cases` hands them to ``commit`` strictly in
dataset order, each once: the committed prefix is what the activity heartbeats, so a retried
attempt resumes at ``next_case_index`` and the sums are added in the order of a sequential run
(the same accuracy, ECE and Brier, to the last bit). Answers beyond the prefix when an attempt
dies are simply asked again. ``window`` bounds how far sending may run ahead of the prefix (the
answers held meanwhile, and the work a crash throws away).

The first exception of any send (a transient failure: the attempt is retried) cancels the other
sends and is raised as it is, after the prefix committed so far.

Pure asyncio: the sends are given (the activity wraps one runtime client per Pod).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from decisionmodel.evaluation.dataset import GoldenCase

R = TypeVar("R")

Send = Callable[[GoldenCase], Awaitable[R]]

# Answers held ahead of the committed prefix, per request in flight: enough that one slow case
# (a retry after QUEUE_FULL) does not stall the other Pods at once, small enough to bound memory.
WINDOW_PER_SLOT = 4


@dataclass(frozen=True)
class Lane(Generic[R]):
    """One Pod: how to send it a case, and how many cases it may have in flight."""

    send: Send[R]
    in_flight: int


class _InOrder(Generic[R]):
    """Hands out case positions, holds answers until their turn, commits the prefix."""

    def __init__(
        self, cases: Sequence[GoldenCase], commit: Callable[[GoldenCase, R], None], window: int
    ) -> None:
        self._cases = cases
        self._commit = commit
        self._window = window
        self._next = 0  # next position to hand out
        self._committed = 0  # positions committed
        self._held: dict[int, R] = {}
        self._room = asyncio.Condition()

    async def take(self) -> int | None:
        """The next position to send, once the window has room; None when all are handed out."""
        async with self._room:
            await self._room.wait_for(lambda: self._next - self._committed < self._window)
            if self._next >= len(self._cases):
                return None
            position, self._next = self._next, self._next + 1
            return position

    async def done(self, position: int, result: R) -> None:
        self._held[position] = result
        committed = self._committed
        while self._committed in self._held:
            self._commit(self._cases[self._committed], self._held.pop(self._committed))
            self._committed += 1
        if self._committed != committed:
            async with self._room:
                self._room.notify_all()

    async def run(self, send: Send[R]) -> None:
        while (position := await self.take()) is not None:
            await self.done(position, await send(self._cases[position]))


async def spread_cases(
    cases: Sequence[GoldenCase],
    lanes: Sequence[Lane[R]],
    commit: Callable[[GoldenCase, R], None],
    window: int | None = None,
) -> None:
    """Send every case of ``cases`` through ``lanes`` and ``commit`` each answer in order.

    Each lane runs ``in_flight`` loops that take the next case, so a slower Pod simply takes
    fewer cases. Raises the first exception a send raised (the others are cancelled); cases
    committed before it stay committed."""
    slots = [lane.send for lane in lanes for _ in range(max(lane.in_flight, 1))]
    if not cases:
        return
    if not slots:
        raise ValueError("spread_cases needs at least one lane")
    order = _InOrder(cases, commit, window or WINDOW_PER_SLOT * len(slots))
    tasks = [asyncio.create_task(order.run(send)) for send in slots]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        # Also on our own cancellation (the activity was cancelled): no send outlives the call.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if task in done and not task.cancelled():
            error = task.exception()
            if error is not None:
                raise error

"""The hub's pipeline controller meets a 429 on its first list (issue 34: it exited on one, in
each of three start-ups): it waits a bounded backoff, not ready meanwhile, lists again and goes
on. Pure: a stand-in for the list-then-watch, no API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from controller.hub import pipelines
from controller.hub.pipelines import (
    BACKOFF_MAX_SECONDS,
    PipelineController,
    PipelineHealth,
    backoff,
)
from kube.errors import Unavailable, from_status
from kube.watch import Event, Listed


class Answers:
    """The API server's answers to the lists, in order; then the watch stays open."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.lists = 0
        self.listed = asyncio.Event()

    def watch(self, *_: Any) -> Answers:
        return self

    async def events(self, idle: float | None = None) -> AsyncGenerator[Event, None]:
        self.lists += 1
        if self.failures:
            raise self.failures.pop(0)
        yield Listed([])
        self.listed.set()
        await asyncio.Event().wait()  # the watch, with no change


async def test_a_429_on_the_first_list_is_retried_not_ready_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = Answers(from_status(429, "TooManyRequests"), from_status(503, "ServiceUnavailable"))
    monkeypatch.setattr(pipelines, "ListWatch", answers.watch)
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        assert not health.ready()  # backing off: not ready, still alive
        assert health.healthy()

    health = PipelineHealth()
    controller = PipelineController(None, None, health)  # type: ignore[arg-type]
    controller.pause = sleep

    async def no_orphans(listed: set[tuple[str, str]]) -> None:
        """No Temporal here: nothing runs."""

    controller.abort_orphans = no_orphans  # type: ignore[method-assign]
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(answers.listed.wait(), 10)
        assert not task.done()
        assert answers.lists == 3 and pauses == [1.0, 2.0]
        assert health.ready() and health.failed_lists == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_backoff_doubles_and_is_bounded() -> None:
    assert [backoff(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(50) == BACKOFF_MAX_SECONDS
    assert isinstance(from_status(500, "x"), Unavailable)

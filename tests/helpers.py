"""Test helpers: wait for a condition instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def assert_eventually(
    check: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    """Call ``check`` until it returns a truthy value without raising; return that value.

    ``check`` may assert: the last AssertionError is re-raised with its message on timeout.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = AssertionError(f"{what or 'condition'} was {value!r}")
        except AssertionError as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s: {what}\n{last}") from last
        time.sleep(interval)


async def async_assert_eventually(
    check: Callable[[], Awaitable[T]], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = await check()
            if value:
                return value
            last = AssertionError(f"{what or 'condition'} was {value!r}")
        except AssertionError as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s: {what}\n{last}") from last
        await asyncio.sleep(interval)


async def eventually(
    check: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    """``assert_eventually`` for async tests: waits with ``asyncio.sleep``, so an in-process
    Temporal worker on the same event loop keeps running while the test waits."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = AssertionError(f"{what or 'condition'} was {value!r}")
        except AssertionError as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s: {what}\n{last}") from last
        await asyncio.sleep(interval)

"""Test helpers: wait for a condition instead of sleeping; a scratch namespace."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class _Waiting:
    """One wait: the deadline, and the last reason the condition did not hold."""

    def __init__(self, timeout: float, what: str) -> None:
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.what = what
        self.last: BaseException | None = None

    def judge(self, value: Any) -> bool:
        if value:
            return True
        self.last = AssertionError(f"{self.what or 'condition'} was {value!r}")
        return False

    def give_up_if_late(self) -> None:
        if time.monotonic() > self.deadline:
            raise AssertionError(
                f"not true within {self.timeout}s: {self.what}\n{self.last}"
            ) from self.last


def assert_eventually(
    check: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    """Call ``check`` until it returns a truthy value without raising; return that value.

    ``check`` may assert: the last AssertionError is re-raised with its message on timeout.
    """
    waiting = _Waiting(timeout, what)
    while True:
        try:
            value = check()
            if waiting.judge(value):
                return value
        except AssertionError as e:
            waiting.last = e
        waiting.give_up_if_late()
        time.sleep(interval)


async def async_assert_eventually(
    check: Callable[[], Awaitable[T]], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    waiting = _Waiting(timeout, what)
    while True:
        try:
            value = await check()
            if waiting.judge(value):
                return value
        except AssertionError as e:
            waiting.last = e
        waiting.give_up_if_late()
        await asyncio.sleep(interval)


async def eventually(
    check: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    """``assert_eventually`` for async tests: waits with ``asyncio.sleep``, so an in-process
    Temporal worker on the same event loop keeps running while the test waits."""
    waiting = _Waiting(timeout, what)
    while True:
        try:
            value = check()
            if waiting.judge(value):
                return value
        except AssertionError as e:
            waiting.last = e
        waiting.give_up_if_late()
        await asyncio.sleep(interval)


class _Kubectl(Protocol):
    def kubectl(self, *args: str, check: bool = True) -> Any: ...


def scratch_namespace(cluster: _Kubectl, prefix: str) -> Iterator[str]:
    """A fresh namespace ``<prefix>-<8 hex>`` for one test (``yield from`` it in a fixture),
    deleted afterwards without waiting for its objects to go."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def spec_hash(spec: Any, digest: str, image: str) -> str:
    """The revision hash of a DecisionModelSpec with ``digest`` and ``image``, each identity
    field named here by hand: a construction independent of the product's generic copy."""
    from decisionmodel.rollout.contracts import RevisionSpec
    from decisionmodel.rollout.identity import revision_hash

    return revision_hash(
        RevisionSpec(
            engine=spec.engine,
            model=spec.model,
            digest=digest,
            device=spec.device,
            image=image,
            resources=spec.resources,
            scheduling=spec.scheduling.to_wire(),
        )
    )

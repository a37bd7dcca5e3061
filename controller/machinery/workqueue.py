"""An asyncio work queue with client-go's workqueue semantics.

Work is keyed per DecisionModel (issue 5: "one slow object never blocks the others"), and these
are the guarantees client-go's rate-limiting workqueue gives controllers, which the reconcile
loop relies on:

- a key is never handed to two workers at once (`processing`);
- adding a key that is being processed marks it dirty; it is queued again on `done`, so an event
  that arrives during a reconcile is never lost;
- adding a key that is already waiting collapses into the waiting entry (FIFO position kept);
  `add_first` moves it to the front instead;
- `add_after` delays; of several pending delays for one key the earliest wins;
- `add_rate_limited` backs off per key exponentially (base * 2^failures, capped), reset by
  `forget` after a successful reconcile.

Not thread-safe: call it from the event loop (a watch thread uses `loop.call_soon_threadsafe`).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Hashable
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# Brief: per-key exponential backoff, base 0.5 s, max 60 s (client-go's default is 5 ms..1000 s;
# a reconcile here is an API round trip or a workflow start, so sub-second retries only add load).
DEFAULT_BASE_DELAY: Final = 0.5
DEFAULT_MAX_DELAY: Final = 60.0


class QueueShutDown(Exception):
    """`get` on a queue that is shut down and drained."""


class WorkQueue(Generic[K]):
    def __init__(
        self, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._queue: collections.deque[K] = collections.deque()
        # Keys that need processing: queued ones, and processing ones that were re-added.
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        # Delayed adds: key -> (ready time on the loop clock, timer).
        self._waiting: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[K, int] = {}
        self._shutting_down = False

    # --- basic queue ------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue `key` unless it already waits; if it is being processed, requeue it on `done`."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one()

    def add_first(self, key: K) -> None:
        """Like `add`, but ahead of every waiting key (moved there if it already waits): a queued
        DecisionModel whose budget slot freed must not wait behind a backlog of 1,000 keys."""
        if self._shutting_down:
            return
        if key in self._dirty:
            if key in self._processing:
                return  # queued again on `done`
            self._queue.remove(key)  # O(waiting); once per freed slot
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.appendleft(key)
        self._wake_one()

    async def get(self) -> K:
        """The next key; the caller must call `done(key)` when finished with it.

        Keys queued before `shutdown` are still handed out; then `QueueShutDown` is raised.
        """
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._getters:
                    self._getters.remove(waiter)
                # A wake-up meant for this getter must not be lost with it.
                elif self._queue:
                    self._wake_one()
                raise
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """Processing of `key` finished; if it was re-added meanwhile, it is queued again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one()

    def __len__(self) -> int:
        """Keys waiting to be handed out (not those processing or delayed), as in client-go."""
        return len(self._queue)

    # --- delays -----------------------------------------------------------------------------

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` after `delay` seconds; an earlier pending delay for the same key wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        handle = loop.call_at(ready_at, self._ready, key)
        self._waiting[key] = (ready_at, handle)

    def _ready(self, key: K) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    # --- rate limiting ----------------------------------------------------------------------

    def add_rate_limited(self, key: K) -> float:
        """Add `key` after its backoff (base * 2^failures, capped); returns the delay used."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = self.backoff(failures)
        self.add_after(key, delay)
        return delay

    def backoff(self, failures: int) -> float:
        # Cap the exponent first: 2**failures for a long-failing key would grow without bound.
        if failures >= 64:
            return self._max_delay
        return float(min(self._base_delay * (2**failures), self._max_delay))

    def forget(self, key: K) -> None:
        """Reset the key's backoff (after a successful reconcile); does not dequeue it."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    # --- shutdown ---------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop accepting keys, drop delayed ones, wake every getter."""
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

"""Liveness from progress, not from a beating thread: wedged = work to do, nothing moving.

A process whose HTTP thread answers is not alive in the sense that matters: the controller's
reconcile workers can all hang on a call while the Lease renews and ``/healthz`` says ok; a
worker's activities can all block while the SDK's poller keeps polling. So each loop reports
what it does, and liveness fails once there is work in flight (or waiting) and nothing has
progressed for ``stall_seconds``: the kubelet restarts the process and another replica (or the
restarted one) takes the work over. An idle loop is always alive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class LoopProgress:
    """Counts work in flight and remembers when anything last moved. Thread-safe: the health
    endpoint reads it from its own thread."""

    def __init__(self, stall_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_seconds = stall_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last = clock()

    def started(self) -> None:
        with self._lock:
            if self._in_flight == 0:
                self._last = self._clock()  # idle until now: the stall counts from here
            self._in_flight += 1

    def progressed(self) -> None:
        with self._lock:
            self._last = self._clock()

    def finished(self) -> None:
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            self._last = self._clock()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def stalled_for(self) -> float:
        with self._lock:
            return self._clock() - self._last

    def healthy(self, waiting: int = 0) -> bool:
        """False when work is in flight or ``waiting`` and nothing moved for the stall time."""
        with self._lock:
            busy = self._in_flight > 0 or waiting > 0
            return not busy or self._clock() - self._last <= self.stall_seconds

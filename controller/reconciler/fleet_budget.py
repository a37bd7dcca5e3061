"""The fleet budget (``--max-concurrent-rollouts``): an in-memory count, O(1) per start.

The controller counts the rollouts it starts itself and releases a slot when a reconcile sees
that rollout close or promote (the reconcile already lists its DecisionModel's running
rollouts). Visibility is asked on a slow period only (``resync_seconds``, and on first use, i.e.
when this replica starts leading): that corrects the count for another controller's starts and
for what a restarted controller started before. Asking visibility plus a describe per recent
start on every start serialised the starts (1,645 describes for 100 starts, 8,772 for 280: at
most 36-39 rollouts ran at once under a budget of 100 or 300; issue 14).

What counts: a running RolloutWorkflow whose DmPhase is not Ready (AwaitingPromotion included;
a promoted rollout waiting out its grace does not), as ``Rollouts.in_flight`` queries.
DecisionModels over the budget wait in FIFO order; when a slot frees, the first ones in line are
woken (``wake``) instead of waiting for their next re-check.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import islice

from controller.temporal.rollouts import RunningRollout
from decisionmodel.rollout.contracts import WORKFLOW_ID_PREFIX

# How long a rollout this process started is held in the count although visibility does not
# list it (a generous bound on visibility lag; an Elasticsearch-backed cluster lags ~1 s).
VISIBILITY_LAG_SECONDS = 30.0
# How often the count is replaced by what visibility lists (plus starts younger than the lag).
RESYNC_SECONDS = 30.0
# Re-checks of queued DecisionModels, at most this many per second in all: the next in line is
# started by a wake, so a re-check is only a safety net, and 950 queued re-checking every 30 s
# (32 reconciles/s) kept the work queue so long that a wake waited behind them (1,000 at once,
# budget 50).
RECHECKS_PER_SECOND = 2.0


def key_of(wid: str) -> str | None:
    """``rollout/<ns>/<name>/…`` → ``<ns>/<name>`` (None for any other workflow ID)."""
    parts = wid.split("/")
    if len(parts) < 4 or parts[0] != WORKFLOW_ID_PREFIX:
        return None
    return f"{parts[1]}/{parts[2]}"


@dataclass
class FleetBudget:
    limit: int  # 0 = unlimited
    list_in_flight: Callable[[], Awaitable[set[str]]]  # visibility: IDs in flight
    resync_seconds: float = RESYNC_SECONDS
    lag_seconds: float = VISIBILITY_LAG_SECONDS
    wake: Callable[[str], None] | None = None  # re-queue a DecisionModel (the work queue's add)
    clock: Callable[[], float] = time.monotonic
    # Rollouts counted in flight → when they were counted (monotonic).
    flights: dict[str, float] = field(default_factory=dict)
    by_key: dict[str, set[str]] = field(default_factory=dict)
    # DecisionModels waiting for a slot, in arrival order.
    queue: OrderedDict[str, None] = field(default_factory=OrderedDict)
    synced_at: float | None = None

    @property
    def in_flight(self) -> int:
        return len(self.flights)

    async def allows(self, key: str) -> bool:
        """May ``key`` start its rollout now? Queues it (FIFO) when not. The caller holds the
        lock under which it also starts, so two reconciles never take one slot."""
        if self.limit <= 0:
            return True
        self.queue.setdefault(key, None)
        now = self.clock()
        if self.synced_at is None or now - self.synced_at >= self.resync_seconds:
            await self.resync(checking=key)
        free = self.limit - len(self.flights)
        # FIFO: only the first `free` DecisionModels in arrival order may start now.
        return free > 0 and key in islice(self.queue, free)

    def position(self, key: str) -> int | None:
        """``key``'s place in line (1 = next to start), None when it does not wait."""
        for place, queued in enumerate(self.queue, start=1):
            if queued == key:
                return place
        return None

    def queued_message(self, key: str) -> str:
        """What a queued DecisionModel's Ready condition says: its place and the budget."""
        place = self.position(key)
        where = f"{place} of {len(self.queue)} in line" if place else "in line"
        return (
            f"waiting for a rollout slot: {where}, {self.in_flight}/{self.limit} rollouts in "
            f"flight (--max-concurrent-rollouts {self.limit}; raise it with more workers, see "
            'docs/operations.md "Scaling")'
        )

    def recheck_seconds(self, base: float) -> float:
        """When a queued DecisionModel re-checks: ``base``, spread out for a long queue."""
        return max(base, len(self.queue) / RECHECKS_PER_SECOND)

    def started(self, key: str, wid: str) -> None:
        self.queue.pop(key, None)
        if self.limit <= 0:
            return
        self._count(wid, self.clock())

    def dequeue(self, key: str) -> None:
        """``key`` no longer waits for a slot (deleted, back at its stable, already running):
        the next in line may now be among the first ``free``."""
        if self.queue.pop(key, 0) is None:
            self._wake_heads()

    def observe(self, key: str, running: list[RunningRollout], stable: str | None) -> None:
        """What a reconcile of ``key`` saw: its running rollouts and its stable revision's hash.
        A counted rollout that is no longer running, or that promoted (its revision is now the
        stable, waiting out its grace), frees its slot."""
        counted = self.by_key.get(key)
        if not counted:
            return
        listed = {r.workflow_id: r for r in running}
        now = self.clock()
        freed = False
        for wid in list(counted):
            seen = listed.get(wid)
            if seen is None and now - self.flights[wid] < self.lag_seconds:
                continue  # just started: visibility may not list it yet
            if seen is None or (stable is not None and seen.revision == stable):
                self._release(wid)
                freed = True
        if freed:
            self._wake_heads()

    async def resync(self, checking: str | None = None) -> None:
        """Replace the count by visibility's, keeping this process's starts it cannot list yet;
        wake the first in line (but ``checking``, whose reconcile is asking now)."""
        listed = await self.list_in_flight()
        now = self.clock()
        recent = {w: t for w, t in self.flights.items() if now - t < self.lag_seconds}
        self.flights.clear()
        self.by_key.clear()
        for wid in listed:
            # Listed: no lag to bridge, so a reconcile that no longer sees it releases it.
            self._count(wid, recent.get(wid, now - self.lag_seconds))
        for wid, at in recent.items():
            if wid not in self.flights:
                self._count(wid, at)
        self.synced_at = now
        self._wake_heads(checking)

    def _count(self, wid: str, at: float) -> None:
        self.flights[wid] = at
        key = key_of(wid)
        if key is not None:
            self.by_key.setdefault(key, set()).add(wid)

    def _release(self, wid: str) -> None:
        self.flights.pop(wid, None)
        key = key_of(wid)
        counted = self.by_key.get(key) if key is not None else None
        if counted is not None:
            counted.discard(wid)
            if not counted and key is not None:
                del self.by_key[key]

    def _wake_heads(self, checking: str | None = None) -> None:
        """Re-queue the DecisionModels first in line for the slots free now."""
        free = self.limit - len(self.flights)
        if self.wake is None or free <= 0:
            return
        for key in list(islice(self.queue, free)):
            if key != checking:
                self.wake(key)


__all__ = [
    "RECHECKS_PER_SECOND",
    "RESYNC_SECONDS",
    "VISIBILITY_LAG_SECONDS",
    "FleetBudget",
    "key_of",
]

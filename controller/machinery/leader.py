"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Issue 5: "two controller replicas never both dispatch". The rules that guarantee it:

- a Lease held by another identity is taken only once it expired: renewTime +
  leaseDurationSeconds has passed (the brief's rule) AND the record has not changed for
  leaseDurationSeconds by our own clock (client-go's rule, which also holds when the holder's
  clock runs behind ours);
- every write is a replace carrying the resourceVersion that was read, so of two candidates
  racing for an expired Lease exactly one wins (the other gets 409);
- the leader stops leading (calls `on_stopped`) once renewals have failed for `renew_deadline`,
  measured from the time it wrote into its last successful renewal; with renew_deadline <
  lease_duration it has stopped before any other candidate may consider the Lease expired.

`release()` (clean shutdown) stops leading first, then clears holderIdentity with
leaseDurationSeconds 1, so a successor takes over at its next retry instead of waiting out the
lease.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kube.errors import KubeError
from kube.lease import LeaseRecord, LeaseStore, format_micro_time, parse_time

log = logging.getLogger("dmrollout.controller.leader")

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _as_timedelta(value: float | timedelta) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


class LeaderElector:
    """Campaigns for one Lease; `run` returns once leadership is lost or released."""

    def __init__(
        self,
        leases: LeaseStore,
        identity: str,
        lease_duration: float | timedelta = 15.0,
        renew_deadline: float | timedelta = 10.0,
        retry_period: float | timedelta = 2.0,
        clock: Clock = _utcnow,
    ) -> None:
        """Durations in seconds (or timedeltas); `clock` is the wall clock (UTC) written into
        renewTime and used for every expiry decision."""
        lease_duration = _as_timedelta(lease_duration)
        renew_deadline = _as_timedelta(renew_deadline)
        retry_period = _as_timedelta(retry_period)
        if not identity:
            raise ValueError("identity must not be empty (an empty holder means 'released')")
        # client-go's validation: the leader must give up before the lease can be seen expired.
        if not lease_duration > renew_deadline > retry_period > timedelta(0):
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.leases = leases
        self.namespace = leases.namespace
        self.name = leases.name
        self.identity = identity
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._clock = clock
        self._leading = False
        self._stopping = False
        self._lock = asyncio.Lock()
        # The last record seen and when (our clock) it was first seen: client-go's
        # observedRecord/observedTime, which make expiry independent of the holder's clock.
        self._observed: LeaseRecord | None = None
        self._observed_at: datetime | None = None
        self._last_renew: datetime | None = None
        self._on_stopped: Callable[[], None] | None = None
        self._started_task: asyncio.Task[None] | None = None

    # --- public -----------------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self._leading

    async def run(
        self,
        on_started: Callable[[], Awaitable[None]] | None,
        on_stopped: Callable[[], None],
    ) -> None:
        """Acquire the Lease, then renew it until renewal fails for `renew_deadline` or
        `release()` is called; `on_started()` runs as a task while leading (cancelled when
        leadership ends) and `on_stopped()` is called once when leadership ends.

        Cancelling `run` while leading also stops leading (on_stopped) but leaves the Lease
        held until it expires: call `release()` for a prompt hand-over.
        """
        self._on_stopped = on_stopped
        try:
            if not await self._acquire():
                return
            log.info("%s became leader of lease %s/%s", self.identity, self.namespace, self.name)
            if on_started is not None:
                self._started_task = asyncio.create_task(
                    _run_callback(on_started), name="leader-on-started"
                )
            await self._renew_until_lost()
        finally:
            self._stop_leading()

    async def release(self) -> None:
        """Stop leading and hand the Lease over at once (clean shutdown)."""
        self._stopping = True
        async with self._lock:
            was_leading = self._leading
            # Stop dispatching before the Lease says anyone else may start.
            self._stop_leading()
            if not was_leading and self._observed is None:
                return
            # A renewal still in flight from a cancelled `run` may win the race once (409).
            for _ in range(3):
                try:
                    if await self._release_once():
                        log.info(
                            "%s released lease %s/%s", self.identity, self.namespace, self.name
                        )
                    return
                except KubeError as e:
                    log.warning("lease release failed: %s", e.status)
                    return
            log.warning("lease release gave up after repeated conflicts")

    async def _release_once(self) -> bool:
        lease = await self.leases.read(self._renew_deadline.total_seconds())
        if lease is None:
            return False
        record = LeaseRecord.from_lease(lease)
        if record.holder_identity != self.identity:
            return False
        now = format_micro_time(self._clock())
        released = LeaseRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            lease_transitions=record.lease_transitions,
        )
        return await self._replace(lease, released)

    # --- loops ------------------------------------------------------------------------------

    async def _acquire(self) -> bool:
        retry = self._retry_period.total_seconds()
        while not self._stopping:
            if await self._attempt(timeout=self._renew_deadline.total_seconds()):
                if self._remaining() > 0:
                    self._leading = True
                    return True
                # The write landed after its own renew deadline (a slow API server): leading on
                # it would stop at once. The Lease is ours now; the next attempt renews it.
                log.info(
                    "%s got lease %s too late to lead on it; renewing", self.identity, self.name
                )
            await asyncio.sleep(retry)
        return False

    async def _renew_until_lost(self) -> None:
        retry = self._retry_period.total_seconds()
        while not self._stopping:
            await asyncio.sleep(min(retry, max(0.0, self._remaining())))
            if self._stopping:
                return
            remaining = self._remaining()
            if remaining <= 0:
                log.warning("%s lost lease %s: renew deadline passed", self.identity, self.name)
                return
            # A hanging API call must not keep us leading past the deadline.
            if not await self._attempt(timeout=remaining) and self._remaining() <= 0:
                log.warning("%s lost lease %s: renew deadline passed", self.identity, self.name)
                return

    def _remaining(self) -> float:
        assert self._last_renew is not None
        elapsed = self._clock() - self._last_renew
        return (self._renew_deadline - elapsed).total_seconds()

    async def _attempt(self, timeout: float | None) -> bool:
        try:
            # asyncio.timeout, not wait_for: on 3.11, wait_for can swallow a cancel that lands as
            # the attempt completes, and `run` would then never end (a test's teardown hung).
            async with asyncio.timeout(timeout):
                return await self._try_acquire_or_renew()
        except TimeoutError:
            return False
        except KubeError as e:
            log.warning("lease %s/%s: API error %s", self.namespace, self.name, e)
            return False
        except Exception:  # transport errors: retried at the next period like client-go
            log.exception("lease %s/%s: update failed", self.namespace, self.name)
            return False

    def _stop_leading(self) -> None:
        task, self._started_task = self._started_task, None
        if task is not None and not task.done():
            task.cancel()
        if self._leading:
            self._leading = False
            if self._on_stopped is not None:
                self._on_stopped()

    # --- one attempt ------------------------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        async with self._lock:
            if self._stopping:
                return False
            now = self._clock()
            stamp = format_micro_time(now)
            # Rounded up: a successor judges expiry by the written value, never shorter than ours.
            duration = math.ceil(self._lease_duration.total_seconds())
            lease = await self.leases.read(self._renew_deadline.total_seconds())
            if lease is None:
                fresh = LeaseRecord(self.identity, duration, stamp, stamp, 0)
                if not await self.leases.create(fresh, self._renew_deadline.total_seconds()):
                    return False  # another candidate created it first
                self._observe(fresh, now)
                self._last_renew = now
                return True

            record = LeaseRecord.from_lease(lease)
            if record != self._observed:
                self._observe(record, now)
            holder = record.holder_identity
            if holder and holder != self.identity and self._held_by_other(record, now):
                return False

            if holder == self.identity:
                acquire_time = record.acquire_time or stamp
                transitions = record.lease_transitions
            else:
                acquire_time = stamp
                transitions = record.lease_transitions + 1
            mine = LeaseRecord(self.identity, duration, acquire_time, stamp, transitions)
            if not await self._replace(lease, mine):
                return False  # someone wrote the Lease since we read it
            self._observe(mine, now)
            self._last_renew = now
            return True

    def _held_by_other(self, record: LeaseRecord, now: datetime) -> bool:
        duration = timedelta(seconds=record.lease_duration_seconds)
        renewed = parse_time(record.renew_time)
        by_lease_clock = renewed is not None and now < renewed + duration
        assert self._observed_at is not None
        by_our_clock = now < self._observed_at + duration
        return by_lease_clock or by_our_clock

    def _observe(self, record: LeaseRecord, now: datetime) -> None:
        self._observed = record
        self._observed_at = now

    async def _replace(self, lease: dict[str, Any], record: LeaseRecord) -> bool:
        return await self.leases.replace(lease, record, self._renew_deadline.total_seconds())


async def _run_callback(on_started: Callable[[], Awaitable[None]]) -> None:
    try:
        await on_started()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("on_started callback failed")

"""ModelNotFound is re-resolved (seed 001: "requeued and re-resolved"), with a bounded backoff.

A tag that does not exist yet usually will: the model is being published, or a typo is being
fixed upstream. A revision that failed for it is started again by itself, 30 s after the
failure, then 60 s after that attempt started, 120 s, ... at most every 10 minutes, without a
retry annotation; any other failure still waits for a spec change or ``decisionmodel.io/retry``.
A spec change is a new revision and starts at once, whatever the backoff of the old one.

The schedule is kept on the DecisionModel (``status.reResolve``, the controller's field): the
revision it counts for, the attempts started, when the last one started; written *before* that
attempt's run starts, so a crash in between delays the next attempt by one wait and never
starts one early. A restarted controller or a new leader reads it back. Issue 34: kept in memory
and measured from the first failure, a restart at 126 s started 3 runs in 6 s, and past the cap
every wait had already elapsed (runs at 600, 602, 664 s).

Pure, apart from ``ReResolves``: the records this process wrote, for the few reconciles its
watch-fed cache does not show them yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from decisionmodel.api.status import FailedRevisionStatus, ReResolveStatus
from decisionmodel.vocabulary import Reason

FIRST: Final = timedelta(seconds=30)
LONGEST: Final = timedelta(minutes=10)
# 2**30 waits of 30 s are ~34,000 years: past any cap, and no timedelta overflow.
_MAX_DOUBLINGS: Final = 30


@dataclass(frozen=True)
class Backoff:
    first: timedelta = FIRST
    longest: timedelta = LONGEST

    def wait(self, attempts: int) -> timedelta:
        """The wait before attempt ``attempts + 1``: doubles per attempt, never shrinks."""
        doubled: timedelta = self.first * 2 ** min(attempts, _MAX_DOUBLINGS)
        return min(doubled, self.longest)

    def describe(self) -> str:
        return f"waits double from {_span(self.first)} to {_span(self.longest)}"


def _span(d: timedelta) -> str:
    s = d.total_seconds()
    return f"{s / 60:g} min" if s >= 60 and s % 60 == 0 else f"{s:g} s"


def re_resolvable(failed: FailedRevisionStatus | None) -> bool:
    return failed is not None and failed.reason == Reason.MODEL_NOT_FOUND and bool(failed.failed_at)


def counts_for(record: ReResolveStatus | None, failed: FailedRevisionStatus) -> bool:
    """Whether ``record`` holds the attempts of this failure: the same revision, and attempts
    started after it was recorded (an attempt that fails again keeps failedAt; a later failure
    of the same revision, after it resolved once, is a new failure and starts a new count)."""
    return (
        record is not None
        and record.hash == failed.hash
        and failed.failed_at is not None
        and record.last_attempt_time >= failed.failed_at.replace(microsecond=0)
    )


def attempts_of(record: ReResolveStatus | None, failed: FailedRevisionStatus) -> int:
    return record.attempts if record is not None and counts_for(record, failed) else 0


def due_at(
    failed: FailedRevisionStatus | None, record: ReResolveStatus | None, backoff: Backoff
) -> datetime | None:
    """When ``failed`` is next re-resolved; None when it is not a ModelNotFound."""
    if failed is None or failed.failed_at is None or not re_resolvable(failed):
        return None
    if record is not None and counts_for(record, failed):
        return record.last_attempt_time + backoff.wait(record.attempts)
    return failed.failed_at + backoff.wait(0)


def after_attempt(
    failed: FailedRevisionStatus, record: ReResolveStatus | None, now: datetime
) -> ReResolveStatus:
    """The record to write before an attempt starts at ``now``. Its time is rounded up to the
    whole second status keeps, so the next due time is never earlier than the wait."""
    started = now if now.microsecond == 0 else now.replace(microsecond=0) + timedelta(seconds=1)
    return ReResolveStatus(
        hash=failed.hash, attempts=attempts_of(record, failed) + 1, last_attempt_time=started
    )


def stale(record: ReResolveStatus | None, failed: FailedRevisionStatus | None) -> bool:
    """A record left from a failure that is gone (resolved, replaced by another revision's or
    another reason's): removed, so status does not show a backoff that no longer runs."""
    if record is None:
        return False
    return failed is None or not re_resolvable(failed) or record.hash != failed.hash


@dataclass
class ReResolves:
    """The records this process wrote, per DecisionModel key: its watch-fed cache may show the
    DecisionModel as it was before the write for a reconcile or two."""

    written: dict[str, ReResolveStatus] = field(default_factory=dict)

    def latest(self, key: str, recorded: ReResolveStatus | None) -> ReResolveStatus | None:
        mine = self.written.get(key)
        if mine is None or (
            recorded is not None and recorded.last_attempt_time >= mine.last_attempt_time
        ):
            return recorded
        return mine

    def wrote(self, key: str, record: ReResolveStatus) -> None:
        self.written[key] = record

    def forget(self, key: str) -> None:
        self.written.pop(key, None)

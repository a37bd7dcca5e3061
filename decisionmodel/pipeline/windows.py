"""Change windows: when a stage may start (issue 25).

A window opens on each of its days at ``start`` local time and closes at ``end``; an end before
the start crosses midnight, so the window belongs to the day it opens on. Times are computed in
the window's IANA zone (``zoneinfo``), so a window keeps its local hours across daylight-saving
changes. Pure and deterministic: the workflow calls it with ``workflow.now()``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from decisionmodel.api.pipeline import ChangeWindow

# A window opens at least once a week; eight days of openings always hold the next one.
_DAYS_AHEAD: Final = 8


def _intervals(window: ChangeWindow, around: datetime) -> list[tuple[datetime, datetime]]:
    """The window's openings from the day before ``around`` to a week after, in UTC."""
    zone = ZoneInfo(window.time_zone)
    local = around.astimezone(zone)
    start_min, end_min = window.minutes()
    days = {d.weekday for d in window.days}
    out: list[tuple[datetime, datetime]] = []
    for offset in range(-1, _DAYS_AHEAD):
        day = (local + timedelta(days=offset)).date()
        if day.weekday() not in days:
            continue
        midnight = datetime(day.year, day.month, day.day, tzinfo=zone)
        opens = midnight + timedelta(minutes=start_min)
        closes = midnight + timedelta(minutes=end_min)
        if end_min < start_min:
            closes += timedelta(days=1)
        # Wall-clock arithmetic in the zone, then to UTC: 09:00 stays 09:00 across a DST change.
        out.append((_utc(opens), _utc(closes)))
    return out


def _utc(local: datetime) -> datetime:
    # Re-read the wall time in its zone (timedelta arithmetic keeps the old UTC offset).
    zone = local.tzinfo
    assert zone is not None
    wall = local.replace(tzinfo=None)
    return wall.replace(tzinfo=zone).astimezone(UTC)


def next_opening(windows: list[ChangeWindow], now: datetime) -> datetime:
    """``now`` when inside a window (or there are none), else when the next one opens."""
    if not windows:
        return now
    best: datetime | None = None
    for window in windows:
        for opens, closes in _intervals(window, now):
            if opens <= now < closes:
                return now
            if opens > now and (best is None or opens < best):
                best = opens
    assert best is not None  # every window has at least one day, so opens within a week
    return best


def describe(windows: list[ChangeWindow]) -> str:
    """The windows as a user wrote them, for a status message."""
    return "; ".join(
        f"{','.join(d.value for d in w.days)} {w.start}-{w.end} {w.time_zone}" for w in windows
    )

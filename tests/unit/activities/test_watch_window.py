"""The post-promotion watch resumes its window on a retry instead of starting a new one, and
goes on past it while a judgement is open (issue 34)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from activities.watch_promoted import Pace, watch_over, window_end
from decisionmodel.rollout.contracts import DMRef, RevisionRecord, WatchPromotedInput

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
INP = WatchPromotedInput(
    dm=DMRef(namespace="ns", name="dm", uid="u", generation=1),
    stable=RevisionRecord(hash="r1", model="laya:en", digest="a" * 64),
    replicas=2,
    window_seconds=600,
)


def test_a_first_attempt_watches_the_whole_window() -> None:
    assert window_end(INP, (), NOW) == NOW + timedelta(seconds=600)


def test_a_retry_watches_what_is_left_of_the_window() -> None:
    recorded = NOW - timedelta(seconds=100)
    assert window_end(INP, [recorded.isoformat()], NOW) == recorded


def test_details_that_are_not_a_time_start_the_window_again() -> None:
    assert window_end(INP, ["status recorded"], NOW) == NOW + timedelta(seconds=600)


def test_the_watch_ends_with_its_window_unless_a_judgement_is_still_open() -> None:
    ends = NOW + timedelta(seconds=600)
    assert not watch_over(INP, ends, ends - timedelta(seconds=1), False, NOW)
    assert watch_over(INP, ends, ends, False, NOW)
    # Open (a Pod silent, no Pod passing): it goes on, at most the error window and strikes.
    assert not watch_over(INP, ends, ends, True, NOW)
    assert INP.overtime_seconds() == 180 + 10 * 3
    assert not watch_over(INP, ends, ends + timedelta(seconds=209), True, NOW)
    assert watch_over(INP, ends, ends + timedelta(seconds=210), True, NOW)
    # An attempt resumed in the overtime (a worker crashed) judges afresh: its own overtime.
    resumed = ends + timedelta(seconds=100)
    assert not watch_over(INP, ends, ends + timedelta(seconds=300), True, resumed)
    assert watch_over(INP, ends, ends + timedelta(seconds=310), True, resumed)


def test_a_look_every_period_and_at_once_after_a_change_of_the_pods() -> None:
    pace = Pace(period=10, gap=1, follow_up=3)
    assert pace.due(0, changed=False)  # the first look at once
    pace.looked(0, window_left=600)
    assert not pace.due(5, changed=False)
    assert pace.due(10, changed=False)
    pace.looked(10, window_left=590)
    # A Pod changed (a gate flipped, a container restarted): a look at once, but never two
    # within a second; then one a second for the follow-up, then every period again.
    assert not pace.due(10.5, changed=True)
    assert pace.due(11, changed=False)
    pace.looked(11, window_left=589)
    assert pace.due(12, changed=False)
    pace.looked(12, window_left=588)
    assert pace.due(13.2, changed=False)
    pace.looked(13.2, window_left=587)
    assert not pace.due(14.5, changed=False)
    assert pace.due(23.2, changed=False)


def test_a_look_at_the_windows_end() -> None:
    pace = Pace(period=10)
    pace.looked(0, window_left=4)
    assert not pace.due(3.9, changed=False)
    assert pace.due(4, changed=False)

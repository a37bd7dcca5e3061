"""The post-promotion watch resumes its window on a retry instead of starting a new one, and
goes on past it while a judgement is open (issue 34)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from activities.watch_promoted import watch_over, window_end
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

"""Change windows: the next opening, in the window's own zone (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime

from decisionmodel.api.pipeline import ChangeWindow
from decisionmodel.pipeline.windows import describe, next_opening


def window(days: list[str], start: str, end: str, zone: str = "UTC") -> ChangeWindow:
    return ChangeWindow.model_validate({"days": days, "start": start, "end": end, "timeZone": zone})


# 2026-12-03 is a Thursday.
THU_0800 = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def test_no_window_means_now() -> None:
    assert next_opening([], THU_0800) == THU_0800


def test_inside_a_window_means_now() -> None:
    assert next_opening([window(["Thu"], "07:00", "09:00")], THU_0800) == THU_0800


def test_before_todays_window_waits_for_it() -> None:
    opens = next_opening([window(["Thu"], "09:30", "11:00")], THU_0800)
    assert opens == datetime(2026, 12, 3, 9, 30, tzinfo=UTC)


def test_after_this_weeks_window_waits_for_next_week() -> None:
    opens = next_opening([window(["Thu"], "06:00", "07:00")], THU_0800)
    assert opens == datetime(2026, 12, 10, 6, 0, tzinfo=UTC)


def test_the_earliest_of_several_windows() -> None:
    windows = [window(["Mon"], "09:00", "10:00"), window(["Fri"], "09:00", "10:00")]
    assert next_opening(windows, THU_0800) == datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def test_an_overnight_window_belongs_to_the_day_it_opens() -> None:
    overnight = [window(["Wed"], "22:00", "09:00")]
    assert next_opening(overnight, THU_0800) == THU_0800  # Wednesday night, still open
    assert next_opening(overnight, datetime(2026, 12, 3, 9, 0, tzinfo=UTC)) == datetime(
        2026, 12, 9, 22, 0, tzinfo=UTC
    )


def test_a_window_keeps_its_local_hours_across_a_dst_change() -> None:
    berlin = [window(["Mon"], "09:00", "10:00", "Europe/Berlin")]
    # Winter: 09:00 in Berlin is 08:00 UTC; summer (after 2027-03-28): 07:00 UTC.
    assert next_opening(berlin, THU_0800) == datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    spring = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
    assert next_opening(berlin, spring) == datetime(2027, 3, 29, 7, 0, tzinfo=UTC)


def test_describe_reads_as_written() -> None:
    assert describe([window(["Mon", "Tue"], "09:00", "17:00", "Europe/Berlin")]) == (
        "Mon,Tue 09:00-17:00 Europe/Berlin"
    )

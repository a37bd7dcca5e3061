"""Go-style durations: parse_duration matches time.ParseDuration on what the API uses."""

from __future__ import annotations

from datetime import timedelta

import pytest

from decisionmodel.api import (
    DurationError,
    Timeouts,
    format_duration,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", timedelta(minutes=30)),
        ("1h", timedelta(hours=1)),
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2h45m30s", timedelta(hours=2, minutes=45, seconds=30)),
        ("1.5h", timedelta(minutes=90)),
        ("0.5m", timedelta(seconds=30)),
        (".5s", timedelta(milliseconds=500)),
        ("300ms", timedelta(milliseconds=300)),
        ("1500us", timedelta(microseconds=1500)),
        ("7µs", timedelta(microseconds=7)),
        ("7μs", timedelta(microseconds=7)),
        ("2000ns", timedelta(microseconds=2)),
        ("1m1m", timedelta(minutes=2)),  # Go sums repeated units
        ("0", timedelta(0)),
        ("-5m", timedelta(minutes=-5)),
        ("+24h", timedelta(hours=24)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("-", "empty"),
        ("30", "missing unit after '30'"),
        ("1h30", "missing unit after '30'"),
        ("1d", "expected <number><unit>"),
        ("5 m", "expected <number><unit>"),
        ("m", "expected <number><unit>"),
        ("1h-5m", "expected <number><unit>"),
    ],
)
def test_parse_duration_errors_name_the_input(text: str, fragment: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert repr(text) in str(info.value)
    assert fragment in str(info.value)


def test_parse_duration_refuses_non_strings() -> None:
    with pytest.raises(DurationError, match="must be a string"):
        parse_duration(30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=90), "1m30s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(hours=24), "24h0m0s"),
        (timedelta(seconds=-45), "-45s"),
    ],
)
def test_format_duration_round_trips(value: timedelta, text: str) -> None:
    assert format_duration(value) == text
    assert parse_duration(text) == value


@pytest.mark.parametrize("value", ["1m", "60s", "24h", "1440m", "0.5h", "23h59m59s"])
def test_timeouts_in_range(value: str) -> None:
    assert Timeouts(caching=value).caching == value


@pytest.mark.parametrize("value", ["59s", "30s", "24h1s", "25h", "0", "-5m"])
def test_timeouts_out_of_range(value: str) -> None:
    with pytest.raises(ValueError):
        Timeouts(starting=value)

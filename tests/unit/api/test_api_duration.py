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
from decisionmodel.api.spec import go_duration_nanoseconds


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


# Expected values printed by Go's time.ParseDuration (go1.2x): the fraction is computed in
# float64 and truncated, and int64 overflow is an error. The CRD's CEL duration() is that
# function, so the pydantic bounds check must be too (make fuzz found 24h1ns, 59.9999999s and
# 0.016666666666666666h accepted by pydantic and refused by the API server).
@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("0.016666666666666666h", 59_999_999_999),
        ("0.0166666666666666667h", 59_999_999_999),
        ("59.9999999999s", 59_999_999_999),
        ("24h1ns", 86_400_000_000_001),
        ("2562047h47m16.854775807s", 9_223_372_036_854_775_807),
        ("-2562047h47m16.854775808s", -9_223_372_036_854_775_808),
        ("1.h", 3_600_000_000_000),
        (".5h", 1_800_000_000_000),
    ],
)
def test_nanoseconds_as_go_computes_them(text: str, nanoseconds: int) -> None:
    assert go_duration_nanoseconds(text) == nanoseconds


@pytest.mark.parametrize(
    "text", ["2562047h47m16.854775808s", "9223372036854775808ns", "99999999999999999999h"]
)
def test_out_of_int64_range_is_a_duration_error_not_an_overflow(text: str) -> None:
    with pytest.raises(DurationError, match="out of range"):
        parse_duration(text)


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

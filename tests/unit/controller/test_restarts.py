"""Restart discipline: verdict-less runs are restarted with backoff, at most N times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.reconciler.restarts import (
    RestartPolicy,
    exhausted_message,
    plan_restart,
    verdictless_in_a_row,
)
from controller.temporal.rollouts import ClosedRun

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
POLICY = RestartPolicy(max_restarts=3, backoff=timedelta(seconds=30))


def run(status: str, minutes: float) -> ClosedRun:
    return ClosedRun(status=status, close_time=T0 + timedelta(minutes=minutes))


def test_no_closed_run_starts_at_once() -> None:
    assert plan_restart([], T0, POLICY).start is True


def test_a_completed_run_resets_the_count() -> None:
    runs = [run("TERMINATED", 0), run("TERMINATED", 1), run("COMPLETED", 2)]
    assert verdictless_in_a_row(runs) == []
    assert plan_restart(runs, T0 + timedelta(minutes=2), POLICY).start is True


@pytest.mark.parametrize(
    ("streak", "backoff"),
    [(1, timedelta(seconds=30)), (2, timedelta(seconds=60)), (3, timedelta(seconds=120))],
)
def test_backoff_doubles_with_each_verdictless_run(streak: int, backoff: timedelta) -> None:
    runs = [run("TERMINATED", -i) for i in range(streak)]  # the newest closed at T0
    early = plan_restart(runs, T0 + backoff - timedelta(seconds=1), POLICY)
    assert (early.start, early.restarts, early.wait) == (False, streak, timedelta(seconds=1))
    due = plan_restart(runs, T0 + backoff, POLICY)
    assert (due.start, due.restarts) == (True, streak)


def test_backoff_is_capped() -> None:
    policy = RestartPolicy(max_restarts=20, backoff=timedelta(seconds=30))
    runs = [run("TIMED_OUT", -i) for i in range(10)]
    assert plan_restart(runs, T0, policy).wait == policy.max_backoff


def test_past_the_limit_it_stops_and_names_the_fix() -> None:
    runs = [run(s, -i) for i, s in enumerate(["FAILED", "TERMINATED", "TIMED_OUT", "CANCELED"])]
    plan = plan_restart(runs, T0 + timedelta(hours=1), POLICY)
    assert (plan.start, plan.exhausted, plan.restarts, plan.last_status) == (
        False,
        True,
        4,
        "FAILED",
    )
    message = exhausted_message("rollout/ns/m/abc", plan, POLICY)
    assert "rollout/ns/m/abc" in message
    assert "decisionmodel.io/retry" in message
    assert "4 times in a row" in message

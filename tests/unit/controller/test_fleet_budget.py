"""--max-concurrent-rollouts: an in-memory count, O(1) per start (issue 14, point 5).

Queued DecisionModels start in arrival order as slots free up; a slot frees when a reconcile
sees the rollout promote or close; visibility is asked only on a slow period (and on first use)
to correct the count for other controllers' starts and for a restart.
"""

from __future__ import annotations

from typing import Any

from controller.reconciler.fleet_budget import RECHECKS_PER_SECOND, FleetBudget, key_of
from controller.reconciler.reconcile import Reconciler
from controller.reconciler.settings import ControllerSettings
from controller.temporal.rollouts import RunningRollout


class FakeRollouts:
    """Visibility lists `listed` as in flight; every call is counted."""

    def __init__(self) -> None:
        self.listed: set[str] = set()
        self.list_calls = 0
        self.describe_calls = 0

    async def in_flight(self, namespaces: list[str] | None = None) -> set[str]:
        self.list_calls += 1
        return set(self.listed)

    async def is_running(self, wid: str) -> bool:
        self.describe_calls += 1
        return wid in self.listed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reconciler(limit: int, rollouts: FakeRollouts, wake: Any = None) -> Reconciler:
    return Reconciler(
        kube=None,  # type: ignore[arg-type]
        rollouts=rollouts,  # type: ignore[arg-type]
        steady=None,  # type: ignore[arg-type]
        settings=ControllerSettings(max_concurrent_rollouts=limit, leader_election=False),
        dispatch=None,  # type: ignore[arg-type]
        metrics=None,
        wake=wake,
    )


def budget(limit: int, rollouts: FakeRollouts, clock: Clock, woken: list[str]) -> FleetBudget:
    return FleetBudget(limit, rollouts.in_flight, clock=clock, wake=woken.append)


def wid(name: str, revision: str = "r1") -> str:
    return f"rollout/ns/{name}/{revision}"


def running(name: str, revision: str = "r1") -> list[RunningRollout]:
    return [RunningRollout(wid(name, revision), "run", revision)]


async def test_unlimited_when_zero() -> None:
    rollouts = FakeRollouts()
    rollouts.listed = {f"x{i}" for i in range(100)}
    assert await reconciler(0, rollouts)._budget_allows("ns/a")
    assert rollouts.list_calls == 0


async def test_a_start_costs_no_visibility_call() -> None:
    """300 starts under a budget of 300: one visibility list (the first use), no describe.
    The re-query on every start did a list per start plus a describe per recent start."""
    rollouts = FakeRollouts()
    r = reconciler(300, rollouts)
    for i in range(300):
        key = f"ns/m{i}"
        assert await r._budget_allows(key)
        r.budget.started(key, wid(f"m{i}"))
    assert not await r._budget_allows("ns/one-too-many")
    assert (rollouts.list_calls, rollouts.describe_calls) == (1, 0)
    assert r.budget.in_flight == 300


async def test_fifo_order_when_full() -> None:
    rollouts, clock, woken = FakeRollouts(), Clock(), []
    b = budget(2, rollouts, clock, woken)
    b.resync_seconds = 3600  # no re-count in this test: the slots follow what reconciles see
    for name in ("a", "b"):
        assert await b.allows(f"ns/{name}")
        b.started(f"ns/{name}", wid(name))
    assert not await b.allows("ns/first")
    assert not await b.allows("ns/second")
    assert not await b.allows("ns/third")
    clock.now += 60  # "a" promoted: its revision is the stable now (waiting out its grace)
    b.observe("ns/a", running("a"), stable="r1")
    assert woken == ["ns/first"]  # only the first in line is woken for the one slot
    assert not await b.allows("ns/third")
    assert not await b.allows("ns/second")
    assert await b.allows("ns/first")
    b.started("ns/first", wid("first"))
    assert not await b.allows("ns/second")
    clock.now += 60
    b.observe("ns/b", [], stable=None)  # "b" closed (visibility no longer lists it)
    b.observe("ns/first", [], stable=None)
    assert await b.allows("ns/third")  # two slots: second and third both may go
    assert await b.allows("ns/second")


async def test_a_running_rollout_of_another_revision_keeps_its_slot() -> None:
    rollouts, clock, woken = FakeRollouts(), Clock(), []
    b = budget(1, rollouts, clock, woken)
    assert await b.allows("ns/a")
    b.started("ns/a", wid("a", "r2"))
    rollouts.listed = {wid("a", "r2")}
    clock.now += 60
    b.observe("ns/a", running("a", "r2"), stable="r1")  # the old stable: r2 still rolls out
    assert not await b.allows("ns/b")
    assert woken == []


async def test_a_start_visibility_does_not_list_yet_holds_its_slot() -> None:
    rollouts, clock, woken = FakeRollouts(), Clock(), []
    b = budget(1, rollouts, clock, woken)
    b.resync_seconds = b.lag_seconds / 3
    assert await b.allows("ns/a")
    b.started("ns/a", wid("a"))
    b.observe("ns/a", [], stable=None)  # visibility lags the start
    clock.now += b.resync_seconds  # a re-count from visibility that does not list it yet
    assert not await b.allows("ns/b")
    assert rollouts.list_calls == 2
    clock.now += b.lag_seconds  # past any lag: not listed means closed
    b.observe("ns/a", [], stable=None)
    assert await b.allows("ns/b")


async def test_the_recount_corrects_for_other_controllers_and_a_restart() -> None:
    rollouts, clock, woken = FakeRollouts(), Clock(), []
    rollouts.listed = {wid("old"), "rollout/other/x/r9"}  # started before this process led
    b = budget(3, rollouts, clock, woken)
    assert await b.allows("ns/a")  # first use: counted from visibility
    b.started("ns/a", wid("a"))
    assert not await b.allows("ns/b")
    assert not await b.allows("ns/c")
    rollouts.listed = {wid("a")}  # both others ended; this controller saw neither
    clock.now += 5
    assert not await b.allows("ns/b")  # between re-counts the count stands
    clock.now += b.resync_seconds
    assert await b.allows("ns/b")
    assert b.in_flight == 1
    assert rollouts.list_calls == 2
    assert woken == ["ns/c"]  # two slots freed: the next in line is woken too


async def test_a_dequeued_head_wakes_the_next_in_line() -> None:
    rollouts, clock, woken = FakeRollouts(), Clock(), []
    b = budget(1, rollouts, clock, woken)
    assert await b.allows("ns/head")
    assert not await b.allows("ns/next")
    b.dequeue("ns/head")  # deleted, or its spec went back to the stable
    assert woken == ["ns/next"]
    assert await b.allows("ns/next")


def test_key_of_a_workflow_id() -> None:
    assert key_of("rollout/ns/name/abc/retry") == "ns/name"
    assert key_of("store/ns/name/abc") is None
    assert key_of("rollout/ns") is None


async def test_a_long_queue_spreads_its_re_checks() -> None:
    """The next in line starts on a wake; re-checks are a safety net that must not flood the
    work queue (1,000 queued re-checking every 30 s kept wakes waiting behind them)."""
    rollouts = FakeRollouts()
    r = reconciler(1, rollouts)
    assert await r._budget_allows("ns/running")
    r.budget.started("ns/running", wid("running"))
    for i in range(10):
        assert not await r._budget_allows(f"ns/q{i}")
    assert r.budget.recheck_seconds(30) == 30
    for i in range(10, 1000):
        assert not await r._budget_allows(f"ns/q{i}")
    assert r.budget.recheck_seconds(30) == 1000 / RECHECKS_PER_SECOND


async def test_a_queued_decision_model_is_told_its_place_in_line() -> None:
    rollouts, clock, woken = FakeRollouts(), Clock(), []
    b = budget(1, rollouts, clock, woken)
    assert await b.allows("ns/a")
    b.started("ns/a", wid("a"))
    for name in ("first", "second"):
        assert not await b.allows(f"ns/{name}")
    assert b.position("ns/second") == 2 and b.position("ns/a") is None
    message = b.queued_message("ns/second")
    assert "2 of 2 in line, 1/1 rollouts in flight" in message
    assert "--max-concurrent-rollouts 1" in message


def test_the_default_budget_is_the_derived_one() -> None:
    assert ControllerSettings(leader_election=False).max_concurrent_rollouts == 50

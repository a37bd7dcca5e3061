"""--max-concurrent-rollouts: queued DecisionModels start in arrival order as slots free up."""

from __future__ import annotations

import time
from typing import Any

from controller.reconcile import Reconciler
from controller.settings import ControllerSettings


class FakeRollouts:
    """Visibility lists `total` rollouts in flight; `direct` answers describe-by-ID."""

    def __init__(self) -> None:
        self.total = 0
        self.direct: dict[str, bool] = {}

    async def in_flight(self, namespaces: list[str] | None = None) -> set[str]:
        return {f"listed-{i}" for i in range(self.total)}

    async def is_in_flight(self, wid: str) -> bool:
        return self.direct.get(wid, False)


def reconciler(limit: int, rollouts: FakeRollouts) -> Reconciler:
    r: Any = Reconciler.__new__(Reconciler)
    Reconciler.__init__(
        r,
        kube=None,  # type: ignore[arg-type]
        rollouts=rollouts,  # type: ignore[arg-type]
        steady=None,  # type: ignore[arg-type]
        settings=ControllerSettings(max_concurrent_rollouts=limit, leader_election=False),
        dispatch=None,  # type: ignore[arg-type]
        metrics=None,
    )
    return r  # type: ignore[no-any-return]


async def test_unlimited_when_zero() -> None:
    rollouts = FakeRollouts()
    rollouts.total = 100
    assert await reconciler(0, rollouts)._budget_allows("ns/a")


async def test_fifo_order_when_full() -> None:
    rollouts = FakeRollouts()
    r = reconciler(2, rollouts)
    rollouts.total = 2
    assert not await r._budget_allows("ns/first")
    assert not await r._budget_allows("ns/second")
    assert not await r._budget_allows("ns/third")
    rollouts.total = 1  # one slot frees up: only the first in line may start
    assert not await r._budget_allows("ns/third")
    assert not await r._budget_allows("ns/second")
    assert await r._budget_allows("ns/first")
    r.queue_order.pop("ns/first")  # started
    rollouts.total = 2
    assert not await r._budget_allows("ns/second")
    rollouts.total = 0  # two slots: second and third both may go
    assert await r._budget_allows("ns/third")
    assert await r._budget_allows("ns/second")


async def test_a_start_visibility_does_not_list_yet_holds_its_slot() -> None:
    rollouts = FakeRollouts()
    r = reconciler(1, rollouts)
    r.started_at["rollout/ns/a/r1"] = time.monotonic()
    rollouts.direct["rollout/ns/a/r1"] = True  # running, per describe; visibility lags
    assert not await r._budget_allows("ns/b")
    rollouts.direct["rollout/ns/a/r1"] = False  # promoted (waiting out its grace) or ended
    assert await r._budget_allows("ns/b")


async def test_old_local_starts_are_left_to_visibility() -> None:
    rollouts = FakeRollouts()
    r = reconciler(1, rollouts)
    r.started_at["rollout/ns/a/r1"] = time.monotonic() - 3600
    rollouts.direct["rollout/ns/a/r1"] = True
    assert await r._budget_allows("ns/b")  # visibility lists nothing: the slot is free
    assert r.started_at == {}

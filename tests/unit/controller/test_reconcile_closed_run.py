"""A run this controller started closes while the cached DecisionModel does not show its
outcome yet (the promote's status write is still on its way through the watch): the reconcile
must not start the same revision again from that stale snapshot (seen once in a 300-wave)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from controller.reconciler.reconcile import JUST_CLOSED_RECHECK_SECONDS, Reconciler
from controller.reconciler.settings import ControllerSettings
from controller.temporal.rollouts import RunningRollout
from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.dispatch import DispatchSettings

DIGEST = "a" * 64
FIRST_RUN = "rollout/ns/m/u123"


class ClosedRollouts:
    """The run this controller started has completed (its describe says it is closed)."""

    def __init__(self) -> None:
        self.starts: list[Any] = []
        self.described: list[str] = []

    @contextlib.asynccontextmanager
    async def reachable(self) -> AsyncIterator[None]:
        yield

    async def describe_running(self, wid: str) -> RunningRollout | None:
        self.described.append(wid)
        return None

    async def start(self, *args: Any, **kwargs: Any) -> bool:
        self.starts.append(args)
        return True


def stale_snapshot() -> dict[str, Any]:
    """As the cache holds it just before the promote's write arrives: the resolved candidate,
    no stable yet."""
    return {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {"model": "laya:en"},
        "status": {
            "phase": "Promoting",
            "candidateRevision": {"hash": "x", "model": "laya:en", "digest": DIGEST},
        },
    }


async def test_a_run_that_just_closed_is_looked_at_again_not_started_again() -> None:
    rollouts = ClosedRollouts()
    reconciler = Reconciler(
        kube=None,  # type: ignore[arg-type]
        rollouts=rollouts,  # type: ignore[arg-type]
        steady=None,  # type: ignore[arg-type]
        settings=ControllerSettings(leader_election=False),
        dispatch=DispatchSettings(),
        metrics=None,
    )
    reconciler.started["ns/m"] = FIRST_RUN
    obj = stale_snapshot()
    ref = DMRef(namespace="ns", name="m", uid="u1", generation=1)
    again = await reconciler._reconcile(ref, DecisionModel.from_k8s(obj), obj)
    assert again == JUST_CLOSED_RECHECK_SECONDS
    assert rollouts.starts == []
    assert rollouts.described == [FIRST_RUN]  # one describe, no visibility list
    assert "ns/m" not in reconciler.started  # the next reconcile decides on fresh status

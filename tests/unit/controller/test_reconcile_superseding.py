"""The reconcile starts a new revision only once the run named in status has closed, even when
that run already recorded its end (an abort: phase RolledBack, its candidate still being
removed), and without cancelling it (controller.reconciler.superseding; explorer seed 3458)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from controller.reconciler.reconcile import Reconciler
from controller.reconciler.settings import ControllerSettings
from controller.reconciler.superseding import RECHECK_SECONDS, STOP_WAIT_SECONDS, Superseding
from controller.temporal.rollouts import RunningRollout
from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.dispatch import DispatchSettings
from decisionmodel.rollout.settings import RolloutSettings

ABORTED = "rollout/ns/m/" + "a" * 16


class Rollouts:
    def __init__(self, still_running: bool) -> None:
        self.still_running = still_running
        self.starts: list[Any] = []
        self.cancels: list[str] = []

    @contextlib.asynccontextmanager
    async def reachable(self) -> AsyncIterator[None]:
        yield

    async def describe_running(self, wid: str) -> RunningRollout | None:
        return RunningRollout(wid, None, "a" * 16) if self.still_running else None

    async def cancel(self, wid: str) -> None:
        self.cancels.append(wid)

    async def closed_runs(self, wid: str) -> list[Any]:
        return []

    async def in_flight(self, namespaces: Any) -> set[str]:
        return set()

    async def start(self, *args: Any, **kwargs: Any) -> bool:
        self.starts.append(args)
        return True


def aborted_then_changed() -> DecisionModel:
    """The pinned run was aborted (RolledBack, failedRevision) and the spec went on to a tag."""
    return DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 3},
            "spec": {"model": "laya:en"},
            "status": {
                "phase": "RolledBack",
                "rollout": {"workflowId": ABORTED},
                "stableRevision": {"hash": "s" * 16, "model": "laya:de", "digest": "b" * 64},
                "failedRevision": {"hash": "a" * 16, "model": "laya:en", "reason": "Aborted"},
            },
        }
    )


def reconciler(rollouts: Rollouts, now: list[float]) -> Reconciler:
    r = Reconciler(
        kube=None,  # type: ignore[arg-type]
        rollouts=rollouts,  # type: ignore[arg-type]
        steady=SimpleNamespace(rollout=RolloutSettings()),  # type: ignore[arg-type]
        settings=ControllerSettings(leader_election=False),
        dispatch=DispatchSettings(),
        metrics=None,
    )
    r.superseding = Superseding(monotonic=lambda: now[0])
    return r


async def emitted(*args: Any, **kwargs: Any) -> None:
    return None


async def test_a_run_that_recorded_its_end_is_waited_for_not_cancelled(monkeypatch: Any) -> None:
    monkeypatch.setattr("controller.reconciler.reconcile.emit_event", emitted)
    now = [0.0]
    rollouts = Rollouts(still_running=True)
    r = reconciler(rollouts, now)
    ref = DMRef(namespace="ns", name="m", uid="u1", generation=3)
    step = await r._rollouts(ref, aborted_then_changed())
    assert rollouts.starts == [] and rollouts.cancels == []
    assert step.superseding is not None and ABORTED in step.superseding
    assert step.requeue == RECHECK_SECONDS and step.in_flight
    # Closed: the new revision starts.
    rollouts.still_running = False
    await r._rollouts(ref, aborted_then_changed())
    assert len(rollouts.starts) == 1


async def test_past_the_bound_the_new_revision_starts_beside_it(monkeypatch: Any) -> None:
    monkeypatch.setattr("controller.reconciler.reconcile.emit_event", emitted)
    now = [0.0]
    rollouts = Rollouts(still_running=True)
    r = reconciler(rollouts, now)
    ref = DMRef(namespace="ns", name="m", uid="u1", generation=3)
    await r._rollouts(ref, aborted_then_changed())
    now[0] += STOP_WAIT_SECONDS + 1
    step = await r._rollouts(ref, aborted_then_changed())
    assert len(rollouts.starts) == 1 and rollouts.cancels == []
    assert step.superseding is None

"""A delete the API server refuses (RBAC, the DELETE admission policy) does not fail the
reconcile: the reaper is housekeeping, and the steady state after it must still run."""

from __future__ import annotations

from typing import Any

from test_fleet_budget import FakeRollouts, reconciler

from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import DMRef
from kube.errors import Forbidden


class RefusingReaper:
    def __init__(self) -> None:
        self.calls = 0

    async def reap(self, dm: DMRef, keep: set[str]) -> list[Any]:
        self.calls += 1
        raise Forbidden("deployments.apps is forbidden: dmrollout-deletes denied request")


async def test_a_refused_reap_is_logged_and_the_reconcile_goes_on() -> None:
    r = reconciler(0, FakeRollouts())
    reaper = RefusingReaper()
    r.reaper = reaper  # type: ignore[assignment]
    obj = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {"model": "laya:en"},
    }
    dm = DecisionModel.from_k8s(obj)
    ref = DMRef(namespace="ns", name="m", uid="u1", generation=1)
    await r._reap(ref, dm, obj, [])
    assert reaper.calls == 1

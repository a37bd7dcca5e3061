"""The steady state completes a promotion cut between its status write and its Service switch,
from the stable as recorded now, not as the cache last showed it (explorer seed 4451: a
reconcile reading the stable from before a promotion switched the Service back for 60 ms)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from controller.reconciler.settings import ControllerSettings
from controller.reconciler.steady import SteadyState
from decisionmodel.engine.render.labels import LABEL_MANAGED_BY, MANAGED_BY
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.settings import RolloutSettings
from kube.errors import Conflict

DM = DMRef(namespace="ns", name="m", uid="u1", generation=2)


class FakeKube:
    def __init__(self, recorded: str, conflict: bool = False) -> None:
        self.recorded, self.conflict = recorded, conflict
        self.patches: list[dict[str, Any]] = []
        self.kinds = {"Service": SimpleNamespace(patch=self.patch)}

    def get_dm(self, dm: DMRef) -> dict[str, Any]:
        return {"metadata": {"uid": dm.uid}, "status": {"stableRevision": {"hash": self.recorded}}}

    def patch(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        if self.conflict:
            raise Conflict("the object has been modified")
        self.patches.append(body)


class Reader:
    def __init__(self, selects: str) -> None:
        self.service = {
            "metadata": {
                "name": "m",
                "namespace": "ns",
                "resourceVersion": "41",
                "labels": {LABEL_MANAGED_BY: MANAGED_BY},
                "ownerReferences": [{"controller": True, "uid": "u1"}],
            },
            "spec": {
                "selector": {"decisionmodel.io/name": "m", "decisionmodel.io/revision": selects}
            },
        }

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        assert kind == "Service"
        return self.service


def steady(kube: FakeKube, selects: str) -> SteadyState:
    return SteadyState(kube, RolloutSettings(), ControllerSettings(), reader=Reader(selects))  # type: ignore[arg-type]


async def test_a_cut_promotion_is_completed_with_the_read_services_version() -> None:
    kube = FakeKube(recorded="new")
    await steady(kube, selects="old")._ensure_service(DM, "new", [])
    [patch] = kube.patches
    assert patch["metadata"] == {"resourceVersion": "41"}
    assert patch["spec"]["selector"]["decisionmodel.io/revision"] == "new"


async def test_a_stale_cached_stable_does_not_switch_a_promoted_service_back() -> None:
    kube = FakeKube(recorded="new")
    await steady(kube, selects="new")._ensure_service(DM, "old", [])
    assert kube.patches == []


async def test_a_switch_since_the_read_wins_over_the_repair() -> None:
    kube = FakeKube(recorded="new", conflict=True)
    await steady(kube, selects="old")._ensure_service(DM, "new", [])  # no error: next reconcile
    assert kube.patches == []

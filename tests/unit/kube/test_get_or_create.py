"""The steady state's PDB check reads an object that exists instead of creating it again
(a create answered 409 and a read, every reconcile: issue 14)."""

from __future__ import annotations

from typing import Any

import pytest

from decisionmodel.errors import ResourceConflict
from kube.client import Kube

PDB = {"kind": "PodDisruptionBudget", "metadata": {"namespace": "ns", "name": "dm-r1"}}


def owned(uid: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": "ns",
        "name": "dm-r1",
        "ownerReferences": [{"controller": True, "uid": uid}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    return {"kind": "PodDisruptionBudget", "metadata": meta}


class Recorder(Kube):
    def __init__(self, existing: dict[str, Any] | None) -> None:  # no API client: calls recorded
        self.existing = existing
        self.calls: list[str] = []

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append("get")
        return self.existing

    def create_or_adopt(self, obj: dict[str, Any], owner_uid: str) -> dict[str, Any]:
        self.calls.append("create")
        return obj


def test_an_existing_owned_object_costs_one_read() -> None:
    kube = Recorder(owned("u1"))
    assert kube.get_or_create(PDB, "u1") is kube.existing
    assert kube.calls == ["get"]


@pytest.mark.parametrize("existing", [None, owned("u1", deleting=True)])
def test_a_missing_or_going_object_is_created(existing: dict[str, Any] | None) -> None:
    kube = Recorder(existing)
    kube.get_or_create(PDB, "u1")
    assert kube.calls == ["get", "create"]


def test_a_foreign_object_is_refused() -> None:
    with pytest.raises(ResourceConflict):
        Recorder(owned("someone-else")).get_or_create(PDB, "u1")

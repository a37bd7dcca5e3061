"""The reaper's choice: only this DecisionModel's objects of revisions nobody owns, past a grace;
never the stable, the candidate, a running rollout's revision, nor another owner's object, nor
one dmrollout did not make (the admission policy would refuse its delete anyway)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controller.reconciler.reaper import Orphan, orphans
from decisionmodel.engine.render.labels import (
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_REVISION,
    MANAGED_BY,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=5)
UID = "dm-uid"


def obj(
    kind: str,
    name: str,
    revision: str | None,
    age: timedelta = timedelta(hours=1),
    owner: str = UID,
    deleting: bool = False,
    ours: bool = True,
) -> dict[str, Any]:
    labels = {LABEL_NAME: "m"}
    if ours:
        labels[LABEL_MANAGED_BY] = MANAGED_BY
    if revision is not None:
        labels[LABEL_REVISION] = revision
    meta: dict[str, Any] = {
        "name": name,
        "labels": labels,
        "creationTimestamp": (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ownerReferences": [{"uid": owner, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": kind, "metadata": meta}


def test_only_unowned_revisions_past_the_grace_are_reaped() -> None:
    objects = [
        obj("Deployment", "m-stable", "stable"),
        obj("PersistentVolumeClaim", "m-store-stable", "stable"),
        obj("Deployment", "m-cand", "cand"),
        obj("Deployment", "m-running", "running"),
        obj("Deployment", "m-leak", "leak"),
        obj("Job", "m-prefetch-leak", "leak"),
        obj("PersistentVolumeClaim", "m-store-leak", "leak"),
        obj("Deployment", "m-young", "young", age=timedelta(minutes=1)),
        obj("Deployment", "m-foreign", "leak2", owner="someone-else"),
        obj("Deployment", "m-going", "leak3", deleting=True),
        # Labelled by hand, owned by the DecisionModel, but not made by dmrollout: not ours.
        obj("Deployment", "m-handmade", "leak4", ours=False),
        obj("Service", "m", None),
    ]
    found = orphans(objects, UID, {"stable", "cand", "running"}, NOW, GRACE)
    assert found == [
        Orphan("Deployment", "m-leak", "leak"),
        Orphan("Job", "m-prefetch-leak", "leak"),
        Orphan("PersistentVolumeClaim", "m-store-leak", "leak"),
    ]


def test_nothing_is_reaped_when_every_revision_is_kept() -> None:
    objects = [obj("Deployment", "m-a", "a"), obj("Deployment", "m-b", "b")]
    assert orphans(objects, UID, {"a", "b"}, NOW, GRACE) == []

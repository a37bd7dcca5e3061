"""The reaper: objects of a revision nobody owns any more are deleted, after a grace.

A rollout deletes its candidate on failure and the previous revision after promotion, and it
retries those deletes until they are done. What can still be left behind: a workflow that was
terminated by hand, timed out, or whose history was lost; an object created by an activity
attempt that raced its own cancellation. Those revisions belong to no rollout, and their
Deployments, Jobs and store PVCs may hold GPUs and disk for ever.

So on each reconcile the controller lists the objects it manages for the DecisionModel
(label ``decisionmodel.io/name``, controller owner reference to this DecisionModel's UID) and
deletes those whose ``decisionmodel.io/revision`` is none of:

- the stable revision, the candidate revision (status);
- a revision a running rollout of this DecisionModel works on (visibility, and the rollouts
  this controller started a moment ago);

and that are older than the grace (so an object a starting rollout creates before visibility
shows the rollout is never touched). The stable and the candidate are never reaped, nor an
object of another owner. Each delete is an Event (``Reaped``) and a metric.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from controller.machinery.cache import DirectReader, ObjectReader
from decisionmodel.engine.render.labels import (
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_REVISION,
    MANAGED_BY,
)
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.vocabulary import EventReason
from kube.client import Kube
from kube.status import emit_event

log = logging.getLogger("dmrollout.controller.reaper")

# The kinds that are per revision (the Service is per DecisionModel and always kept).
REVISION_KINDS: Final = ("Deployment", "Job", "PersistentVolumeClaim", "PodDisruptionBudget")


@dataclass(frozen=True)
class Orphan:
    kind: str
    name: str
    revision: str


def _created(obj: dict[str, Any]) -> datetime | None:
    stamp = obj["metadata"].get("creationTimestamp")
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


def orphans(
    objects: Iterable[dict[str, Any]],
    owner_uid: str,
    keep: set[str],
    now: datetime,
    grace: timedelta,
) -> list[Orphan]:
    """The objects to reap. Pure: ``objects`` are one DecisionModel's labelled objects. Only
    what dmrollout made (labelled managed-by=dmrollout, as the admission policy requires of a
    delete) is ever reaped: an object someone labelled by hand is not ours to remove."""
    found: list[Orphan] = []
    for obj in objects:
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        revision = labels.get(LABEL_REVISION)
        created = _created(obj)
        if (
            not revision
            or labels.get(LABEL_MANAGED_BY) != MANAGED_BY
            or revision in keep
            or Kube.controller_uid(obj) != owner_uid
            or meta.get("deletionTimestamp")
            or created is None
            or now - created < grace
        ):
            continue
        found.append(Orphan(str(obj.get("kind")), meta["name"], revision))
    return found


class Reaper:
    def __init__(
        self,
        kube: Kube,
        grace: timedelta,
        on_reaped: Callable[[str, str, str], None] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        reader: ObjectReader | None = None,
    ) -> None:
        self.kube = kube
        # The controller's cache: a reap lists four kinds per DecisionModel, from memory.
        self.reader: ObjectReader = reader or DirectReader(kube)
        self.grace = grace
        self.on_reaped = on_reaped
        self.clock = clock

    async def reap(self, dm: DMRef, keep: set[str]) -> list[Orphan]:
        """Delete this DecisionModel's objects of revisions outside ``keep``; what was reaped."""
        objects: list[dict[str, Any]] = []
        for kind in REVISION_KINDS:
            listed = await Kube.run(
                self.reader.list_labelled, kind, dm.namespace, {LABEL_NAME: dm.name}
            )
            objects += [{**o, "kind": kind} for o in listed]
        reaped = orphans(objects, dm.uid, keep, self.clock(), self.grace)
        for orphan in reaped:
            deleted = await Kube.run(
                self.kube.delete_owned, orphan.kind, dm.namespace, orphan.name, dm.uid
            )
            if not deleted:
                continue
            log.info(
                "reaped %s %s/%s of revision %s",
                orphan.kind,
                dm.namespace,
                orphan.name,
                orphan.revision,
            )
            if self.on_reaped is not None:
                self.on_reaped(dm.namespace, dm.name, orphan.kind)
            await emit_event(
                self.kube,
                dm,
                EventReason.REAPED,
                f"{orphan.kind} {orphan.name} of revision {orphan.revision} deleted: no rollout "
                "owns it and it is neither the stable nor the candidate revision",
            )
        return reaped

"""recover_store_begin / recover_store_end: the two ends of a stable store's recovery.

Seed 001 (StoreLost): the stable revision's store PVC went missing. The recovery workflow
(``workflows/store_recovery.py``) recreates it annotated ``decisionmodel.io/store-recovering``
(begin), runs the ordinary prefetch into it, which pulls and verifies the recorded digest, and
only then removes the annotation (end). While the annotation is on, the controller never probes
the stable's Pods on that store, so an empty store is never served.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.typed_errors import show_guards, typed_errors
from decisionmodel.engine.render import render_store_pvc
from decisionmodel.engine.render.labels import (
    ANNOTATION_STORE_RECOVERING,
    prefetch_job_name,
    store_pvc_name,
)
from decisionmodel.rollout import render_params
from decisionmodel.rollout.contracts import (
    RECOVER_STORE_BEGIN,
    RECOVER_STORE_END,
    RevisionObjectsInput,
)
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import ConditionType
from kube.client import Kube


class StoreRecoveryActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings

    @activity.defn(name=RECOVER_STORE_BEGIN)
    async def begin(self, inp: RevisionObjectsInput) -> None:
        """Remove the finished prefetch Job of the lost store (it would be adopted as done),
        then recreate the store PVC marked as recovering."""
        async with typed_errors(show_guards(self.kube, inp.dm, ConditionType.CACHED)):
            dm, revision = inp.dm, inp.record.hash
            job = prefetch_job_name(dm.name, revision)
            await Kube.run(self.kube.delete_owned, "Job", dm.namespace, job, dm.uid)
            pvc = render_store_pvc(render_params.store_params(inp))
            annotations: dict[str, Any] = pvc["metadata"].setdefault("annotations", {})
            annotations[ANNOTATION_STORE_RECOVERING] = "true"
            poll = self.settings.poll_interval_seconds
            found = await self.kube.ensure_owned(pvc, dm.uid, poll, activity.heartbeat)
            if not _recovering(found):
                await self._mark(inp, "true")

    @activity.defn(name=RECOVER_STORE_END)
    async def end(self, inp: RevisionObjectsInput) -> None:
        """The prefetch verified the digest: the store may serve."""
        async with typed_errors():
            await self._mark(inp, None)

    async def _mark(self, inp: RevisionObjectsInput, value: str | None) -> None:
        name = store_pvc_name(inp.dm.name, inp.record.hash)
        patch = {"metadata": {"annotations": {ANNOTATION_STORE_RECOVERING: value}}}
        ops = self.kube.kinds["PersistentVolumeClaim"]
        await Kube.run(ops.patch, name, inp.dm.namespace, patch)


def _recovering(pvc: dict[str, Any]) -> bool:
    annotations = pvc["metadata"].get("annotations") or {}
    return annotations.get(ANNOTATION_STORE_RECOVERING) == "true"

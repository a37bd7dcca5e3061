"""delete_revision: remove one revision's objects — rollback, superseded cleanup, and the
previous revision after a promotion's grace.

Deletes the Deployment and PDB ``<dm>-<rev>``, the prefetch Job ``<dm>-pf-<rev>`` (Background
propagation, so its Pods go too) and the store PVC ``<dm>-store-<rev>``, each only when its
controller owner is this DecisionModel's UID. Nothing is deleted when the live Service ``<dm>``
selects the revision, or when status records it as the stable revision (promote persists the
stable before it switches the Service, so between the two the stable is known from status
only): "never delete what the live Service selects" (REFERENCE), whatever the caller asked.
Deleting what is already gone is success, so a retry is harmless.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio import activity

from activities.promote import selected_revision
from activities.typed_errors import typed_errors
from decisionmodel.engine.render.labels import (
    deployment_name,
    legacy_store_pvc_name,
    mounts_claim,
    revision_objects,
    service_name,
)
from decisionmodel.rollout.contracts import (
    DELETE_REVISION,
    DeleteRevisionInput,
    DeleteRevisionResult,
)
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import StatusKey
from kube.client import DecisionModelGone, Kube
from kube.errors import Conflict, NotFound

log = logging.getLogger(__name__)


class DeleteRevisionActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings

    def _delete(self, kind: str, namespace: str, name: str, uid: str) -> bool:
        """True when a delete was issued now; False when absent or not ours."""
        existing = self.kube.get(kind, namespace, name)
        if existing is None:
            return False
        if Kube.controller_uid(existing) != uid:
            log.warning(
                "not deleting %s %s/%s: not owned by this DecisionModel", kind, namespace, name
            )
            return False
        if existing["metadata"].get("deletionTimestamp"):
            return False
        try:
            self.kube.kinds[kind].delete(
                name,
                namespace,
                # With a body the API server ignores the query parameters, so the policy goes
                # in the body: Background, as a Job's default (orphan) would leave its Pods.
                body={
                    "propagationPolicy": "Background",
                    # Only the object that was checked: a namesake created since stays.
                    "preconditions": {"uid": existing["metadata"]["uid"]},
                },
            )
        except (NotFound, Conflict):  # gone already, or a namesake (another uid) since
            return False
        return True

    @activity.defn(name=DELETE_REVISION)
    async def delete_revision(self, inp: DeleteRevisionInput) -> DeleteRevisionResult:
        async with typed_errors():
            dm = inp.dm
            service = await Kube.run(self.kube.get, "Service", dm.namespace, service_name(dm.name))
            try:
                status = (await Kube.run(self.kube.get_dm, dm)).get("status") or {}
            except DecisionModelGone:
                # Its objects go with it (owner references); the UID check below still keeps a
                # re-created namesake's objects safe.
                status = {}
            stable = (status.get(StatusKey.STABLE_REVISION) or {}).get("hash")
            if inp.revision in (selected_revision(service), stable):
                log.info("revision %s of %s is live; kept (%s)", inp.revision, dm.name, inp.reason)
                return DeleteRevisionResult(deleted=[], kept_selected=True)
            if inp.keep_if_rolling_out and inp.revision in _rolling_out(status):
                # An undo right after a promotion: the rollback's run adopts these objects (its
                # warmup saw the Pods, then this delete took them: CI, the undo e2e test).
                log.info("revision %s of %s is rolled out again; kept", inp.revision, dm.name)
                return DeleteRevisionResult(deleted=[], kept_selected=True)
            deployment = await Kube.run(
                self.kube.get, "Deployment", dm.namespace, deployment_name(dm.name, inp.revision)
            )
            legacy = legacy_store_pvc_name(dm.name)
            objects = revision_objects(dm.name, inp.revision)
            if deployment is not None and mounts_claim(deployment, legacy):
                # Seed 000 "Migration": the shared store of a revision promoted before stores
                # were per revision goes with the last workload mounting it, which is this one
                # (every revision since has its own).
                objects.append(("PersistentVolumeClaim", legacy))
            deleted: list[str] = []
            for kind, name in objects:
                if await Kube.run(self._delete, kind, dm.namespace, name, dm.uid):
                    deleted.append(f"{kind}/{name}")
            return DeleteRevisionResult(deleted=deleted)


def _rolling_out(status: dict[str, Any]) -> set[str]:
    """The revision a rollout in flight is bringing (back): its candidate. (Not the rollbackTo
    record: it outlives its rollout, and would keep a later previous revision for ever.)"""
    candidate = (status.get(StatusKey.CANDIDATE_REVISION) or {}).get("hash")
    return {str(candidate)} if candidate else set()

"""Showing, while the prefetch waits for a namesake store PVC to finish deleting, why it waits
(decisionmodel.rollout.store_wait): on Cached at the first round, again when the Pods that hold
the claim change, and back to the prefetch's own reason once the PVC is created
(activities.held_pods.WaitShown)."""

from __future__ import annotations

import time
from typing import Any, Final

from activities.held_pods import WaitShown
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.store_wait import pods_mounting, store_wait_message
from decisionmodel.vocabulary import ConditionType, Phase, Reason
from kube.client import Kube

# A look lists the namespace's Pods: at most this often while the wait lasts (a poll round is
# about a second; the Pods that hold a claim change on a person's time scale).
LOOK_EVERY_SECONDS: Final = 10.0


class StoreSettling:
    """One per prefetch attempt: ``look`` is the ``settling`` of Kube.ensure_owned."""

    def __init__(self, kube: Kube, dm: DMRef, pvc: dict[str, Any], job: str) -> None:
        self.kube, self.dm = kube, dm
        self.claim = str(pvc["metadata"]["name"])
        going_on = (
            Reason.PREFETCHING,
            f"prefetch Job {job}: the store PVC {self.claim} is created; the Job's Pod is starting",
        )
        self.shown = WaitShown(kube, dm, ConditionType.CACHED, Phase.CACHING, going_on)
        self._looked: float | None = None

    async def look(self) -> None:
        now = time.monotonic()
        if self._looked is not None and now - self._looked < LOOK_EVERY_SECONDS:
            return
        self._looked = now
        ns = self.dm.namespace
        pvc = await Kube.run(self.kube.get, "PersistentVolumeClaim", ns, self.claim)
        holders = pods_mounting(await Kube.run(self.kube.list_pods, ns, {}), self.claim)
        message = store_wait_message(ns, self.claim, holders, pvc)
        await self.shown.show(Reason.STORE_TERMINATING, message, message)

    async def settled(self) -> None:
        """The PVC is created: what was shown gives way to the prefetch's own reason."""
        await self.shown.clear()

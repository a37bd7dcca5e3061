"""record_status: a rollout step's share of DecisionModel status, and its Event.

The builder and the writer are in ``kube.rollout_status`` (shared with promote and the
controller); this activity is what the workflow schedules at each phase change.
"""

from __future__ import annotations

from temporalio import activity

from activities.typed_errors import typed_errors
from decisionmodel.rollout.contracts import RECORD_STATUS, StatusUpdate
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.rollout_status import emit_update_event, write_status


class StatusActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings | None = None) -> None:
        self.kube = kube
        self.settings = settings or RolloutSettings()

    @activity.defn(name=RECORD_STATUS)
    async def record_status(self, update: StatusUpdate) -> None:
        async with typed_errors():
            await write_status(self.kube, update)
            await emit_update_event(self.kube, update)

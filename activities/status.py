"""record_status: a rollout step's share of DecisionModel status, and its Event.

The builder and the writer are in ``kube.rollout_status`` (shared with promote and the
controller); this activity is what the workflow schedules at each phase change.
"""

from __future__ import annotations

from temporalio import activity

from activities.typed_errors import typed_errors
from decisionmodel.rollout.contracts import (
    RECORD_STATUS,
    WORKFLOW_ID_PREFIX,
    RolloutRun,
    StatusUpdate,
)
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.rollout_status import emit_update_event, write_status


def stamped(update: StatusUpdate) -> StatusUpdate:
    """``update`` naming the rollout run that writes it (status.rollout), when a rollout's
    activity writes it: the controller then knows the run from status alone."""
    if not activity.in_activity():
        return update
    info = activity.info()
    wid, run_id = info.workflow_id or "", info.workflow_run_id or ""
    if not wid.startswith(WORKFLOW_ID_PREFIX + "/"):
        return update  # a store recovery, not a rollout
    run = RolloutRun(workflow_id=wid, run_id=run_id)
    return update.model_copy(update={"rollout": run})


class StatusActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings | None = None) -> None:
        self.kube = kube
        self.settings = settings or RolloutSettings()

    @activity.defn(name=RECORD_STATUS)
    async def record_status(self, update: StatusUpdate) -> None:
        async with typed_errors():
            await write_status(self.kube, stamped(update))
            await emit_update_event(self.kube, update)

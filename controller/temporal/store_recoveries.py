"""The controller's Temporal calls for a lost stable store: start its recovery workflow
(idempotent by ID: a new ``decisionmodel.io/retry`` value is part of the ID) and read where it
stands. What the reconciler shows for it is ``controller/reconciler/store_recovery.py``."""

from __future__ import annotations

from temporalio.client import Client

from controller.temporal import runs
from controller.temporal.errors import is_away
from decisionmodel.rollout.contracts import StoreRecoveryInput, StoreRecoveryOutcome
from workflows.store_recovery import StoreRecoveryWorkflow


class StoreRecoveries:
    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue

    async def start(self, inp: StoreRecoveryInput, wid: str) -> None:
        dm = inp.objects.dm
        await runs.start_once(
            self.client,
            StoreRecoveryWorkflow.run,
            inp,
            wid=wid,
            task_queue=self.task_queue,
            reuse=runs.Reuse.AFTER_CLOSE,
            summary=f"Recover the model store of {dm.namespace}/{dm.name} revision "
            f"{inp.objects.record.hash}",
        )

    async def state(self, wid: str) -> StoreRecoveryOutcome | str | None:
        """ "running", the closed run's outcome, or None when there is no such workflow (or it
        cannot be described for another reason than Temporal being away)."""
        try:
            state = await runs.state_of(self.client, wid)
        except runs.TemporalCallError as e:
            if is_away(e):
                raise
            return None
        if state is None:
            return None
        if state == runs.RunState.RUNNING:
            return "running"
        if state != runs.RunState.COMPLETED:
            return StoreRecoveryOutcome(recovered=False, message=f"recovery ended {state.value}")
        outcome: StoreRecoveryOutcome = await runs.result_of(self.client, wid, StoreRecoveryOutcome)
        return outcome

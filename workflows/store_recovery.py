"""StoreRecoveryWorkflow: a stable revision's lost model store, rebuilt as a transaction.

Seed 001 (StoreLost / StorePrefetchFailed): recreate the store PVC marked as recovering, run the
prefetch (pull and verify the recorded digest), then clear the mark: only then may the stable's
Pods on it be probed and serve. The controller starts it (one per stable store, ID
``store/<ns>/<name>/<revision>``) when the store PVC is missing, and shows its state as the
Degraded condition; its history is the repair's audit trail. A prefetch that fails for good
ends it with the reason: the store stays marked (never served empty) until a new
``decisionmodel.io/retry`` value starts another recovery.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from decisionmodel.engine.render.labels import store_pvc_name
    from decisionmodel.rollout.contracts import (
        PREFETCH,
        RECOVER_STORE_BEGIN,
        RECOVER_STORE_END,
        PrefetchResult,
        StoreRecoveryInput,
        StoreRecoveryOutcome,
    )
    from decisionmodel.vocabulary import Reason
    from workflows.retry_policies import STEP as RETRY

STEP_TIMEOUT = timedelta(minutes=10)


@workflow.defn(name="StoreRecoveryWorkflow")
class StoreRecoveryWorkflow:
    @workflow.run
    async def run(self, inp: StoreRecoveryInput) -> StoreRecoveryOutcome:
        objects = inp.objects
        store = store_pvc_name(objects.dm.name, objects.record.hash)
        caching = timedelta(seconds=objects.caching_timeout_seconds)
        try:
            await self._step(RECOVER_STORE_BEGIN, inp, STEP_TIMEOUT, f"recreate {store}")
            await workflow.execute_activity(
                PREFETCH,
                objects,
                result_type=PrefetchResult,
                start_to_close_timeout=caching,
                schedule_to_close_timeout=caching,
                heartbeat_timeout=timedelta(seconds=60),
                retry_policy=RETRY,
                summary=f"prefetch digest {objects.record.digest[:12]} into {store}",
            )
            await self._step(RECOVER_STORE_END, inp, STEP_TIMEOUT, f"{store} may serve")
        except ActivityError as e:
            cause = e.cause
            reason = Reason.STORE_PREFETCH_FAILED
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or e)
            workflow.set_current_details(f"**{reason}**: {message}")
            return StoreRecoveryOutcome(recovered=False, reason=reason, message=message)
        workflow.set_current_details(f"**recovered** {store}")
        return StoreRecoveryOutcome(recovered=True)

    @staticmethod
    async def _step(name: str, inp: StoreRecoveryInput, window: timedelta, summary: str) -> None:
        await workflow.execute_activity(
            name,
            inp.objects,
            start_to_close_timeout=timedelta(seconds=60),
            schedule_to_close_timeout=window,
            retry_policy=RETRY,
            summary=summary,
        )

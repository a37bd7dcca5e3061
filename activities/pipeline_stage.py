"""The work of a pipeline's stage in its own cluster (issue 25), run by that cluster's worker.

``apply`` writes the DecisionModel the stage names (the pipeline's template, digest pinned to
the freight) by server-side apply under its own field manager, labelled with the pipeline; a
DecisionModel of that name that the pipeline did not create is never touched
(ResourceConflict: rename it or remove it). ``await_rollout`` watches the DecisionModel until
the cluster's controller has taken up the applied generation (``decisionmodel.pipeline.
observe``), ``await_verdict`` waits for the result of the rollout it started: the cluster's
RolloutWorkflow, unchanged, decides. Each retries while the API server is away, so the stage
waits instead of failing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Final

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from activities.typed_errors import typed_errors
from decisionmodel.api import API_VERSION, KIND
from decisionmodel.errors import ResourceConflict
from decisionmodel.pipeline.contracts import (
    ABORT_STAGE_ROLLOUT,
    APPLY_STAGE,
    AWAIT_STAGE_ROLLOUT,
    AWAIT_STAGE_VERDICT,
    CHECK_STAGE,
    AbortStageRollout,
    AppliedStage,
    StageHealth,
    StageHealthInput,
    StageInput,
    StageRollout,
    StageVerdict,
)
from decisionmodel.pipeline.observe import (
    StageObservation,
    observe,
    rollout_verdict,
    stage_health,
)
from decisionmodel.rollout.contracts import RolloutOutcome
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import StageState
from kube.client import Kube
from kube.pipelines import (
    LABEL_PIPELINE,
    PIPELINE_FIELD_MANAGER,
    apply_dm,
    stage_annotations,
)
from kube.wait import wait_until
from kube.watch import source

ROLLOUT_ABORT: Final = "abort"  # RolloutWorkflow's abort signal (workflows/rollout.py)
# How often a waiting step heartbeats while nothing changes (the heartbeat timeout is 60 s).
BEAT_SECONDS: Final = 15.0


def stage_object(inp: StageInput) -> dict[str, Any]:
    """The DecisionModel a stage applies: the template, labelled with its pipeline."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": inp.name,
            "namespace": inp.namespace,
            "labels": {LABEL_PIPELINE: inp.pipeline.name},
            "annotations": stage_annotations(inp),
        },
        "spec": inp.spec,
    }


def refuse_foreign(current: dict[str, Any] | None, inp: StageInput) -> None:
    """Only a DecisionModel this pipeline made (or none) may be applied over."""
    if current is None:
        return
    labels = (current.get("metadata") or {}).get("labels") or {}
    if labels.get(LABEL_PIPELINE) != inp.pipeline.name:
        raise ResourceConflict(
            f"DecisionModel {inp.namespace}/{inp.name} exists and was not made by pipeline "
            f"{inp.pipeline.name}; dmrollout never modifies a foreign object: remove it, or "
            f"label it {LABEL_PIPELINE}={inp.pipeline.name} to hand it to the pipeline",
            permanent=True,
        )


class StageActivities:
    def __init__(
        self, kube: Kube, settings: RolloutSettings, rollouts: Client | None = None
    ) -> None:
        self.kube = kube
        self.settings = settings
        # The client of this cluster's rollouts (its own Temporal namespace); None: the
        # activity's own (rollouts and pipelines in one namespace).
        self.rollouts = rollouts

    @activity.defn(name=APPLY_STAGE)
    async def apply(self, inp: StageInput) -> AppliedStage:
        async with typed_errors():
            current = await Kube.run(self.kube.read_dm, inp.namespace, inp.name)
            refuse_foreign(current, inp)
            applied = await Kube.run(apply_dm, self.kube, stage_object(inp))
            meta = applied["metadata"]
            return AppliedStage(
                namespace=inp.namespace,
                name=inp.name,
                uid=meta["uid"],
                generation=int(meta.get("generation") or 1),
                digest=str(inp.spec.get("digest") or ""),
            )

    @activity.defn(name=AWAIT_STAGE_ROLLOUT)
    async def await_rollout(self, applied: AppliedStage) -> StageRollout:
        async def taken_up(items: list[dict[str, Any]]) -> StageObservation | None:
            activity.heartbeat("waiting for the controller to take up the applied generation")
            dm = next((i for i in items if i["metadata"]["uid"] == applied.uid), None)
            if dm is None:
                raise ResourceConflict(
                    f"DecisionModel {applied.namespace}/{applied.name} was deleted or "
                    "re-created while its stage ran",
                    permanent=True,
                )
            return observe(dm, applied.generation, applied.digest)

        async with typed_errors():
            src = source("DecisionModel", applied.namespace, name=applied.name)
            seen = await wait_until(self.kube, src, taken_up, idle=BEAT_SECONDS)
            settled = None
            if seen.state is not None:
                settled = StageVerdict(
                    state=seen.state,
                    reason=seen.reason,
                    message=seen.message,
                    decided_at=datetime.now(UTC),
                )
            return StageRollout(
                workflow_id=seen.rollout_workflow_id,
                run_id=seen.rollout_run_id,
                settled=settled,
                temporal_namespace=(self.rollouts or activity.client()).namespace,
            )

    @activity.defn(name=AWAIT_STAGE_VERDICT)
    async def await_verdict(self, rollout: StageRollout) -> StageVerdict:
        """The result of the cluster's RolloutWorkflow, read in the cluster's own namespace."""
        if rollout.settled is not None:
            return rollout.settled
        client = self.rollouts or activity.client()
        handle = client.get_workflow_handle(rollout.workflow_id, result_type=RolloutOutcome)
        result = asyncio.ensure_future(handle.result())
        try:
            while not result.done():
                activity.heartbeat(f"waiting for {rollout.workflow_id}")
                await asyncio.wait({result}, timeout=BEAT_SECONDS)
            outcome = result.result()
        except WorkflowFailureError as e:
            return _failed_rollout(rollout, e)
        finally:
            result.cancel()
        return StageVerdict(
            state=rollout_verdict(outcome.result),
            reason=outcome.reason or str(outcome.result),
            message=outcome.message or "",
            rollout_workflow_id=rollout.workflow_id,
            revision=outcome.revision,
            decided_at=datetime.now(UTC),
        )

    @activity.defn(name=CHECK_STAGE)
    async def check(self, inp: StageHealthInput) -> StageHealth:
        """Whether this promoted stage still serves the freight, healthy (asked by the hub's
        run while the stages after it soak)."""
        async with typed_errors():
            dm = await Kube.run(self.kube.read_dm, inp.namespace, inp.name)
            return stage_health(dm, inp.namespace, inp.name, inp.digest)

    @activity.defn(name=ABORT_STAGE_ROLLOUT)
    async def abort_rollout(self, inp: AbortStageRollout) -> bool:
        """Signal the cluster's rollout to abort, in the cluster's own namespace (it rolls
        back); False when it had ended meanwhile."""
        client = self.rollouts or activity.client()
        handle = client.get_workflow_handle(inp.workflow_id, run_id=inp.run_id or None)
        try:
            await handle.signal(ROLLOUT_ABORT, inp.reason)
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True


def _failed_rollout(rollout: StageRollout, error: WorkflowFailureError) -> StageVerdict:
    cause = error.cause
    return StageVerdict(
        state=StageState.FAILED,
        reason=getattr(cause, "type", None) or type(cause).__name__,
        message=str(cause or error)[:1024],
        rollout_workflow_id=rollout.workflow_id,
        decided_at=datetime.now(UTC),
    )


__all__ = ["PIPELINE_FIELD_MANAGER", "StageActivities", "refuse_foreign", "stage_object"]

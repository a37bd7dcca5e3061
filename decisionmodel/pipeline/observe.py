"""What a stage reads off its cluster's DecisionModel (issue 25). Pure.

After the stage applied generation G, the cluster's controller sees it (observedGeneration >= G)
and either starts a rollout, whose steps write their conditions for generation G (Resolved
first) and name their run in ``status.rollout``, or has nothing to roll out (an in-place
change, or the same revision already serving: not Reconciling), or refuses the spec (kstatus
``Stalled=True``).
The rollout's verdict itself comes from its workflow's result (``rollout_verdict``), the
cluster's RolloutWorkflow deciding with its own gates.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from decisionmodel.api.status import DecisionModelStatus
from decisionmodel.pipeline.contracts import StageHealth
from decisionmodel.vocabulary import (
    ConditionStatus,
    ConditionType,
    Phase,
    RolloutResult,
    StageReason,
    StageState,
)

UNHEALTHY_PHASES = frozenset({Phase.DEGRADED, Phase.FAILED, Phase.ROLLED_BACK})


class StageObservation(BaseModel):
    """The rollout the applied generation started, or the verdict reached without one."""

    model_config = ConfigDict(frozen=True)

    rollout_workflow_id: str = ""
    rollout_run_id: str = ""
    state: StageState | None = None  # set when decided without a (new) rollout
    reason: str = ""
    message: str = ""


def observe(dm: dict[str, Any], generation: int, digest: str = "") -> StageObservation | None:
    """None: not decided yet (the controller has not seen G, or is about to start a rollout).
    A rollout is the applied generation's when its first step's condition (Resolved) is for G
    or later: a retried apply, or a rollout from before it, can never be taken for it."""
    status = DecisionModelStatus.model_validate(dm.get("status") or {})
    if (status.observed_generation or 0) < generation:
        return None
    conditions = {c.type: c for c in status.conditions}
    resolved = conditions.get(ConditionType.RESOLVED)
    run = status.rollout
    ours = resolved is not None and (resolved.observed_generation or 0) >= generation
    if ours and run is not None and run.workflow_id:
        return StageObservation(rollout_workflow_id=run.workflow_id, rollout_run_id=run.run_id)
    stalled = conditions.get(ConditionType.STALLED)
    if stalled is not None and stalled.status == ConditionStatus.TRUE:
        return StageObservation(
            state=StageState.FAILED, reason=stalled.reason, message=stalled.message
        )
    reconciling = conditions.get(ConditionType.RECONCILING)
    if reconciling is not None and reconciling.status == ConditionStatus.TRUE:
        return None  # queued, resolving, or the rollout's first step has not written yet
    stable = status.stable_revision
    if stable is None or not digest or stable.digest != digest:
        # Not Reconciling, yet the freight does not serve (a refused spec, a failed revision
        # being looked after): never taken for a promotion; the stage keeps waiting.
        return None
    return StageObservation(
        state=StageState.PROMOTED,
        reason=StageReason.NOTHING_TO_ROLL_OUT,
        message="the applied spec's revision already serves (no rollout was needed)",
    )


def rollout_verdict(result: RolloutResult) -> StageState:
    """A finished RolloutWorkflow's result as its stage's state."""
    if result == RolloutResult.PROMOTED:
        return StageState.PROMOTED
    if result == RolloutResult.ABORTED:
        return StageState.ABORTED
    return StageState.FAILED  # RolledBack, Failed, Superseded (someone changed it meanwhile)


def stage_health(dm: dict[str, Any] | None, namespace: str, name: str, digest: str) -> StageHealth:
    """Whether a promoted stage's DecisionModel still serves the freight, healthy (during its
    dependents' soak): its stable is the freight, not Degraded, not rolled back or failed."""
    where = f"DecisionModel {namespace}/{name}"
    if dm is None:
        return StageHealth(serving=False, reason=StageReason.UNHEALTHY, message=f"{where} is gone")
    status = DecisionModelStatus.model_validate(dm.get("status") or {})
    stable = status.stable_revision
    degraded = next((c for c in status.conditions if c.type == ConditionType.DEGRADED), None)
    why = ""
    if degraded is not None and degraded.status == ConditionStatus.TRUE:
        why = f"Degraded ({degraded.reason}: {degraded.message})"
    elif status.phase in UNHEALTHY_PHASES:
        why = f"phase {status.phase}"
    if stable is None or stable.digest != digest:
        served = f"sha256:{stable.digest[:12]}" if stable and stable.digest else "nothing"
        why = f"serves {served}, not the freight sha256:{digest[:12]}" + (f"; {why}" if why else "")
    if not why:
        return StageHealth(serving=True)
    return StageHealth(serving=False, reason=StageReason.UNHEALTHY, message=f"{where} {why}")

"""The controller's side of a lost stable store (seed 001: StoreLost, StorePrefetchFailed,
StoreTerminating): notice it, start its recovery workflow, and say where it stands.

The recovery itself is a transaction in Temporal (``workflows/store_recovery.py``); here only the
level-triggered part: on each reconcile, read the stable's store PVC and

| the PVC | shows | does |
| --- | --- | --- |
| missing | Degraded=True StoreLost | starts the recovery workflow (idempotent by ID) |
| marked recovering, workflow running | Degraded=True StoreLost | keeps its Pods unprobed |
| marked recovering, recovery failed | Degraded=True StorePrefetchFailed | waits for a retry |
| being deleted (Pods still mount it) | Degraded=True StoreTerminating | nothing: a human decides |

A new ``decisionmodel.io/retry`` value is part of the workflow ID, so it starts a new recovery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.temporal.errors import is_away
from controller.temporal.runs import TEMPORAL_ERRORS
from controller.temporal.store_recoveries import StoreRecoveries
from decisionmodel.engine.render.labels import ANNOTATION_STORE_RECOVERING, store_pvc_name
from decisionmodel.rollout.contracts import (
    ConditionUpdate,
    RevisionObjectsInput,
    StoreRecoveryInput,
    StoreRecoveryOutcome,
    store_workflow_id,
)
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason


@dataclass(frozen=True)
class StoreHealth:
    """What the stable's store says: a Degraded condition, and whether its Pods may be probed
    (never while the store is being filled again)."""

    condition: ConditionUpdate | None = None
    probe: bool = True


async def store_health(
    recoveries: StoreRecoveries,
    inp: RevisionObjectsInput,
    pvc: dict[str, Any] | None,
    retry: str | None,
) -> StoreHealth:
    dm, revision = inp.dm, inp.record.hash
    name = store_pvc_name(dm.name, revision)
    wid = store_workflow_id(dm, revision, retry)
    if pvc is not None and pvc["metadata"].get("deletionTimestamp"):
        return StoreHealth(_terminating(name, dm.name, revision))
    recovering = pvc is not None and _marked(pvc)
    if pvc is not None and not recovering:
        return StoreHealth()
    try:
        state = await recoveries.state(wid)
        if isinstance(state, StoreRecoveryOutcome) and not state.recovered:
            return StoreHealth(_prefetch_failed(name, wid, state), probe=False)
        if state != "running":
            await recoveries.start(StoreRecoveryInput(objects=inp, retry_token=retry), wid)
    except TEMPORAL_ERRORS as e:
        if not is_away(e):
            raise
        # The recovery is a transaction in Temporal: it waits for Temporal, and says so; the
        # rest of the steady state goes on.
        lost = _lost(name, inp.record.digest, wid)
        waiting = f"{lost.message}; the recovery starts once Temporal answers ({e})"
        return StoreHealth(lost.model_copy(update={"message": waiting}), probe=False)
    return StoreHealth(_lost(name, inp.record.digest, wid), probe=False)


def _marked(pvc: dict[str, Any]) -> bool:
    return (pvc["metadata"].get("annotations") or {}).get(ANNOTATION_STORE_RECOVERING) == "true"


def _lost(name: str, digest: str, wid: str) -> ConditionUpdate:
    return ConditionUpdate(
        type=ConditionType.DEGRADED,
        status=ConditionStatus.TRUE,
        reason=Reason.STORE_LOST,
        message=f"the model store PVC {name} was lost: recreating it and prefetching digest "
        f"{digest[:12]} (workflow {wid}); the stable keeps serving on the Pods that are ready, "
        "and no Pod serves the store before the digest is verified",
    )


def _prefetch_failed(name: str, wid: str, outcome: StoreRecoveryOutcome) -> ConditionUpdate:
    return ConditionUpdate(
        type=ConditionType.DEGRADED,
        status=ConditionStatus.TRUE,
        reason=Reason.STORE_PREFETCH_FAILED,
        message=f"recovering the model store PVC {name} failed (workflow {wid}): "
        f"{outcome.message}; fix the cause, then set a new decisionmodel.io/retry value to run "
        "the recovery again",
    )


def _terminating(name: str, dm: str, revision: str) -> ConditionUpdate:
    return ConditionUpdate(
        type=ConditionType.DEGRADED,
        status=ConditionStatus.TRUE,
        reason=Reason.STORE_TERMINATING,
        message=f"the model store PVC {name} is being deleted but the stable Pods still mount "
        "it; dmrollout does not stop the stable by itself. Delete the stable Pods (kubectl "
        f"delete pod -l decisionmodel.io/name={dm},decisionmodel.io/revision={revision}) so the "
        "PVC can finish deleting and recovery can run; expect a short serving gap",
    )

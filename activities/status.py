"""record_status: the rollout's share of DecisionModel status, by server-side apply.

Ownership (DESIGN "Status has clear owners"): the rollout owns phase, phaseTransitionTime,
candidateRevision, stableRevision, failedRevision, previousRevision, evaluation,
lastPromotionTime and the conditions Resolved, Cached, Evaluated and Promoted; the controller
owns observedGeneration, endpoint, replicas, lastRetryToken and the conditions Ready, Degraded
and ModelReady. Each side applies under its own field manager, so neither write removes the
other's fields.

With server-side apply a manager *removes* a field it owned by leaving it out of its next
apply. So every apply here carries the whole rollout-owned subset that should persist: read the
DecisionModel, take the rollout fields it has, lay the update over them, apply. The read and
the apply are tied by ``metadata.resourceVersion``, so a write in between (the controller, or
another rollout's activity) makes the apply fail with 409 and it is rebuilt from a fresh read,
instead of writing back a stale value.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from kubernetes.client.rest import ApiException
from temporalio import activity

from activities.errors import typed_errors
from activities.kube import STATUS_APPLY_ATTEMPTS, Kube, conflict_backoff
from activities.settings import RolloutSettings
from decisionmodel.api_status import Condition, EvaluationGates, EvaluationStatus
from decisionmodel.conditions import ConditionType, condition, set_condition
from workflows.contracts import (
    RECORD_STATUS,
    EvaluationOutcome,
    RevisionRecord,
    StatusUpdate,
)

log = logging.getLogger(__name__)

ROLLOUT_CONDITION_TYPES: Final = frozenset(
    {
        ConditionType.RESOLVED.value,
        ConditionType.CACHED.value,
        ConditionType.EVALUATED.value,
        ConditionType.PROMOTED.value,
    }
)
ROLLOUT_STATUS_FIELDS: Final = (
    "phase",
    "phaseTransitionTime",
    "candidateRevision",
    "stableRevision",
    "failedRevision",
    "previousRevision",
    "evaluation",
    "lastPromotionTime",
)
# A conflicting write between read and apply is rare (the controller writes on Pod events);
# five rounds make a persistent race visible as an error instead of a loop.
APPLY_ATTEMPTS = STATUS_APPLY_ATTEMPTS


def wire_time(now: datetime) -> str:
    """metav1.Time: RFC 3339, whole seconds, UTC."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def has_status_fields(update: StatusUpdate) -> bool:
    """False for an Event-only update (nothing to apply)."""
    return bool(
        update.phase is not None
        or update.candidate is not None
        or update.clear_candidate
        or update.stable is not None
        or update.previous_revision is not None
        or update.failed is not None
        or update.clear_failed
        or update.evaluation is not None
        or update.evaluation_gates is not None
        or update.promoted
        or update.conditions
    )


def _hash_of(obj: Any) -> str | None:
    return obj.get("hash") if isinstance(obj, Mapping) else None


def _previous(current: Mapping[str, Any], revision: str) -> dict[str, Any]:
    """previousRevision is a recorded identity: copy the full record when status has it (the
    stable being replaced, or an earlier write of the same previous), else the hash alone."""
    for key in ("stableRevision", "previousRevision"):
        found = current.get(key)
        if _hash_of(found) == revision:
            return copy.deepcopy(dict(found))  # type: ignore[arg-type]
    return {"hash": revision}


def _failed(
    current: Mapping[str, Any], update: StatusUpdate, record: RevisionRecord, now: datetime
) -> dict[str, Any]:
    failed: dict[str, Any] = record.to_status()
    if update.failed_reason:
        failed["reason"] = update.failed_reason
    if update.failed_message:
        failed["message"] = update.failed_message
    old = current.get("failedRevision")
    same = (
        isinstance(old, Mapping)
        and old.get("hash") == record.hash
        and old.get("reason") == failed.get("reason")
        and old.get("failedAt")
    )
    # A repeated write of the same failure (an activity retry) keeps when it was recorded.
    failed["failedAt"] = old["failedAt"] if same else wire_time(now)  # type: ignore[index]
    return failed


def _gates(gates: Mapping[str, str]) -> dict[str, Any]:
    # Accepts the wire names (minAccuracy, maxECE, …) and the Python ones alike.
    return EvaluationGates.model_validate(dict(gates)).to_wire()


def _evaluation(
    current: Mapping[str, Any],
    outcome: EvaluationOutcome | None,
    gates: Mapping[str, str] | None,
    revision: str | None,
    now: datetime,
) -> dict[str, Any] | None:
    old = current.get("evaluation")
    old = dict(old) if isinstance(old, Mapping) else None
    if outcome is None:
        if old is None or gates is None:
            return old
        return {**old, "gates": _gates(gates)}
    status = EvaluationStatus(
        revision=revision,
        accuracy=outcome.accuracy,
        baseline_accuracy=outcome.baseline_accuracy,
        cases=outcome.cases,
        failed_cases=outcome.failed_cases,
        ece=outcome.ece,
        brier=outcome.brier,
        baseline_ece=outcome.baseline_ece,
        result=outcome.result,
        reason=outcome.reason,
    ).to_wire()
    if gates is not None:
        status["gates"] = _gates(gates)
    elif old is not None and "gates" in old:
        status["gates"] = old["gates"]
    unchanged = old is not None and {k: v for k, v in old.items() if k != "completedAt"} == status
    kept = old.get("completedAt") if unchanged and old else None
    status["completedAt"] = kept or wire_time(now)
    return status


def _conditions(
    current: Mapping[str, Any], update: StatusUpdate, generation: int, now: datetime
) -> list[dict[str, Any]]:
    existing: list[Condition] = []
    for raw in current.get("conditions") or []:
        if not isinstance(raw, Mapping) or raw.get("type") not in ROLLOUT_CONDITION_TYPES:
            continue
        try:
            existing.append(Condition.model_validate(raw))
        except ValueError:
            continue  # malformed: the update (or nothing) replaces it
    for wanted in update.conditions:
        if wanted.type not in ROLLOUT_CONDITION_TYPES:
            continue
        new = condition(
            wanted.type,
            wanted.status,  # type: ignore[arg-type]
            wanted.reason,
            wanted.message,
            observed_generation=generation,
        )
        existing = set_condition(existing, new, now)
    return [c.to_wire() for c in existing]


def build_rollout_status(
    current: Mapping[str, Any], update: StatusUpdate, generation: int, now: datetime
) -> dict[str, Any]:
    """The complete rollout-owned status to apply: what ``current`` holds of it, with
    ``update`` laid over. Pure, so the rules are unit-testable:

    - phaseTransitionTime moves only when the phase changes;
    - ``clear_*`` leaves the field out (server-side apply then removes it);
    - previousRevision copies the full record of the stable it replaces;
    - failedAt, evaluation.completedAt and lastPromotionTime keep their time when the same
      value is written again (an activity retry), as condition lastTransitionTimes do.
    """
    owned: dict[str, Any] = {
        key: copy.deepcopy(current[key])
        for key in ROLLOUT_STATUS_FIELDS
        if current.get(key) is not None
    }
    if update.phase is not None:
        phase = update.phase.value
        if current.get("phase") != phase or not current.get("phaseTransitionTime"):
            owned["phaseTransitionTime"] = wire_time(now)
        owned["phase"] = phase

    if update.clear_candidate:
        owned.pop("candidateRevision", None)
    if update.candidate is not None:
        owned["candidateRevision"] = update.candidate.to_status()

    if update.previous_revision is not None:
        owned["previousRevision"] = _previous(current, update.previous_revision)
    if update.stable is not None:
        owned["stableRevision"] = update.stable.to_status()
    if update.promoted:
        again = (
            update.stable is not None
            and _hash_of(current.get("stableRevision")) == update.stable.hash
            and current.get("lastPromotionTime")
        )
        owned["lastPromotionTime"] = current["lastPromotionTime"] if again else wire_time(now)

    if update.clear_failed:
        owned.pop("failedRevision", None)
    if update.failed is not None:
        owned["failedRevision"] = _failed(current, update, update.failed, now)

    if update.evaluation is not None or update.evaluation_gates is not None:
        candidate = update.candidate.hash if update.candidate else None
        candidate = candidate or _hash_of(current.get("candidateRevision"))
        evaluation = _evaluation(
            current, update.evaluation, update.evaluation_gates, candidate, now
        )
        if evaluation is not None:
            owned["evaluation"] = evaluation

    conditions = _conditions(current, update, generation, now)
    if conditions:
        owned["conditions"] = conditions
    return owned


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def write_status(
    kube: Kube, update: StatusUpdate, clock: Callable[[], datetime] = _utcnow
) -> dict[str, Any] | None:
    """Apply the update's rollout-owned fields; the DecisionModel as the server returned it,
    or None for an Event-only update. Shared by record_status and promote."""
    ignored = sorted({c.type for c in update.conditions} - ROLLOUT_CONDITION_TYPES)
    if ignored:
        # Ready, Degraded and ModelReady belong to the controller: writing them here would make
        # the two managers fight over them.
        log.warning("status update for %s: conditions %s are not the rollout's", update.dm, ignored)
    if not has_status_fields(update):
        return None
    for attempt in range(1, APPLY_ATTEMPTS + 1):
        dm = await Kube.run(kube.get_dm, update.dm)
        meta = dm["metadata"]
        # Conditions are computed for the spec generation the rollout was dispatched with.
        generation = update.dm.generation or int(meta.get("generation") or 0)
        status = build_rollout_status(dm.get("status") or {}, update, generation, clock())
        try:
            return await Kube.run(
                kube.apply_dm_status, update.dm, status, resource_version=meta["resourceVersion"]
            )
        except ApiException as e:
            if e.status != 409 or attempt == APPLY_ATTEMPTS:
                raise
            log.info("status of %s changed while applying; re-reading", update.dm.name)
            await conflict_backoff(attempt)
    raise AssertionError("unreachable")


async def emit_event(kube: Kube, update: StatusUpdate) -> None:
    """Best effort, as Kubernetes event recorders are: a refused Event never fails the step
    whose status was already written."""
    if not update.event_reason:
        return
    try:
        await Kube.run(
            kube.emit_event,
            update.dm,
            update.event_reason,
            update.event_message,
            update.event_type,
        )
    except ApiException as e:
        log.warning("event %s on %s refused: %s", update.event_reason, update.dm.name, e.status)


class StatusActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings | None = None) -> None:
        self.kube = kube
        self.settings = settings or RolloutSettings()

    @activity.defn(name=RECORD_STATUS)
    async def record_status(self, update: StatusUpdate) -> None:
        async with typed_errors():
            await write_status(self.kube, update)
            await emit_event(self.kube, update)

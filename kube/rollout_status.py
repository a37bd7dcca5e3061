"""The rollout's share of DecisionModel status: the pure builder and its writer.

The rollout owns phase, phaseTransitionTime, candidateRevision, stableRevision,
failedRevision, previousRevision, evaluation, evaluationLedger, lastPromotionTime and the
conditions Resolved, Cached, Evaluated and Promoted, applied under the field manager
``dmrollout-rollout`` through ``kube.status`` (the controller's share is
``kube.controller_status``). The record_status
activity and promote write through here; the controller too, when it decides a steady-state
phase (phase has one owner).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from decisionmodel.api.status import EvaluationDesignStatus, EvaluationGates, LedgerEntryStatus
from decisionmodel.evaluation.ledger import LedgerEntry, with_entry
from decisionmodel.rollout.contracts import (
    ConditionUpdate,
    DMRef,
    EvaluationOutcome,
    RevisionRecord,
    StatusUpdate,
)
from decisionmodel.rollout.evaluation_status import evaluation_status
from decisionmodel.vocabulary import (
    GUARD_REASONS,
    ROLLOUT_CONDITION_TYPES,
    ConditionStatus,
    ConditionType,
    Phase,
    Reason,
    StatusKey,
)
from kube.client import ROLLOUT_FIELD_MANAGER, Kube
from kube.errors import KubeError
from kube.status import apply_owned_status, emit_event, merge_conditions, wire_time

log = logging.getLogger(__name__)

ROLLOUT_STATUS_FIELDS: Final = (
    "phase",
    StatusKey.PHASE_TRANSITION_TIME,
    StatusKey.CANDIDATE_REVISION,
    StatusKey.STABLE_REVISION,
    StatusKey.FAILED_REVISION,
    StatusKey.PREVIOUS_REVISION,
    "evaluation",
    StatusKey.EVALUATION_LEDGER,
    StatusKey.EVALUATION_DESIGN,
    StatusKey.LAST_PROMOTION_TIME,
    StatusKey.ROLLOUT,
)


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
        or update.evaluation_design is not None
        or update.promoted
        or update.conditions
    )


def _hash_of(obj: Any) -> str | None:
    return obj.get("hash") if isinstance(obj, Mapping) else None


def _previous(current: Mapping[str, Any], revision: str) -> dict[str, Any]:
    """previousRevision is a recorded identity: copy the full record when status has it (the
    stable being replaced, or an earlier write of the same previous), else the hash alone."""
    for key in (StatusKey.STABLE_REVISION, StatusKey.PREVIOUS_REVISION):
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
    old = current.get(StatusKey.FAILED_REVISION)
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
    status = evaluation_status(outcome, revision).to_wire()
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
    wanted = [c for c in update.conditions if c.type in ROLLOUT_CONDITION_TYPES]
    merged = merge_conditions(
        current.get("conditions") or [], ROLLOUT_CONDITION_TYPES, wanted, generation, now
    )
    return [c.to_wire() for c in merged]


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
        if current.get("phase") != phase or not current.get(StatusKey.PHASE_TRANSITION_TIME):
            owned[StatusKey.PHASE_TRANSITION_TIME] = wire_time(now)
        owned["phase"] = phase
    if update.rollout is not None:
        owned[StatusKey.ROLLOUT] = update.rollout.to_status()
    _lay_revisions(owned, current, update, now)
    _lay_evaluation(owned, current, update, now)
    conditions = _conditions(current, update, generation, now)
    if conditions:
        owned["conditions"] = conditions
    return owned


def _lay_revisions(
    owned: dict[str, Any], current: Mapping[str, Any], update: StatusUpdate, now: datetime
) -> None:
    """Candidate, previous, stable (and when it was promoted) and failed revisions."""
    if update.clear_candidate:
        owned.pop(StatusKey.CANDIDATE_REVISION, None)
    if update.candidate is not None:
        owned[StatusKey.CANDIDATE_REVISION] = update.candidate.to_status()
    if update.previous_revision is not None:
        owned[StatusKey.PREVIOUS_REVISION] = _previous(current, update.previous_revision)
    if update.stable is not None:
        owned[StatusKey.STABLE_REVISION] = update.stable.to_status()
    if update.promoted:
        again = (
            update.stable is not None
            and _hash_of(current.get(StatusKey.STABLE_REVISION)) == update.stable.hash
            and current.get(StatusKey.LAST_PROMOTION_TIME)
        )
        owned[StatusKey.LAST_PROMOTION_TIME] = (
            current[StatusKey.LAST_PROMOTION_TIME] if again else wire_time(now)
        )
    if update.clear_failed:
        owned.pop(StatusKey.FAILED_REVISION, None)
    if update.failed is not None:
        owned[StatusKey.FAILED_REVISION] = _failed(current, update, update.failed, now)


def _lay_evaluation(
    owned: dict[str, Any], current: Mapping[str, Any], update: StatusUpdate, now: datetime
) -> None:
    """The evaluation's figures and gates, the sequential test's ledger, the design."""
    if update.evaluation is not None or update.evaluation_gates is not None:
        candidate = update.candidate.hash if update.candidate else None
        candidate = candidate or _hash_of(current.get(StatusKey.CANDIDATE_REVISION))
        evaluation = _evaluation(
            current, update.evaluation, update.evaluation_gates, candidate, now
        )
        if evaluation is not None:
            owned["evaluation"] = evaluation
    decision = update.evaluation.decision if update.evaluation is not None else None
    if decision is not None and decision.sequential is not None:
        owned[StatusKey.EVALUATION_LEDGER] = ledger_with(current, decision.sequential)
    if update.evaluation_design is not None:
        owned[StatusKey.EVALUATION_DESIGN] = EvaluationDesignStatus.model_validate(
            update.evaluation_design.model_dump(mode="json")
        ).model_dump(mode="json", by_alias=True, exclude_none=True)


def ledger_of(status: Mapping[str, Any]) -> list[LedgerEntry]:
    """``status.evaluationLedger`` as entries; an entry that does not read is left out (its
    revision's next evaluation then starts a new test, as for a revision never tested)."""
    found = []
    for raw in status.get(StatusKey.EVALUATION_LEDGER) or []:
        try:
            wire = LedgerEntryStatus.model_validate(raw)
            found.append(LedgerEntry.model_validate(wire.model_dump(mode="json")))
        except ValueError:
            continue
    return found


def ledger_with(current: Mapping[str, Any], entry: LedgerEntry) -> list[dict[str, Any]]:
    entries = with_entry(ledger_of(current), entry)
    return [
        LedgerEntryStatus.model_validate(e.model_dump(mode="json")).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        for e in entries
    ]


async def write_status(
    kube: Kube,
    update: StatusUpdate,
    read: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Apply the update's rollout-owned fields; the DecisionModel as the server returned it,
    or None for an Event-only update (or a decision voided by a newer status,
    ``kube.status.apply_owned_status``). Shared by record_status, promote and the controller.
    ``read``: the DecisionModel as last seen (the controller's cache) and judged from, so no
    read first and no write once it is stale."""
    ignored = sorted({c.type for c in update.conditions} - ROLLOUT_CONDITION_TYPES)
    if ignored:
        # Ready, Degraded and ModelReady belong to the controller: writing them here would make
        # the two managers fight over them.
        log.warning("status update for %s: conditions %s are not the rollout's", update.dm, ignored)
    if not has_status_fields(update):
        return None

    def build(current: Mapping[str, Any], generation: int, now: datetime) -> dict[str, Any]:
        # Conditions are computed for the spec generation the rollout was dispatched with.
        return build_rollout_status(current, update, update.dm.generation or generation, now)

    applied = await apply_owned_status(kube, update.dm, build, ROLLOUT_FIELD_MANAGER, read)
    return applied[1] if applied else None


async def show_guard(
    kube: Kube,
    dm: DMRef,
    condition: ConditionType,
    reason: str,
    message: str,
    first: bool,
    phase: Phase | None = None,
) -> None:
    """A guard holds a step (an unlabelled Secret, a foreign object): the step's condition says
    so at once, False with the guard's reason and the fix, and a Warning Event on the first
    attempt. Best effort: the step is retried either way, and the next attempt shows it again.
    ``phase``: the step's own, written with a reason that is no guard's (the step goes on)."""
    update = StatusUpdate(
        dm=dm,
        phase=phase if reason not in GUARD_REASONS else None,
        conditions=[
            ConditionUpdate(
                type=condition, status=ConditionStatus.FALSE, reason=reason, message=message
            )
        ],
    )

    def build(current: Mapping[str, Any], generation: int, now: datetime) -> dict[str, Any] | None:
        # A superseded rollout's step may still be retrying its guard (resolve has no heartbeat
        # to learn of the cancel): it must not overwrite what the newer rollout already wrote.
        if newer_condition(current, condition, dm.generation):
            return None
        return build_rollout_status(current, update, dm.generation or generation, now)

    try:
        if await apply_owned_status(kube, dm, build, ROLLOUT_FIELD_MANAGER) and first:
            await emit_event(kube, dm, reason, message, "Warning")
    except KubeError as e:
        log.warning("could not show %s on %s: %s", reason, dm.name, e)


async def clear_guard(
    kube: Kube, dm: DMRef, condition: ConditionType, phase: Phase | None = None
) -> None:
    """A later attempt got past the guard ``show_guard`` showed: the step's condition goes to
    Unknown (``GuardCleared``; the step writes its outcome when it ends), and the phase back to
    the step's (``phase``; ``enter_phase`` left the guard's phase while it held). Only when it
    still shows a guard of this rollout's generation; best effort."""
    update = StatusUpdate(
        dm=dm,
        phase=phase,
        conditions=[
            ConditionUpdate(
                type=condition,
                status=ConditionStatus.UNKNOWN,
                reason=Reason.GUARD_CLEARED,
                message="the guard no longer holds; the step goes on",
            )
        ],
    )

    def build(current: Mapping[str, Any], generation: int, now: datetime) -> dict[str, Any] | None:
        if not shows_guard(current, condition, dm.generation):
            return None
        return build_rollout_status(current, update, dm.generation or generation, now)

    try:
        await apply_owned_status(kube, dm, build, ROLLOUT_FIELD_MANAGER)
    except KubeError as e:
        log.warning("could not clear the guard on %s: %s", dm.name, e)


# The condition each step's guards show on (start's on Promoted: the candidate cannot be
# promoted); the phase a step enters names its step.
GUARDED_BY_PHASE: Final = {
    Phase.RESOLVING: ConditionType.RESOLVED,
    Phase.CACHING: ConditionType.CACHED,
    Phase.STARTING: ConditionType.PROMOTED,
    Phase.EVALUATING: ConditionType.EVALUATED,
    Phase.PROMOTING: ConditionType.PROMOTED,
}


async def enter_phase(kube: Kube, update: StatusUpdate) -> None:
    """A step's phase as it starts, on every attempt (``entered``)."""
    if not has_status_fields(update):
        return

    def build(current: Mapping[str, Any], generation: int, now: datetime) -> dict[str, Any]:
        return entered(current, update, update.dm.generation or generation, now)

    await apply_owned_status(kube, update.dm, build, ROLLOUT_FIELD_MANAGER)


def entered(
    current: Mapping[str, Any], update: StatusUpdate, generation: int, now: datetime
) -> dict[str, Any]:
    """``build_rollout_status`` for a step's phase as it starts, except that while a guard of
    this spec generation holds the step, the phase stays the one the controller derived from it
    (Degraded for a Secret, seed 001: controller.reconciler.guard_status). Writing the step's
    phase on each retry made the phase flap between the two on every retry (issue 34: 8 changes
    over 4 retries, each a status write, a watch event and a transition in the metrics);
    ``clear_guard`` puts the step's phase back once an attempt gets past the guard."""
    guarded = GUARDED_BY_PHASE.get(update.phase) if update.phase else None
    held = (
        current.get("phase") == Phase.DEGRADED
        and guarded is not None
        and shows_guard(current, guarded, generation)
    )
    kept = update.model_copy(update={"phase": None}) if held else update
    return build_rollout_status(current, kept, generation, now)


def shows_guard(current: Mapping[str, Any], condition: ConditionType, generation: int) -> bool:
    """Whether ``current`` holds ``condition`` False with a guard's reason, for ``generation``."""
    for raw in current.get("conditions") or []:
        if isinstance(raw, Mapping) and raw.get("type") == condition:
            return (
                raw.get("status") == ConditionStatus.FALSE
                and raw.get("reason") in GUARD_REASONS
                and raw.get("observedGeneration") in (generation, None)
            )
    return False


def newer_condition(current: Mapping[str, Any], condition: ConditionType, generation: int) -> bool:
    """Whether ``current`` holds ``condition`` written for a spec generation after ``generation``
    (0: unknown, never newer)."""
    if generation <= 0:
        return False
    for raw in current.get("conditions") or []:
        if isinstance(raw, Mapping) and raw.get("type") == condition:
            seen = raw.get("observedGeneration")
            return isinstance(seen, int) and seen > generation
    return False


async def emit_update_event(kube: Kube, update: StatusUpdate) -> None:
    """The update's Event, if it names one (best effort)."""
    if update.event_reason:
        await emit_event(
            kube, update.dm, update.event_reason, update.event_message, update.event_type
        )

"""The one status writer: server-side apply of one owner's share of DecisionModel status.

Two owners (DESIGN "Status has clear owners"), two field managers, one way of writing:

- the rollout's activities own phase, the revisions, evaluation, lastPromotionTime and the
  conditions Resolved, Cached, Evaluated, Promoted (``kube.rollout_status``);
- the controller owns observedGeneration, endpoint, replicas, lastRetryToken, reResolve and the
  conditions Ready, Degraded, ModelReady (``kube.controller_status``).

With server-side apply a manager *removes* a field it owned by leaving it out of its next
apply, so every apply carries the owner's whole subset that should persist: read the
DecisionModel, build the subset from what it holds with the update laid over (a pure builder),
apply. The read and the apply are tied by ``metadata.resourceVersion``: a write in between makes
the apply fail with 409 and it is rebuilt from a fresh read, never written back stale.

Conditions of both owners go through :func:`merge_conditions`, on top of
``decisionmodel.api.conditions.set_condition`` (lastTransitionTime moves only when status does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from decisionmodel.api.conditions import condition, set_condition
from decisionmodel.api.status import Condition
from decisionmodel.rollout.contracts import ConditionUpdate, DMRef
from kube.client import STATUS_APPLY_ATTEMPTS, Kube, conflict_backoff
from kube.errors import Conflict, KubeError

log = logging.getLogger("dmrollout.status")

# The API server's cap on a condition message (metav1.Condition).
MAX_CONDITION_MESSAGE: Final = 32768

# (status as read, its generation, now) → the owner's subset to apply, or None: no write.
Builder = Callable[[Mapping[str, Any], int, datetime], dict[str, Any] | None]


def wire_time(now: datetime) -> str:
    """metav1.Time: RFC 3339, whole seconds, UTC."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> datetime:
    return datetime.now(UTC)


def merge_conditions(
    current: Iterable[Any],
    owned: frozenset[str],
    wanted: Iterable[ConditionUpdate],
    generation: int,
    now: datetime,
    generations: Mapping[str, int] | None = None,
) -> list[Condition]:
    """The owner's conditions as recorded, with ``wanted`` set on them (others' are left out).

    Each wanted condition says it describes ``generation``, unless ``generations`` names an
    older one for its type (the controller's Ready while the spec is not what serves).
    A malformed recorded condition is dropped (the update, or nothing, replaces it); a wanted
    condition of a type the owner does not hold is the caller's to filter.
    """
    merged: list[Condition] = []
    for raw in current:
        if not isinstance(raw, Mapping) or raw.get("type") not in owned:
            continue
        try:
            merged.append(Condition.model_validate(raw))
        except ValueError:
            continue
    for want in wanted:
        new = condition(
            want.type,
            want.status,
            want.reason,
            want.message[:MAX_CONDITION_MESSAGE],
            observed_generation=(generations or {}).get(want.type, generation),
        )
        merged = set_condition(merged, new, now)
    return merged


async def apply_owned_status(
    kube: Kube,
    dm: DMRef,
    build: Builder,
    field_manager: str,
    read: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Read, build, apply conditionally; (status before, DecisionModel after) as the server
    accepted it, or None when the builder asks for no write.

    ``read``: the DecisionModel as the caller last saw it (the controller's cache), built from
    instead of a first read, and what the caller judged the update from (the steady phase and
    conditions). A 409 then voids the judgement, not only the read: nothing is written (None),
    and the change that caused the 409 triggers the next reconcile, which judges again.
    Rebuilding on a fresh read would lay the stale judgement over the newer status (CI: a
    rollback's RolledBack overwritten by Degraded judged from the revision it had just
    switched away from). Without ``read``, a 409 re-reads and rebuilds.
    """
    for attempt in range(1, STATUS_APPLY_ATTEMPTS + 1):
        obj = read if attempt == 1 and read is not None else await Kube.run(kube.get_dm, dm)
        meta = obj["metadata"]
        current: dict[str, Any] = obj.get("status") or {}
        status = build(current, int(meta.get("generation") or 0), utcnow())
        if status is None:
            return None
        try:
            result: dict[str, Any] = await Kube.run(
                kube.apply_dm_status,
                dm,
                status,
                field_manager=field_manager,
                resource_version=meta["resourceVersion"],
            )
        except Conflict:
            if read is not None:
                log.info(
                    "status of %s/%s changed since it was judged; the next reconcile judges it",
                    dm.namespace,
                    dm.name,
                )
                return None
            if attempt == STATUS_APPLY_ATTEMPTS:
                raise
            log.info("status of %s/%s changed while applying; re-reading", dm.namespace, dm.name)
            await conflict_backoff(attempt)
            continue
        return current, result
    raise AssertionError("unreachable")


async def emit_event(
    kube: Kube, dm: DMRef, reason: str, message: str, event_type: str = "Normal"
) -> None:
    """Best effort, as Kubernetes event recorders are: a refused Event never fails the step
    whose status was already written."""
    try:
        await Kube.run(kube.emit_event, dm, reason, message, event_type)
    except KubeError as e:
        log.warning("event %s on %s refused: %s", reason, dm.name, e.status)

"""The controller's share of DecisionModel status, by server-side apply.

The controller owns observedGeneration, endpoint, replicas, lastRetryToken and the conditions
Ready, Degraded and ModelReady (field manager ``dmrollout-controller``); the rollout's
activities own the rest (``activities.status``). ``phase`` has one owner, the rollout's field
manager: when the controller decides a steady-state phase (Ready / Degraded / Pending while
queued) it writes it through the rollout's own status code, so no apply ever drops a phase the
other side wrote.

As on the rollout side, each apply carries the whole controller-owned subset, built from a fresh
read and conditional on its resourceVersion (409 → re-read and rebuild).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from kubernetes.client.rest import ApiException

from activities.kube import (
    CONTROLLER_FIELD_MANAGER,
    STATUS_APPLY_ATTEMPTS,
    Kube,
    conflict_backoff,
)
from workflows.contracts import DMRef

log = logging.getLogger("dmrollout.controller.status")

CONTROLLER_FIELDS: Final = ("observedGeneration", "endpoint", "replicas", "lastRetryToken")
CONTROLLER_CONDITIONS: Final = frozenset({"Ready", "Degraded", "ModelReady"})
APPLY_ATTEMPTS: Final = STATUS_APPLY_ATTEMPTS


@dataclass(frozen=True)
class Cond:
    type: str
    status: str
    reason: str
    message: str = ""


@dataclass
class ControllerStatus:
    """What the controller wants its fields to say; None = leave as recorded."""

    observed_generation: int | None = None
    endpoint: str | None = None
    replicas: dict[str, int] | None = None
    last_retry_token: str | None = None
    conditions: list[Cond] = field(default_factory=list)


def _time(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_controller_status(
    current: Mapping[str, Any], want: ControllerStatus, generation: int, now: datetime
) -> dict[str, Any]:
    """The full controller-owned subset: recorded values with ``want`` laid over. Pure."""
    owned: dict[str, Any] = {
        k: copy.deepcopy(current[k]) for k in CONTROLLER_FIELDS if current.get(k) is not None
    }
    if want.observed_generation is not None:
        owned["observedGeneration"] = want.observed_generation
    if want.endpoint is not None:
        owned["endpoint"] = want.endpoint
    if want.replicas is not None:
        owned["replicas"] = dict(want.replicas)
    if want.last_retry_token is not None:
        owned["lastRetryToken"] = want.last_retry_token
    existing = {
        c["type"]: c
        for c in current.get("conditions") or []
        if c.get("type") in CONTROLLER_CONDITIONS
    }
    merged = {k: copy.deepcopy(v) for k, v in existing.items()}
    for cond in want.conditions:
        old = existing.get(cond.type)
        keep = (
            old is not None and old.get("status") == cond.status and old.get("lastTransitionTime")
        )
        merged[cond.type] = {
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason,
            "message": cond.message[:32768],
            "observedGeneration": generation,
            "lastTransitionTime": old["lastTransitionTime"] if keep and old else _time(now),
        }
    if merged:
        owned["conditions"] = [merged[k] for k in sorted(merged)]
    return owned


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def apply_controller_status(
    kube: Kube,
    dm: DMRef,
    want: ControllerStatus,
    clock: Callable[[], datetime] = _utcnow,
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Apply; (status before, status after) as the server accepted it, or None when nothing
    changed (no write: a steady DecisionModel costs no API write per re-check)."""
    for attempt in range(1, APPLY_ATTEMPTS + 1):
        obj = await Kube.run(kube.get_dm, dm)
        current = obj.get("status") or {}
        generation = int(obj["metadata"].get("generation") or 0)
        status = build_controller_status(current, want, generation, clock())
        before = {k: current.get(k) for k in CONTROLLER_FIELDS if current.get(k) is not None}
        before_conds = [
            c for c in current.get("conditions") or [] if c.get("type") in CONTROLLER_CONDITIONS
        ]
        if before_conds:
            before["conditions"] = sorted(before_conds, key=lambda c: c["type"])
        if before == status:
            return None
        try:
            result = await Kube.run(
                kube.apply_dm_status,
                dm,
                status,
                field_manager=CONTROLLER_FIELD_MANAGER,
                resource_version=obj["metadata"]["resourceVersion"],
            )
        except ApiException as e:
            if e.status != 409 or attempt == APPLY_ATTEMPTS:
                raise
            log.info("status of %s/%s changed while applying; re-reading", dm.namespace, dm.name)
            await conflict_backoff(attempt)
            continue
        return current, result.get("status") or {}
    raise AssertionError("unreachable")

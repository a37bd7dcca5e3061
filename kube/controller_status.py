"""The controller's share of DecisionModel status: the pure builder and its writer.

The controller owns observedGeneration, endpoint, replicas, lastRetryToken, reResolve, rollbackTo
and the conditions Ready, Degraded and ModelReady (field manager ``dmrollout-controller``),
written through ``kube.status`` like the rollout's share (``kube.rollout_status``). ``phase`` has
one owner, the rollout's field manager: when the controller decides a steady-state phase (Ready /
Degraded / Pending while queued) it writes it through the rollout's writer, so no apply ever drops
a phase the other side wrote.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from decisionmodel.rollout.contracts import ConditionUpdate, DMRef
from decisionmodel.vocabulary import (
    CONTROLLER_CONDITION_TYPES,
    CONTROLLER_WHILE_HELD,
    ConditionStatus,
    ConditionType,
    Reason,
    StatusKey,
)
from kube.client import CONTROLLER_FIELD_MANAGER, Kube
from kube.status import apply_owned_status, merge_conditions

CONTROLLER_FIELDS: Final = (
    StatusKey.OBSERVED_GENERATION,
    "endpoint",
    "replicas",
    StatusKey.LAST_RETRY_TOKEN,
    "selector",
    StatusKey.RE_RESOLVE,
    StatusKey.ROLLBACK_TO,
)


def Cond(
    type_: ConditionType,
    status: ConditionStatus,
    reason: Reason | str,
    message: str = "",
) -> ConditionUpdate:
    """A condition the controller wants: ConditionUpdate spelt positionally, from the
    vocabulary only (the names are typed, so a literal does not pass mypy)."""
    return ConditionUpdate(type=type_, status=status, reason=reason, message=message)


@dataclass
class ControllerStatus:
    """What the controller wants its fields to say; None = leave as recorded."""

    observed_generation: int | None = None
    endpoint: str | None = None
    replicas: dict[str, int] | None = None
    last_retry_token: str | None = None
    selector: str | None = None
    # status.reResolve (controller.reconciler.re_resolve), in wire form; or removed.
    re_resolve: dict[str, Any] | None = None
    clear_re_resolve: bool = False
    # status.rollbackTo as wire dict ({"revision", "generation"}); {} removes it, None leaves it.
    rollback_to: dict[str, Any] | None = None
    conditions: list[ConditionUpdate] = field(default_factory=list)
    # Conditions held only while wanted this time (beyond CONTROLLER_WHILE_HELD): e.g. the
    # Degraded of a failed first rollout, gone once a retry runs.
    while_held: frozenset[str] = frozenset()
    # The observedGeneration of a wanted condition that describes an older generation than
    # metadata.generation (by type; the others describe the current one): Ready while the
    # spec is not what serves (controller.reconciler.served).
    generations: dict[str, int] = field(default_factory=dict)


def _owned_conditions(current: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return sorted(
        (
            c
            for c in current.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") in CONTROLLER_CONDITION_TYPES
        ),
        key=lambda c: str(c["type"]),
    )


def build_controller_status(
    current: Mapping[str, Any], want: ControllerStatus, generation: int, now: datetime
) -> dict[str, Any]:
    """The full controller-owned subset: recorded values with ``want`` laid over. Pure."""
    owned: dict[str, Any] = {
        k: copy.deepcopy(current[k]) for k in CONTROLLER_FIELDS if current.get(k) is not None
    }
    if want.observed_generation is not None:
        owned[StatusKey.OBSERVED_GENERATION] = want.observed_generation
    if want.endpoint is not None:
        owned["endpoint"] = want.endpoint
    if want.replicas is not None:
        owned["replicas"] = dict(want.replicas)
    if want.last_retry_token is not None:
        owned[StatusKey.LAST_RETRY_TOKEN] = want.last_retry_token
    if want.selector is not None:
        owned["selector"] = want.selector
    if want.clear_re_resolve:
        owned.pop(StatusKey.RE_RESOLVE, None)
    if want.re_resolve is not None:
        owned[StatusKey.RE_RESOLVE] = dict(want.re_resolve)
    if want.rollback_to:
        owned[StatusKey.ROLLBACK_TO] = dict(want.rollback_to)
    elif want.rollback_to is not None:
        owned.pop(StatusKey.ROLLBACK_TO, None)
    # A while-held condition is carried over (its transition time kept) only when wanted again.
    wanted = {c.type for c in want.conditions}
    carried = CONTROLLER_CONDITION_TYPES - ((CONTROLLER_WHILE_HELD | want.while_held) - wanted)
    merged = merge_conditions(
        _owned_conditions(current),
        frozenset(carried),
        want.conditions,
        generation,
        now,
        want.generations,
    )
    if merged:
        owned["conditions"] = sorted((c.to_wire() for c in merged), key=lambda c: c["type"])
    return owned


def recorded_controller_status(current: Mapping[str, Any]) -> dict[str, Any]:
    """What the controller's share of ``current`` is now, in the form the builder returns."""
    before = {k: current.get(k) for k in CONTROLLER_FIELDS if current.get(k) is not None}
    conditions = _owned_conditions(current)
    if conditions:
        before["conditions"] = conditions
    return before


async def apply_controller_status(
    kube: Kube, dm: DMRef, want: ControllerStatus, read: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Apply; (status before, status after) as the server accepted it, or None when nothing
    changed (no write: a steady DecisionModel costs no API write per re-check). ``read``: the
    DecisionModel as last seen (no read when nothing changed; kube.status.apply_owned_status)."""

    def build(current: Mapping[str, Any], generation: int, now: datetime) -> dict[str, Any] | None:
        stamped = bool(want.conditions) or want.observed_generation is not None
        if stamped and dm.generation and generation != dm.generation:
            # The spec changed since ``want`` was made (a 409 re-read found a newer generation):
            # stamping that generation on it would claim the new spec's state (Ready=True at the
            # new generation while the old stable serves: kubectl wait returned 0 on CI). The
            # reconcile the spec change triggers writes the new generation's status.
            return None
        status = build_controller_status(current, want, generation, now)
        return None if status == recorded_controller_status(current) else status

    applied = await apply_owned_status(kube, dm, build, CONTROLLER_FIELD_MANAGER, read)
    if applied is None:
        return None
    before, after = applied
    return before, after.get("status") or {}

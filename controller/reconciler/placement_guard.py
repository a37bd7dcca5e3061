"""The placement guard in the controller: a refused spec starts nothing and says why at once.

Before a rollout starts, the live spec's placement and replicas are checked against the
operator's policy (``decisionmodel.engine.placement``). While anything is refused the controller
starts
no rollout for the spec (and cancels one running for it), so no Pod is ever created with the
refused placement, and shows ``Degraded=True`` reason ``PlacementRefused`` naming each refused
field, its value and the operator setting that would allow it. The stable revision keeps
serving as recorded (with a stable the phase follows its health, as for CacheNotShareable;
without one it is Failed). Nothing is recorded as a failed revision: once the spec or the
operator's setting is fixed, the next reconcile starts the rollout by itself.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from decisionmodel.api import DecisionModel
from decisionmodel.engine.placement import PlacementPolicy, check_placement, refusal_message
from decisionmodel.rollout.contracts import ConditionUpdate
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason
from kube.controller_status import Cond

if TYPE_CHECKING:
    from controller.reconciler.decide import Decision


def placement_refusal(dm: DecisionModel, policy: PlacementPolicy) -> str | None:
    """The condition message when the spec is refused, else None."""
    spec = dm.spec
    refusals = check_placement(spec.scheduling.to_wire(), spec.replicas, policy)
    return refusal_message(refusals) if refusals else None


def refused_decision(decision: Decision) -> Decision:
    """The decision for a refused spec: start nothing, and stop a rollout running for it. A
    spec at the stable revision starts nothing anyway (only its replicas can be refused, and the
    steady state does not scale past the maximum)."""
    if decision.at_stable:
        return decision
    waits = decision.start or decision.waiting  # the target is not running yet
    running = (decision.target_id,) if decision.target_id and not waits else ()
    return dataclasses.replace(
        decision,
        start=False,
        waiting=(),
        target_id=None,
        consume_retry=None,
        cancel=decision.cancel + running,
        why="placement refused",
    )


def show_refusal(
    conditions: list[ConditionUpdate], message: str, has_stable: bool
) -> list[ConditionUpdate]:
    """Degraded=True PlacementRefused replaces the Degraded the health gave; without a stable,
    Ready=False says it too (with one, Ready keeps saying whether the stable serves)."""
    kept = [c for c in conditions if c.type != ConditionType.DEGRADED]
    if not has_stable:
        kept = [c for c in kept if c.type != ConditionType.READY]
        kept.append(
            Cond(ConditionType.READY, ConditionStatus.FALSE, Reason.PLACEMENT_REFUSED, message)
        )
    else:
        message += "; the stable revision keeps serving"
    kept.append(
        Cond(ConditionType.DEGRADED, ConditionStatus.TRUE, Reason.PLACEMENT_REFUSED, message)
    )
    return kept


def clear_refusal(conditions: list[ConditionUpdate], dm: DecisionModel) -> list[ConditionUpdate]:
    """The refusal is gone: a Degraded the reconcile does not compute (no stable yet) would keep
    saying PlacementRefused, since the controller carries its conditions over; say it is over."""
    if not already_shown(dm) or any(c.type == ConditionType.DEGRADED for c in conditions):
        return conditions
    return [
        *conditions,
        Cond(ConditionType.DEGRADED, ConditionStatus.FALSE, Reason.AS_EXPECTED, ""),
    ]


def already_shown(dm: DecisionModel) -> bool:
    """The status already shows the refusal (the Warning Event is emitted once per refusal)."""
    for cond in dm.status.conditions if dm.status else []:
        if cond.type == ConditionType.DEGRADED:
            return cond.reason == Reason.PLACEMENT_REFUSED
    return False

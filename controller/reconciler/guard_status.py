"""A guard holding a rollout's step, shown where seed 001 says (issue 22, point 3).

The step's own condition (Resolved, Cached, Evaluated or Promoted False with the guard's
reason) is written by the activity at once (``kube.rollout_status.show_guard``). Seed 001's
table puts the reason on Ready and Degraded too, where alerts and scripts read it, and for the
Secrets the phase: "the API key and download token report phase Degraded, Ready=False, reason
SecretNotAllowed; a dataset Secret is held in Evaluating". The controller derives that here from
the step condition of the spec's generation, while the rollout is in flight. Pure.
"""

from __future__ import annotations

from typing import Final

from decisionmodel.api.status import Condition
from decisionmodel.rollout.contracts import ConditionUpdate
from decisionmodel.vocabulary import (
    GUARD_REASONS,
    ConditionStatus,
    ConditionType,
    Phase,
    Reason,
)
from kube.controller_status import Cond

STEP_CONDITIONS: Final = (
    ConditionType.RESOLVED,
    ConditionType.CACHED,
    ConditionType.EVALUATED,
    ConditionType.PROMOTED,
)
# Seed 001: these put the DecisionModel in phase Degraded while they hold a step (other than
# the evaluation, which is held in Evaluating).
SECRET_GUARDS: Final = frozenset(
    {Reason.SECRET_NOT_ALLOWED, Reason.API_KEY_INVALID, Reason.SECRET_NOT_FOUND}
)


def held_by_guard(conditions: list[Condition], generation: int) -> Condition | None:
    """The step condition a guard holds for this spec generation, if any."""
    for c in conditions:
        if (
            c.type in STEP_CONDITIONS
            and c.status == ConditionStatus.FALSE
            and c.reason in GUARD_REASONS
            and c.observed_generation == generation
        ):
            return c
    return None


def guard_shown(conditions: list[Condition]) -> bool:
    """A guard shows on a step condition, of whichever spec generation: the run status.rollout
    names may still be held by it (its phase then the guard's, Degraded), though the spec has
    changed since."""
    return any(
        c.type in STEP_CONDITIONS
        and c.status == ConditionStatus.FALSE
        and c.reason in GUARD_REASONS
        for c in conditions
    )


def show_held(conditions: list[ConditionUpdate], held: Condition) -> list[ConditionUpdate]:
    """Ready=False and Degraded=True with the guard's reason and its message (the fix)."""
    message = f"{held.type}: {held.message}"
    kept = [c for c in conditions if c.type not in (ConditionType.READY, ConditionType.DEGRADED)]
    return [
        *kept,
        Cond(ConditionType.READY, ConditionStatus.FALSE, held.reason, message),
        Cond(ConditionType.DEGRADED, ConditionStatus.TRUE, held.reason, message),
    ]


def held_phase(held: Condition) -> Phase | None:
    """Degraded for a Secret guard outside the evaluation; None: the step's phase stands."""
    if held.reason in SECRET_GUARDS and held.type != ConditionType.EVALUATED:
        return Phase.DEGRADED
    return None

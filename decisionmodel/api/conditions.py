"""The one condition helper every status writer uses: build, set (as meta.SetStatusCondition
does), get, remove. The words themselves are in ``decisionmodel.vocabulary``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from decisionmodel.api.status import Condition
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason


def condition(
    type_: ConditionType | str,
    status: bool | ConditionStatus,
    reason: Reason | str,
    message: str = "",
    observed_generation: int | None = None,
) -> Condition:
    """Build a condition; `lastTransitionTime` is filled in by `set_condition`."""
    if isinstance(status, bool):
        status = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    return Condition(
        type=str(type_),
        status=status,
        reason=str(reason),
        message=message,
        observed_generation=observed_generation,
    )


def _utc_seconds(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    # metav1.Time has whole-second resolution; writing less keeps reads and writes equal.
    return now.astimezone(UTC).replace(microsecond=0)


def set_condition(conditions: list[Condition], new: Condition, now: datetime) -> list[Condition]:
    """Return `conditions` with `new` set, leaving the input list untouched.

    As meta.SetStatusCondition does: lastTransitionTime moves to `now` only when the status
    changes (or the condition is new); a changed reason, message or observedGeneration alone
    keeps the old time. The position of an existing condition is kept so writes diff cleanly.
    """
    now = _utc_seconds(now)
    result: list[Condition] = []
    found = False
    for existing in conditions:
        if existing.type != new.type:
            result.append(existing)
            continue
        found = True
        keep = existing.status == new.status and existing.last_transition_time is not None
        when = existing.last_transition_time if keep else now
        result.append(new.model_copy(update={"last_transition_time": when}))
    if not found:
        result.append(new.model_copy(update={"last_transition_time": now}))
    return result


def get_condition(conditions: Iterable[Condition], type_: ConditionType | str) -> Condition | None:
    for existing in conditions:
        if existing.type == type_:
            return existing
    return None


def is_condition_true(conditions: Iterable[Condition], type_: ConditionType | str) -> bool:
    found = get_condition(conditions, type_)
    return found is not None and found.status == ConditionStatus.TRUE


def remove_condition(conditions: list[Condition], type_: ConditionType | str) -> list[Condition]:
    return [c for c in conditions if c.type != type_]

"""Which generation Ready describes (issue 34). Pure.

``kubectl wait --for=condition=Ready`` (k8s.io/kubectl/pkg/cmd/wait, condition.go) takes a
condition whose observedGeneration (the condition's, else status.observedGeneration) is below
metadata.generation as not met yet. Ready keeps seed 001's meaning, "the stable revision
serves", and its observedGeneration says whose spec that is: the current generation's only
once that spec serves (promoted, or an in-place change applied to the stable). While the spec
is not what serves (a rollout in flight, queued, held by a guard, rolled back, refused), Ready
and ModelReady (the stable's Pods) keep the generation the stable last served, so the wait
goes on and never returns 0 on a rollback. status.observedGeneration stays the current
generation: kstatus reads it with Reconciling and Stalled (in progress, current, failed).
"""

from __future__ import annotations

from typing import Final

from decisionmodel.api.conditions import get_condition
from decisionmodel.api.status import DecisionModelStatus
from decisionmodel.vocabulary import ConditionType

STABLE_CONDITIONS: Final = (ConditionType.READY, ConditionType.MODEL_READY)


def served_generations(
    status: DecisionModelStatus | None, generation: int, at_stable: bool
) -> dict[str, int]:
    """The observedGeneration of the conditions that describe the stable, by type, when it is
    older than ``generation``. Empty: they describe the current generation (its spec serves,
    or nothing serves yet and Ready=False says so of it)."""
    if at_stable or status is None or status.stable_revision is None:
        return {}
    ready = get_condition(status.conditions, ConditionType.READY)
    recorded = ready.observed_generation if ready is not None else None
    # Never the current generation: a Ready written before this rule (at the rollout's first
    # reconcile) claims it, and a spec change since may have been applied to nothing yet.
    before = generation - 1
    served = before if recorded is None else min(recorded, before)
    return {str(t): max(served, 0) for t in STABLE_CONDITIONS}

"""The states of a pipeline's stages and the rules that move them (issue 25).

A stage waits for its dependencies (each Promoted), then for its soak (the revision served that
long in every dependency: from the latest of their promotion times), then for a change window,
then for an approval when it is Manual, then rolls out in its cluster. A failed, aborted or
blocked dependency blocks it for good. Pure: the pipeline workflow holds the state and asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

from pydantic import BaseModel, ConfigDict

from decisionmodel.api.pipeline import Stage
from decisionmodel.vocabulary import StageReason, StageState

ENDED: Final = frozenset(
    {
        StageState.PROMOTED,
        StageState.FAILED,
        StageState.BLOCKED,
        StageState.ABORTED,
        StageState.SUPERSEDED,
    }
)


class StageProgress(BaseModel):
    """One stage's state in a pipeline run, with the reason a user reads and, once it rolled
    out, its cluster's rollout (workflow ID) and verdict time."""

    model_config = ConfigDict(frozen=True)

    state: StageState = StageState.PENDING
    reason: str = StageReason.WAITING_FOR_DEPENDENCIES
    message: str = ""
    rollout_workflow_id: str | None = None
    since: datetime | None = None
    promoted_at: datetime | None = None
    rollout_namespace: str | None = None  # the cluster's Temporal namespace of that rollout


def blocked_by(stage: Stage, progress: Mapping[str, StageProgress]) -> str | None:
    """The dependency that keeps ``stage`` from ever starting, if one has ended without
    promoting."""
    for d in stage.depends_on:
        state = progress[d].state
        if state in ENDED and state != StageState.PROMOTED:
            return d
    return None


def dependencies_promoted(stage: Stage, progress: Mapping[str, StageProgress]) -> bool:
    return all(progress[d].state == StageState.PROMOTED for d in stage.depends_on)


def soaked_at(stage: Stage, progress: Mapping[str, StageProgress]) -> datetime | None:
    """When the soak ends: the latest dependency promotion plus the soak (None: no
    dependency, or soak 0: nothing to wait for)."""
    times = [progress[d].promoted_at for d in stage.depends_on]
    known = [t for t in times if t is not None]
    if not known or not stage.soak_time:
        return None
    return max(known) + stage.soak_time


def downstream(stages: list[Stage], name: str) -> list[str]:
    """Every stage that depends on ``name``, directly or not, in spec order."""
    found: set[str] = {name}
    changed = True
    while changed:
        changed = False
        for s in stages:
            if s.name not in found and found.intersection(s.depends_on):
                found.add(s.name)
                changed = True
    return [s.name for s in stages if s.name in found and s.name != name]


def verdict_token(state: str, rollout_workflow_id: str | None) -> str:
    """A stage's verdict as an approval names it: ``Promoted@<its cluster's rollout>``."""
    return f"{state}@{rollout_workflow_id or '-'}"


def upstream_verdicts(stage: Stage, progress: Mapping[str, StageProgress]) -> dict[str, str]:
    """The verdicts of ``stage``'s dependencies, as an approval binds them."""
    return {
        d: verdict_token(progress[d].state, progress[d].rollout_workflow_id)
        for d in stage.depends_on
    }

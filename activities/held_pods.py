"""Showing, while a step waits for Pods, that they cannot start (decisionmodel.rollout.
pod_trouble): on the step's condition at the first look that sees it, again when what the
scheduler or kubelet says changes, and back to the step's own reason once it clears."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.pod_trouble import pod_trouble
from decisionmodel.vocabulary import ConditionType, Phase, Reason
from kube.client import Kube
from kube.rollout_status import show_guard


class HeldPods:
    """One per activity attempt: writes only when what it shows changes."""

    def __init__(
        self,
        kube: Kube,
        dm: DMRef,
        condition: ConditionType,
        phase: Phase,
        *,
        what: str,
        deadline: str,
        going_on: tuple[Reason, str],
    ) -> None:
        self.kube, self.dm, self.condition, self.phase = kube, dm, condition, phase
        self.what, self.deadline, self.going_on = what, deadline, going_on
        self._shown: tuple[Reason, tuple[str, ...]] | None = None
        self._warned = False

    async def look(self, pods: list[dict[str, Any]]) -> None:
        found = pod_trouble(pods)
        key = (found.reason, found.pods) if found is not None else None
        if key == self._shown:
            return
        if found is not None:
            # One Warning Event per attempt; the condition follows every change.
            first = not self._warned and activity.in_activity()
            message = found.message(self.what, self.deadline)
            await show_guard(
                self.kube, self.dm, self.condition, found.reason, message, first, self.phase
            )
            self._warned = True
        elif self._shown is not None:
            reason, message = self.going_on
            await show_guard(self.kube, self.dm, self.condition, reason, message, False, self.phase)
        self._shown = key

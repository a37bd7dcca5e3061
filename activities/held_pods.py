"""Showing on a step's condition why it waits, while it waits: Pods that cannot start
(decisionmodel.rollout.pod_trouble, :class:`HeldPods`), or anything else a step waits out
(:class:`WaitShown`). Written at the first look that sees it, again when what it says changes,
and back to the step's own reason once it clears; one Warning Event per attempt."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from temporalio import activity

from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.pod_trouble import pod_trouble
from decisionmodel.vocabulary import ConditionType, Phase, Reason
from kube.client import Kube
from kube.rollout_status import show_guard


class WaitShown:
    """One per activity attempt: writes only when what it shows changes."""

    def __init__(
        self,
        kube: Kube,
        dm: DMRef,
        condition: ConditionType,
        phase: Phase,
        going_on: tuple[Reason, str],
    ) -> None:
        self.kube, self.dm, self.condition, self.phase = kube, dm, condition, phase
        self.going_on = going_on
        self._shown: Hashable | None = None
        self._warned = False

    async def show(self, reason: Reason, message: str, key: Hashable) -> None:
        """The wait, unless ``key`` (what identifies it) is what shows already."""
        if key == self._shown:
            return
        first = not self._warned and activity.in_activity()
        await show_guard(self.kube, self.dm, self.condition, reason, message, first, self.phase)
        self._warned = True
        self._shown = key

    async def clear(self) -> None:
        """The wait is over: the step's own reason again (no write when nothing was shown)."""
        if self._shown is None:
            return
        reason, message = self.going_on
        await show_guard(self.kube, self.dm, self.condition, reason, message, False, self.phase)
        self._shown = None


class HeldPods:
    """Pods of the step that cannot start, as the scheduler or the kubelet says."""

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
        self.shown = WaitShown(kube, dm, condition, phase, going_on)
        self.what, self.deadline = what, deadline

    async def look(self, pods: list[dict[str, Any]]) -> None:
        found = pod_trouble(pods)
        if found is None:
            await self.shown.clear()
            return
        message = found.message(self.what, self.deadline)
        await self.shown.show(found.reason, message, (found.reason, found.pods))

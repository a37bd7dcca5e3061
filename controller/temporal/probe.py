"""Whether Temporal answers, asked once every few seconds whatever the size of the fleet.

An idle DecisionModel makes no call to Temporal (the controller reads which rollout runs from
status), so without this an outage would show only on the DecisionModels that have a rollout in
flight. One cheap, bounded call (GetSystemInfo) per period keeps TemporalReachable true for all
of them: 1/15 requests per second at 10 or 10,000 DecisionModels. A change wakes every
DecisionModel once, so the condition shows (and goes) within a reconcile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

from controller.temporal.rollouts import RPC_TIMEOUT, Rollouts, TemporalUnavailable

log = logging.getLogger("dmrollout.controller.temporal")

PROBE_SECONDS: Final = 15.0


class TemporalProbe:
    def __init__(
        self,
        rollouts: Rollouts,
        on_change: Callable[[], None] | None = None,
        period: float = PROBE_SECONDS,
    ) -> None:
        self.rollouts = rollouts
        self.on_change = on_change
        self.period = period
        self.down: str | None = None  # why Temporal is unreachable; None while it answers

    async def check(self) -> None:
        """One probe; calls ``on_change`` when the answer differs from the last one."""
        was = self.down
        try:
            async with self.rollouts.reachable():
                await self.rollouts.client.workflow_service.get_system_info(
                    GetSystemInfoRequest(), timeout=RPC_TIMEOUT
                )
            self.down = None
        except TemporalUnavailable as e:
            self.down = str(e)
        if (was is None) != (self.down is None):
            log.warning("%s", self.down or "Temporal answers again")
            if self.on_change is not None:
                self.on_change()

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.period)

"""Whether Temporal answers, and accepts this controller, asked every few seconds whatever the
size of the fleet.

An idle DecisionModel makes no call to Temporal (the controller reads which rollout runs from
status), so without this an outage would show only on the DecisionModels that have a rollout in
flight. One cheap, bounded call per period keeps TemporalReachable true for all of them: 1/15
requests per second at 10 or 10,000 DecisionModels. The call is the namespace's own
(DescribeNamespace): the server authorizes it like every rollout call, where GetSystemInfo is
answered without a credential, so an expired API key or certificate, or an identity without the
namespace, shows here too. A change wakes every DecisionModel once, so the condition shows (and
goes) within a reconcile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

from controller.temporal.errors import TemporalUnavailable
from controller.temporal.rollouts import Rollouts
from controller.temporal.runs import RPC_TIMEOUT
from decisionmodel.vocabulary import Reason

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
        self.down: str | None = None  # why Temporal cannot be used; None while it answers
        self.reason: Reason = Reason.TEMPORAL_UNAVAILABLE  # which, while ``down``
        # When the loop last finished a probe (monotonic): the liveness probe reads it.
        self.last_round = time.monotonic()

    async def check(self) -> None:
        """One probe; calls ``on_change`` when the answer differs from the last one."""
        was = (self.down is None, self.reason)
        namespace = getattr(self.rollouts.client, "namespace", "default")
        try:
            async with self.rollouts.reachable():
                await self.rollouts.client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace=namespace), timeout=RPC_TIMEOUT
                )
            self.down = None
        except TemporalUnavailable as e:
            self.down, self.reason = str(e), e.reason
        if was != (self.down is None, self.reason):
            log.warning("%s", self.down or "Temporal answers again")
            if self.on_change is not None:
                self.on_change()

    async def run(self) -> None:
        """Probe every ``period``, whatever one probe raises: a probe that ended would leave
        every idle DecisionModel's condition as it last was, with nothing to say so."""
        while True:
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("probing Temporal failed; probing again in %.0f s", self.period)
            self.last_round = time.monotonic()
            await asyncio.sleep(self.period)

    def alive(self, now: float | None = None) -> bool:
        """False when no probe finished for three periods and a bound (the loop is stuck)."""
        since = (now if now is not None else time.monotonic()) - self.last_round
        return since < 3 * self.period + RPC_TIMEOUT.total_seconds()

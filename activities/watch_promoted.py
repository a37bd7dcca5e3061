"""watch_promoted: the post-promotion watch (``spec.rollout.postPromotionWatch``).

For a window after the Service switched to the new stable, its Pods are inspected every period
the way promote re-checks a held candidate (``/api/ps``: digest, device, pin) and their gate is
set from the verdict. When fewer than ``replicas`` Pods pass on ``strikes`` checks in a row, the
watch ends with ``held=False`` and the workflow switches the Service back to the previous
revision, which is still running (its deletion waits for the watch). One failed check is not a
verdict: a Pod being replaced misses one.

Resumable: the window's end travels in the heartbeat details, so an attempt on another worker
(after a crash) watches what is left of the window, not a fresh one.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity

from activities.pod_inspect import inspect_pod
from activities.typed_errors import typed_errors
from decisionmodel.rollout.contracts import WATCH_PROMOTED, WatchPromotedInput, WatchPromotedResult
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.pod_gate import gate_event, probe_eligible, set_gate, state_from_verdict
from kube.secrets import SecretReader

# Longest quiet stretch between heartbeats, as a share of the heartbeat timeout.
HEARTBEAT_SHARE = 3


class WatchActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.secrets = SecretReader(kube)

    @activity.defn(name=WATCH_PROMOTED)
    async def watch_promoted(self, inp: WatchPromotedInput) -> WatchPromotedResult:
        async with typed_errors():
            ends = window_end(inp, activity.info().heartbeat_details, datetime.now(UTC))
            api_key = await self.secrets.api_key(inp.dm.namespace, inp.api_key)
            strikes = checks = 0
            while True:
                passing, lost = await self._check(inp, api_key)
                checks += 1
                strikes = strikes + 1 if passing < inp.replicas else 0
                if strikes >= inp.strikes:
                    return WatchPromotedResult(
                        held=False, checks=checks, message=_failed(inp, passing, lost, strikes)
                    )
                if datetime.now(UTC) >= ends:
                    return WatchPromotedResult(held=True, checks=checks)
                await self._wait(min(ends, datetime.now(UTC) + _period(inp)), ends)

    async def _check(self, inp: WatchPromotedInput, api_key: str | None) -> tuple[int, list[str]]:
        """Inspect every Pod of the new stable that can be probed; set each one's gate."""
        dm, record = inp.dm, inp.stable
        pods = await Kube.run(self.kube.list_revision_pods, dm.namespace, dm.name, record.hash)
        passing, lost = 0, []
        registry = self.settings.ollaya_registry
        for pod in (p for p in pods if probe_eligible(p)):
            found = await inspect_pod(pod, record.model, record, api_key, registry)
            if await set_gate(self.kube, pod, state_from_verdict(found)):
                await gate_event(self.kube, dm, pod, found)
            if found.ready:
                passing += 1
            else:
                lost.append(f"{_name(pod)}: {found.reason} ({found.message[:200]})")
        return passing, lost

    async def _wait(self, until: datetime, ends: datetime) -> None:
        """Sleep until ``until``, heartbeating (with the window's end) often enough."""
        timeout = activity.info().heartbeat_timeout or timedelta(seconds=30)
        step = max(timeout.total_seconds() / HEARTBEAT_SHARE, 0.5)
        while (left := (until - datetime.now(UTC)).total_seconds()) > 0:
            activity.heartbeat(ends.isoformat())
            await asyncio.sleep(min(step, left))
        activity.heartbeat(ends.isoformat())


def window_end(inp: WatchPromotedInput, details: Any, now: datetime) -> datetime:
    """The window's end: as the previous attempt recorded it, else ``window_seconds`` from now."""
    if details:
        try:
            return datetime.fromisoformat(str(details[0]))
        except ValueError:
            pass  # not ours (an older worker's details): start the window again
    return now + timedelta(seconds=inp.window_seconds)


def _period(inp: WatchPromotedInput) -> timedelta:
    return timedelta(seconds=max(inp.period_seconds, 1))


def _name(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def _failed(inp: WatchPromotedInput, passing: int, lost: list[str], strikes: int) -> str:
    why = "; ".join(lost) or "no Pod could be inspected"
    return (
        f"revision {inp.stable.hash} failed its readiness gate {strikes} checks in a row "
        f"within the post-promotion watch ({passing}/{inp.replicas} passing: {why})"
    )

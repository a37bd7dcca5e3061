"""watch_promoted: the post-promotion watch (``spec.rollout.postPromotionWatch``).

For a window after the Service switched to the new stable, its Pods are inspected every period
the way promote re-checks a held candidate (``/api/ps``: digest, device, pin). What counts as a
failure is ``decisionmodel/rollout/promoted_watch.py``'s: a gate failure while fewer Pods pass
than the DecisionModel now desires (read live, so an HPA or ``kubectl scale`` is respected), or
no passing Pod past the steady state's probe-error window; a Pod being replaced or a runtime
that misses a probe is not. A failure ends the watch with ``held=False`` and the workflow
switches the Service back to the previous revision, which is still running (its deletion waits
for the watch). A gate is set from a verdict only once it is not tolerated, as the steady state
does, so the two never disagree about a Pod.

A judgement still open when the window ends (a Pod not answering, no Pod passing: the steady
state's probe-error window has not run out for it) keeps the watch going until it is decided,
so a window shorter than the error window still judges Pods that crash or go silent in it; the
previous revision keeps running meanwhile (``WatchPromotedInput.overtime_seconds``).

Resumable: the window's end travels in the heartbeat details, so an attempt on another worker
(after a crash) watches what is left of the window, not a fresh one.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity

from activities.pod_inspect import inspect_pod
from activities.typed_errors import typed_errors
from decisionmodel.rollout.contracts import WATCH_PROMOTED, WatchPromotedInput, WatchPromotedResult
from decisionmodel.rollout.promoted_watch import PodLook, WatchJudge
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.pod_gate import gate_event, gate_true, probe_eligible, set_gate, state_from_verdict
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
            began = datetime.now(UTC)
            ends = window_end(inp, activity.info().heartbeat_details, began)
            api_key = await self.secrets.api_key(inp.dm.namespace, inp.api_key)
            judge = WatchJudge(inp.probe_error_window_seconds, inp.strikes)
            checks = 0
            while True:
                seen = await self._look(inp, api_key)
                desired = await self._desired(inp)
                judged = judge.judge([look for _, look in seen], desired, time.monotonic())
                await self._set_gates(inp, seen, judged.tolerated)
                checks += 1
                if judged.failed:
                    return WatchPromotedResult(
                        held=False, checks=checks, message=_failed(inp, judged.message)
                    )
                now = datetime.now(UTC)
                if watch_over(inp, ends, now, judge.pending(time.monotonic()), began):
                    return WatchPromotedResult(held=True, checks=checks)
                step = now + _period(inp)
                await self._wait(step if now >= ends else min(ends, step), ends)

    async def _look(
        self, inp: WatchPromotedInput, api_key: str | None
    ) -> list[tuple[dict[str, Any], PodLook]]:
        """Inspect every Pod of the new stable that can be probed."""
        dm, record = inp.dm, inp.stable
        pods = await Kube.run(self.kube.list_revision_pods, dm.namespace, dm.name, record.hash)
        registry = self.settings.ollaya_registry
        looks = []
        for pod in (p for p in pods if probe_eligible(p)):
            found = await inspect_pod(pod, record.model, record, api_key, registry)
            looks.append((pod, PodLook(pod["metadata"]["uid"], _name(pod), gate_true(pod), found)))
        return looks

    async def _desired(self, inp: WatchPromotedInput) -> int:
        """The replicas the DecisionModel asks for now (an HPA or a user may have scaled it
        since the promotion); the rollout's own figure when it cannot be read."""
        live = await Kube.run(self.kube.read_dm, inp.dm.namespace, inp.dm.name)
        replicas = ((live or {}).get("spec") or {}).get("replicas")
        return replicas if isinstance(replicas, int) else inp.replicas

    async def _set_gates(
        self,
        inp: WatchPromotedInput,
        seen: list[tuple[dict[str, Any], PodLook]],
        tolerated: frozenset[str],
    ) -> None:
        for pod, look in seen:
            if look.uid in tolerated:
                continue
            if await set_gate(self.kube, pod, state_from_verdict(look.verdict)):
                await gate_event(self.kube, inp.dm, pod, look.verdict)

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


def watch_over(
    inp: WatchPromotedInput, ends: datetime, now: datetime, pending: bool, began: datetime
) -> bool:
    """The window is over and nothing is still being judged; or the overtime is spent too
    (every judgement closes within it; the workflow's timeouts for this activity allow it).
    The overtime counts from this attempt's start if that is later: an attempt resumed after a
    worker crash judges afresh (its judge's clocks start again)."""
    overtime = timedelta(seconds=inp.overtime_seconds())
    return now >= ends and (not pending or now >= max(ends, began) + overtime)


def _period(inp: WatchPromotedInput) -> timedelta:
    return timedelta(seconds=max(inp.period_seconds, 1))


def _name(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def _failed(inp: WatchPromotedInput, why: str) -> str:
    return f"revision {inp.stable.hash} failed within the post-promotion watch: {why}"

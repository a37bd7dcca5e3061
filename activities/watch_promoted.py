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

When to look (``Pace``): every period, and at once after any change of the DecisionModel's Pods
(a watch event: a gate flipped by the steady state, a container restarted, Ready lost), then
every second for a few seconds, since what a change means for the runtime shows a moment later.
A round that finds no Pod of the new stable passing also looks at the previous revision's Pods
(``WatchPromotedInput.previous``): while they pass, the new stable is judged at once
(``promoted_watch``: an outage), and the workflow switches the Service back; the Service selects
only failing Pods for about one look, not a second strike's period or the error window.

Resumable: the window's end travels in the heartbeat details, so an attempt on another worker
(after a crash) watches what is left of the window, not a fresh one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity

from activities.pod_inspect import inspect_pod
from activities.typed_errors import typed_errors
from decisionmodel.engine.render.labels import LABEL_NAME, LABEL_REVISION
from decisionmodel.engine.runtime_client import GateVerdict, verdict
from decisionmodel.errors import ProbeError
from decisionmodel.rollout.contracts import (
    WATCH_PROMOTED,
    RevisionRecord,
    WatchPromotedInput,
    WatchPromotedResult,
)
from decisionmodel.rollout.promoted_watch import Judgement, PodLook, WatchJudge
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube, serving_pods
from kube.pod_gate import (
    gate_event,
    gate_true,
    is_model_ready,
    is_terminating,
    pod_ip,
    probe_eligible,
    set_gate,
    state_from_verdict,
)
from kube.secrets import SecretReader
from kube.wait import wait_until
from kube.watch import Obj, source

# The shortest gap between two looks, and how often the watch wakes without a change (to
# heartbeat, and to look when one is due).
LOOK_GAP_SECONDS = 1.0
# After a change of the Pods, look every LOOK_GAP_SECONDS for this long: a runtime restarting
# (here, the simulator's ~1 s cache of fault annotations) answers differently a moment later.
FOLLOW_UP_SECONDS = 3.0


@dataclass
class Pace:
    """When the next look is due: every ``period``, at the window's end, and right after a
    change of the Pods, then every ``gap`` for ``follow_up`` seconds (pure: times passed in)."""

    period: float
    gap: float = LOOK_GAP_SECONDS
    follow_up: float = FOLLOW_UP_SECONDS
    last: float | None = None
    next_at: float = 0.0
    follow_until: float = -1.0

    def due(self, now: float, changed: bool) -> bool:
        if changed:
            self.follow_until = now + self.follow_up
        if self.last is not None and now < self.last + self.gap:
            return False
        return self.last is None or now >= self.next_at or now <= self.follow_until

    def looked(self, now: float, window_left: float) -> None:
        self.last = now
        step = self.period if window_left <= 0 else min(self.period, window_left)
        self.next_at = now + step


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
            judge = WatchJudge(inp.probe_error_window_seconds, inp.strikes)
            pace = Pace(period=_period(inp).total_seconds())
            versions: dict[str, str] = {}
            checks = 0

            async def round_(pods: list[Obj]) -> WatchPromotedResult | None:
                nonlocal versions, checks
                activity.heartbeat(ends.isoformat())
                seen = {
                    p["metadata"]["name"]: p["metadata"].get("resourceVersion", "") for p in pods
                }
                changed, versions = seen != versions, seen
                now = datetime.now(UTC)
                if pace.due(time.monotonic(), changed):
                    judged = await self._round(inp, judge, pods)
                    pace.looked(time.monotonic(), (ends - datetime.now(UTC)).total_seconds())
                    checks += 1
                    if judged.failed:
                        message = _failed(inp, judged.message)
                        return WatchPromotedResult(held=False, checks=checks, message=message)
                    now = datetime.now(UTC)
                if checks and watch_over(inp, ends, now, judge.pending(time.monotonic()), began):
                    return WatchPromotedResult(held=True, checks=checks)
                return None

            # Every Pod of the DecisionModel, both revisions: a change of either is a reason
            # to look (kube.wait: a round per burst of changes, and every LOOK_GAP_SECONDS).
            src = source("Pod", inp.dm.namespace, labels={LABEL_NAME: inp.dm.name})
            return await wait_until(self.kube, src, round_, idle=LOOK_GAP_SECONDS)

    async def _round(
        self, inp: WatchPromotedInput, judge: WatchJudge, pods: list[Obj]
    ) -> Judgement:
        """One look at the new stable's Pods (and at the previous revision's when none of the
        new ones passes), judged; the gates set as the judgement allows."""
        # Read afresh each round: after a rotation the old key's 401s are no verdict.
        api_key = await self.secrets.api_key(inp.dm.namespace, inp.api_key)
        seen = await self._look(inp, api_key, pods)
        desired = await self._desired(inp)
        looks = [look for _, look in seen]
        fallback = 0
        if not any(look.verdict.ready for look in looks) and inp.previous is not None:
            fallback = await self._passing(inp, inp.previous, api_key, pods)
        judged = judge.judge(looks, desired, time.monotonic(), fallback)
        await self._set_gates(inp, seen, judged.tolerated)
        return judged

    async def _look(
        self, inp: WatchPromotedInput, api_key: str | None, pods: list[Obj]
    ) -> list[tuple[dict[str, Any], PodLook]]:
        """Inspect every Pod of the new stable that can be probed; one whose containers are not
        ready is looked at as one that does not answer."""
        record = inp.stable
        looked = [
            p
            for p in _of(pods, inp.dm.name, record.hash)
            if probe_eligible(p) or (not is_terminating(p) and pod_ip(p) is not None)
        ]
        found = await asyncio.gather(*(self._inspect(p, record, api_key) for p in looked))
        return [
            (pod, PodLook(pod["metadata"]["uid"], _name(pod), gate_true(pod), said))
            for pod, said in zip(looked, found, strict=True)
        ]

    async def _inspect(self, pod: Obj, record: RevisionRecord, api_key: str | None) -> GateVerdict:
        if not probe_eligible(pod):
            # Its containers are not ready (crashed, restarting): it does not answer. A Pod
            # that served in this watch is then failing; one that never did is warming.
            why = ProbeError("its containers are not ready (crashed or restarting)")
            return verdict(record.digest, record.device, None, why)
        return await inspect_pod(pod, record.model, record, api_key, self.settings.ollaya_registry)

    async def _passing(
        self, inp: WatchPromotedInput, record: RevisionRecord, api_key: str | None, pods: list[Obj]
    ) -> int:
        """The previous revision's model-ready Pods that pass an inspection now: the Service
        can go back to them. Their gates are left alone (the steady state's, once stable)."""
        ready = [p for p in _of(pods, inp.dm.name, record.hash) if is_model_ready(p)]
        eligible = [p for p in ready if probe_eligible(p)]
        found = await asyncio.gather(*(self._inspect(p, record, api_key) for p in eligible))
        return sum(1 for said in found if said.ready)

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


def _of(pods: list[Obj], dm: str, revision: str) -> list[Obj]:
    """The serving Pods of ``revision`` among the DecisionModel's (kube.client.serving_pods)."""
    labelled = [
        p for p in pods if (p["metadata"].get("labels") or {}).get(LABEL_REVISION) == revision
    ]
    return serving_pods(labelled, dm, revision)


def _name(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def _failed(inp: WatchPromotedInput, why: str) -> str:
    return f"revision {inp.stable.hash} failed within the post-promotion watch: {why}"

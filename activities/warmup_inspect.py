"""The warmup_inspect activity: make the candidate's Pods model-ready, one readiness gate each.

Loop until ``inp.replicas`` Pods of the revision are model-ready (gate True and PodReady True):
for every probe-eligible Pod (Pod IP, ContainersReady) whose gate is not True yet, warm the
model up (``POST /api/decide keep_alive -1``, bounded by ``warmup_timeout_seconds``), inspect
it (``GET /api/ps``), judge it with ``runtime_client.verdict`` and write the gate (only when it
changes). Pods are probed concurrently, so one slow load does not hold the others back.

DigestMismatch, DeviceMismatch and NotPinned keep the gate False and the next round probes
again (NotPinned is usually transient; a re-warm pins), with one exception: every live Pod
reporting the same DigestMismatch or DeviceMismatch round after round fails the step at once
(``activities/warmup_unfixable.py``), since waiting cannot fix it. The deadline is the
workflow's starting timeout, set as the activity's schedule-to-close timeout. To let the
workflow say *why* the Pods never became ready, every round heartbeats a
:class:`WarmupHeartbeat` (counts and gate reasons, never a secret)::

    {"ready": 0, "desired": 2, "pods": 2, "reasons": {"DeviceMismatch": 2},
     "message": "loaded on device 'cpu' but spec.device is 'cuda'; ..."}

Temporal attaches the last heartbeat details to the timeout: the workflow catches
``ActivityError`` whose ``cause`` is a ``temporalio.exceptions.TimeoutError`` and reads
``cause.last_heartbeat_details[0]`` (a dict of this shape) to write StartTimeout's message,
e.g. "0/2 Pods model-ready; gate reasons: DeviceMismatch=2".

Heartbeats keep flowing while a warmup call blocks (a large model loads for minutes) through
:class:`HeartbeatTicker`, which the evaluate activity uses too.

A heartbeat is read only when the deadline passes, so a Pod whose runtime cannot be reached or
answers the warm-up with an error (ProbeError) is also shown on ``Promoted=False`` (where the
start step's guards show) as soon as a round sees it: :class:`HoldDisplay` writes it when what
holds the rollout changes, not every round. A runtime that refuses the model name itself
(RuntimeRequestRejected) fails the step at once: no later round can get past it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity

from activities import step_status
from activities.step_status import writes_step_status
from activities.typed_errors import typed_errors
from activities.warmup_unfixable import UnfixableWatch
from decisionmodel.engine.render.labels import selector_labels
from decisionmodel.engine.runtime_client import GateVerdict, RuntimeClient, RuntimeTimeouts, verdict
from decisionmodel.errors import ProbeError
from decisionmodel.rollout.contracts import WARMUP_INSPECT, DMRef, WarmupInput, WarmupResult
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import ConditionType, Phase, Reason
from kube.client import Kube, serving_pods
from kube.pod_gate import (
    gate_event,
    gate_reason,
    gate_true,
    is_model_ready,
    is_terminating,
    pod_ip,
    probe_eligible,
    probe_result,
    set_gate,
    state_from_verdict,
)
from kube.rollout_status import show_guard
from kube.secrets import SecretReader
from kube.wait import wait_until
from kube.watch import source

RuntimeClientFactory = Callable[..., RuntimeClient]

# Heartbeat-detail keys for Pods without a verdict: not probe-eligible yet (no IP or
# containers not ready), or eligible but never judged (no gate condition yet).
STARTING: Final = Phase.STARTING.value
UNPROBED: Final = "Unprobed"
_MESSAGE_CHARS: Final = 300
# Beyond the longest a single step may take (a model load, one decision behind a full queue).
STALL_MARGIN_SECONDS: Final = 60
# Gate reasons shown on Promoted while they hold the rollout: the runtime cannot be reached or
# answers the warm-up with an error. The mismatches have their own Warning Event (pod_gate).
SHOWN_HOLDS: Final = frozenset({Reason.PROBE_ERROR})
# A hold whose reason stays the same but whose text changes (another Pod, another error) is
# rewritten at most this often: rounds run every poll interval (0.2 s in tests).
HOLD_REWRITE_SECONDS: Final = 30.0
# Longer than the heartbeat's: the fix comes last in a probe message, and a condition has room.
_HOLD_MESSAGE_CHARS: Final = 1000


class WarmupHeartbeat(BaseModel):
    """What warmup_inspect heartbeats each round (and what a StartTimeout can report)."""

    model_config = ConfigDict(extra="ignore")

    ready: int = 0
    desired: int = 0
    pods: int = 0
    reasons: dict[str, int] = Field(default_factory=dict)
    message: str = ""


class HeartbeatTicker:
    """Heartbeats the latest details now and every ``interval`` seconds in the background.

    Activities heartbeat after each step; a single step may block far longer than the
    heartbeat timeout (a model load, a decision behind a full queue), and the ticker keeps the
    heartbeat alive meanwhile. Heartbeats are also how an activity learns it was cancelled.

    The ticker reports progress, not only liveness: once no step has reported (``update``) for
    ``stall_after`` seconds, longer than any single step may take, it stops beating. A step
    that is stuck then misses its heartbeat timeout, and Temporal retries it elsewhere.
    """

    def __init__(
        self,
        interval: float,
        details: Any = None,
        stall_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        beat: Callable[[Any], None] | None = None,
    ) -> None:
        self._interval = max(interval, 0.05)
        # The activity's heartbeat unless given one (a test's own, not a patched global that
        # every other activity in the process would beat into too).
        self._beat = beat
        self._details = details
        self._stall_after = stall_after
        self._clock = clock
        self._updated = clock()
        self._task: asyncio.Task[None] | None = None

    def update(self, details: Any) -> None:
        self._details = details
        self._updated = self._clock()
        self._send(details)

    def stalled(self) -> bool:
        limit = self._stall_after
        return limit is not None and self._clock() - self._updated > limit

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            if self.stalled():
                continue  # no progress: let the heartbeat timeout say so
            if self._details is not None:
                self._send(self._details)

    def _send(self, details: Any) -> None:
        (self._beat or activity.heartbeat)(details)

    async def __aenter__(self) -> HeartbeatTicker:
        if self._details is not None:
            self._send(self._details)
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            # gather, not suppress(CancelledError): a cancel of the activity itself that
            # arrives meanwhile must still end it.
            await asyncio.gather(self._task, return_exceptions=True)


class HoldDisplay:
    """Shows what holds the warm-up on ``Promoted=False`` (reason and message of the first
    failing Pod), as start's guards are shown, with a Warning Event the first time in the
    activity's first attempt. Writes only when the hold changes: at once for a new reason, at
    most every HOLD_REWRITE_SECONDS for new text under the same reason."""

    def __init__(self, kube: Kube, dm: DMRef, clock: Callable[[], float] = time.monotonic) -> None:
        self._kube = kube
        self._dm = dm
        self._clock = clock
        self._shown: tuple[str, str] | None = None
        self._shown_at = -math.inf

    @staticmethod
    def hold_of(
        live: list[dict[str, Any]], judged: dict[str, GateVerdict]
    ) -> tuple[str, str] | None:
        """(reason, message) of the first live Pod held for a reason worth showing."""
        for pod in live:
            name = pod["metadata"]["name"]
            found = judged.get(name)
            if found is not None and not found.ready and found.reason in SHOWN_HOLDS:
                return found.reason.value, f"Pod {name}: {found.message}"[:_HOLD_MESSAGE_CHARS]
        return None

    def _due(self, hold: tuple[str, str]) -> bool:
        if hold == self._shown:
            return False
        same_reason = self._shown is not None and self._shown[0] == hold[0]
        return not same_reason or self._clock() - self._shown_at >= HOLD_REWRITE_SECONDS

    async def show(self, hold: tuple[str, str] | None) -> bool:
        """Write ``hold`` when due; True when written. No hold: nothing to write (the
        condition is left to the next step, as the start step's guards are)."""
        if hold is None or not self._due(hold):
            return False
        first = self._shown is None and activity.in_activity() and activity.info().attempt == 1
        reason, message = hold
        await show_guard(self._kube, self._dm, ConditionType.PROMOTED, reason, message, first)
        self._shown, self._shown_at = hold, self._clock()
        return True

    async def cleared(self, ready: int, desired: int) -> None:
        """The Pods got past what was shown: say so, so a stale hold does not sit on Promoted
        through evaluation (promote writes Promoted=True later). Nothing shown: nothing to do."""
        if self._shown is None:
            return
        message = f"{ready}/{desired} Pods model-ready; not promoted yet"
        await show_guard(
            self._kube, self._dm, ConditionType.PROMOTED, Reason.MODEL_READY, message, False
        )
        self._shown = None


class WarmupActivities:
    def __init__(
        self,
        kube: Kube,
        settings: RolloutSettings,
        runtime_client_factory: RuntimeClientFactory = RuntimeClient.for_pod,
        on_probe_transition: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.runtime_client_factory = runtime_client_factory
        # decisionmodel_probe_results_total for candidate Pods (seed 004), on a gate change.
        self.on_probe_transition = on_probe_transition
        self.secrets = SecretReader(kube)

    @activity.defn(name=WARMUP_INSPECT)
    @writes_step_status(step_status.model_ready)
    async def warmup_inspect(self, inp: WarmupInput) -> WarmupResult:
        async with typed_errors():
            api_key = await self.secrets.api_key(inp.dm.namespace, inp.api_key)
            dm, revision = inp.dm, inp.record.hash
            precision: str | None = None
            beat = WarmupHeartbeat(desired=inp.replicas)
            # One round may wait for a model load (warmup_timeout); a round longer than that
            # and a margin is stuck.
            stall = inp.warmup_timeout_seconds + STALL_MARGIN_SECONDS
            poll = self.settings.poll_interval_seconds
            holds = HoldDisplay(self.kube, inp.dm)
            unfixable = UnfixableWatch()
            async with HeartbeatTicker(poll, beat.model_dump(), stall_after=stall) as t:

                async def round_(pods: list[dict[str, Any]]) -> WarmupResult | None:
                    """One round on the Pods as the watch last saw them: probe, gate, count."""
                    nonlocal precision
                    served = serving_pods(pods, dm.name, revision)
                    live = [p for p in served if not is_terminating(p)]
                    probe = [p for p in live if probe_eligible(p) and not gate_true(p)]
                    verdicts = await self._probe_all(probe, inp, api_key)
                    judged: dict[str, GateVerdict] = {}
                    for pod, found in zip(probe, verdicts, strict=True):
                        if await set_gate(self.kube, pod, state_from_verdict(found)):
                            await gate_event(self.kube, inp.dm, pod, found)
                            self._count(inp, found)
                        judged[pod["metadata"]["name"]] = found
                        if found.ready and precision is None:
                            precision = found.precision
                    ready = [p for p in live if is_model_ready(p)]
                    t.update(self._heartbeat(inp.replicas, live, ready, judged).model_dump())
                    await holds.show(HoldDisplay.hold_of(live, judged))
                    names = [p["metadata"]["name"] for p in live]
                    if (hopeless := unfixable.see(names, judged)) is not None:
                        raise hopeless
                    if len(ready) < inp.replicas:
                        return None
                    await holds.cleared(len(ready), inp.replicas)
                    if precision is None:
                        precision = await self._precision(ready[0], inp, api_key)
                    return WarmupResult(model_ready=len(ready), precision=precision)

                # A round after every change of the Pods (a gate set, Ready turned True: the
                # watch of kube.wait), and every poll interval for the Pods still held.
                src = source("Pod", dm.namespace, labels=selector_labels(dm.name, revision))
                return await wait_until(self.kube, src, round_, idle=poll)

    def _count(self, inp: WarmupInput, found: GateVerdict) -> None:
        if self.on_probe_transition is not None:
            self.on_probe_transition(inp.dm.namespace, inp.dm.name, probe_result(found))

    async def _probe_all(
        self, pods: list[dict[str, Any]], inp: WarmupInput, api_key: str | None
    ) -> list[GateVerdict]:
        """Every Pod's verdict, probed concurrently. A refusal no later round can get past
        (RuntimeRequestRejected) is raised only once every probe is done, so no probe outlives
        the activity."""
        results = await asyncio.gather(
            *(self._probe(pod, inp, api_key) for pod in pods), return_exceptions=True
        )
        verdicts: list[GateVerdict] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            verdicts.append(result)
        return verdicts

    async def _probe(
        self, pod: dict[str, Any], inp: WarmupInput, api_key: str | None
    ) -> GateVerdict:
        ip = pod_ip(pod)
        assert ip is not None  # probe_eligible checked it
        client = self._client(ip, api_key, inp.warmup_timeout_seconds)
        async with client:
            try:
                await client.warmup(inp.model, timeout=inp.warmup_timeout_seconds)
                entry = await client.inspect(inp.model)
            except ProbeError as err:
                return verdict(inp.record.digest, inp.record.device, None, err)
        return verdict(inp.record.digest, inp.record.device, entry, None)

    async def _precision(
        self, pod: dict[str, Any], inp: WarmupInput, api_key: str | None
    ) -> str | None:
        """The loaded precision of a Pod that was already ready (a re-run of the activity)."""
        ip = pod_ip(pod)
        if ip is None:
            return None
        async with self._client(ip, api_key, inp.warmup_timeout_seconds) as client:
            try:
                entry = await client.inspect(inp.model)
            except ProbeError:
                return None
        return entry.details.quantization_level if entry is not None else None

    def _client(self, ip: str, api_key: str | None, warmup_seconds: float) -> RuntimeClient:
        return self.runtime_client_factory(
            ip,
            api_key=api_key,
            default_registry=self.settings.ollaya_registry,
            timeouts=RuntimeTimeouts(warmup=float(warmup_seconds)),
        )

    @staticmethod
    def _heartbeat(
        desired: int,
        live: list[dict[str, Any]],
        ready: list[dict[str, Any]],
        judged: dict[str, GateVerdict],
    ) -> WarmupHeartbeat:
        reasons: Counter[str] = Counter()
        message = ""
        for pod in live:
            found = judged.get(pod["metadata"]["name"])
            if found is not None:
                reasons[found.reason.value] += 1
                if not found.ready and not message:
                    message = found.message[:_MESSAGE_CHARS]
            elif gate_true(pod):
                reasons[Reason.MODEL_READY] += 1
            elif not probe_eligible(pod):
                reasons[STARTING] += 1
            else:
                reasons[gate_reason(pod) or UNPROBED] += 1
        return WarmupHeartbeat(
            ready=len(ready),
            desired=desired,
            pods=len(live),
            reasons=dict(sorted(reasons.items())),
            message=message,
        )

"""One cell of the chaos matrix, end to end.

1. A DecisionModel at model v1 (the stable, promoted by the cell's controller).
2. The hold of the step is set up, the model changes to v2 (evaluated; Manual promotion for the
   approval steps), and the cell waits until the candidate's rollout is in the step.
3. The fault goes in for its length, then heals; the stable is probed all that time.
4. The hold is lifted and the cell waits for the rollout's outcome, then gives the reaper its
   grace before counting objects of revisions that are neither stable nor candidate.

Recorded, never asserted on a clock: the step the fault landed in (the progress query, and
proved from the rollout's own history), the outcome, duplicates (two live objects of a kind for
one revision, at any sample; a second RolloutWorkflow run for the revision), orphans, the
stable's answers, and the seconds from the fault clearing to the rollout's next step change.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime
from typing import Any

from chaos_holds import Hold, hold_for, injected_before_trigger
from chaos_observe import Census, StableProbe, Timeline, leftovers, revision_objects
from chaos_proof import created_twice, revision_runs, step_proof, wall
from chaos_rig import DM, REAP_GRACE_SECONDS, CellRig
from chaos_table import CellResult
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from decisionmodel.rollout.contracts import RolloutOutcome, RolloutResult
from localenv.chaos import FaultWindow, fault_window

# After the fault clears: time for the rollout to finish (a status write retried at the
# RetryPolicy's 30 s cap, a grace, an evaluation) before the cell calls it stuck.
OUTCOME_SECONDS = 300.0
# The reaper deletes an orphan older than its grace on a reconcile (at least every 10 s here).
ORPHAN_SECONDS = REAP_GRACE_SECONDS + 45.0


@contextlib.asynccontextmanager
async def background(*jobs: Awaitable[None]) -> AsyncIterator[None]:
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def run_cell(rig: CellRig, result: CellResult) -> None:
    hold = hold_for(rig.cell)
    origin = time.monotonic()
    await rig.roll_stable()
    timeline = Timeline()
    census = Census(rig.kube, rig.namespace, DM, timeline)
    probe = StableProbe(rig.kube, rig.namespace, DM)
    hold.prepare(rig)
    async with background(census.run(), timeline.run()):
        window = await _through_fault(rig, hold, probe, timeline, result)
        hold.release(rig)
        released = time.monotonic()
        assert timeline.handle is not None
        outcome = await outcome_of(timeline.handle)
        await timeline.poll()
        result.outcome = describe(outcome, timeline)
        result.orphans = await _orphans_after_grace(rig, result)
        await census.sample()
    census.seen_duplicates.update(created_twice(rig.cluster.audit_log, rig.namespace))
    result.duplicates = len(census.seen_duplicates)
    result.stable_ok, result.stable_total = probe.ok, probe.total
    await _prove_from_temporal(rig, result, timeline.handle, window, origin)
    _recovery(result, timeline, window)
    story = _evidence(rig, result, timeline, probe, census, window, origin)
    story["hold_released"] = released - origin
    await _write_story(rig, story, timeline, origin)


async def _write_story(
    rig: CellRig, story: dict[str, Any], timeline: Timeline, origin: float
) -> None:
    story["pods"] = await asyncio.to_thread(pod_story, rig)
    story["history"] = await history(timeline.handle, origin)
    (rig.logs / "cell.json").write_text(json.dumps(story, indent=2, default=str))


async def _through_fault(
    rig: CellRig, hold: Hold, probe: StableProbe, timeline: Timeline, result: CellResult
) -> FaultWindow:
    """The candidate rolled into the step, the fault held there for its length, healed."""
    fault = rig.fault()
    if injected_before_trigger(rig.cell):
        await probe.refresh()
        async with background(probe.run()), fault_window(fault) as window:
            timeline.attach(await rig.trigger(await rig.rollout_ids()))
            result.hit = "(before the spec change)"
            await _hold(window, rig.cell.seconds)
        return window
    timeline.attach(await rig.trigger(await rig.rollout_ids()))
    await hold.reached(rig, timeline)
    await timeline.poll()
    result.hit = timeline.current.step
    await probe.refresh()  # the stable's Pods, read while the API server still answers
    async with background(probe.run()), fault_window(fault) as window:
        await hold.after_inject(rig)
        await _hold(window, rig.cell.seconds)
    return window


async def _hold(window: FaultWindow, seconds: float) -> None:
    # The fault's length, counted from the moment it was in place: not a wait for a condition.
    await asyncio.sleep(max(0.0, window.injected_at + seconds - time.monotonic()))


async def outcome_of(
    handle: WorkflowHandle[Any, RolloutOutcome], timeout: float = OUTCOME_SECONDS
) -> RolloutOutcome | str:
    """The rollout's outcome; a text when it ended without one (or is still running)."""

    async def wait() -> RolloutOutcome | str:
        last = "no outcome"
        while True:
            try:
                return await handle.result()
            except RPCError:
                pass  # Temporal is coming back
            except WorkflowFailureError as e:
                # Ended without a verdict: the controller may start it again (restarts.py).
                last = f"workflow failed: {e.cause or e}"
            await asyncio.sleep(1.0)
            if last != "no outcome" and not await _running(handle):
                return last

    try:
        return await asyncio.wait_for(wait(), timeout)
    except TimeoutError:
        return f"no outcome after {timeout:.0f}s"


async def _running(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        desc = await handle.describe()
    except RPCError:
        return True
    return desc.status is not None and desc.status.name == "RUNNING"


def describe(outcome: RolloutOutcome | str, timeline: Timeline) -> str:
    if isinstance(outcome, str):
        return f"error: {outcome} (at {timeline.current.phase}/{timeline.current.step})"
    if outcome.result == RolloutResult.PROMOTED:
        return "promoted"
    return f"{outcome.result.value}: {outcome.reason}"


async def _orphans_after_grace(rig: CellRig, result: CellResult) -> int:
    """Objects of revisions neither stable nor candidate that nobody asked to delete, once
    the reaper had its grace. The wait ends early when nothing of such revisions is left;
    objects still being deleted at its end are noted, not counted (the delete was issued:
    the rest is Kubernetes' garbage collection, slow after an API server restart)."""
    deadline = time.monotonic() + ORPHAN_SECONDS
    while True:
        status = await asyncio.to_thread(rig.h.status, DM)
        keep = {(status.get(k) or {}).get("hash") for k in ("stableRevision", "candidateRevision")}
        objects = await asyncio.to_thread(revision_objects, rig.kube, rig.namespace, DM)
        found = leftovers(objects, {k for k in keep if k}, deleting=False)
        deleting = leftovers(objects, {k for k in keep if k}, deleting=True)
        if not (found or deleting) or time.monotonic() > deadline:
            if found:
                result.notes.append(f"orphans after {ORPHAN_SECONDS:.0f}s: {', '.join(found)}")
            if deleting:
                result.notes.append(
                    f"still being deleted after {ORPHAN_SECONDS:.0f}s: {', '.join(deleting)}"
                )
            return len(found)
        await asyncio.sleep(1.0)


async def _prove_from_temporal(
    rig: CellRig,
    result: CellResult,
    handle: WorkflowHandle[Any, Any],
    window: FaultWindow,
    origin: float,
) -> None:
    """The revision's RolloutWorkflow runs, and whether its own history shows the fault in
    the cell's step (chaos_proof)."""
    assert window.cleared_at is not None
    result.runs = await revision_runs(rig.client, rig.namespace, DM, handle.id)
    events = list((await handle.fetch_history()).events)
    miss = step_proof(
        events,
        rig.cell.step,
        wall(window.injected_at),
        wall(window.cleared_at),
        injected_before_trigger(rig.cell),
        wall(origin),
    )
    result.in_step = miss is None
    if miss is not None:
        result.notes.append(f"the history does not show the fault in its step: {miss}")
    if result.runs != 1:
        result.notes.append(f"{result.runs} RolloutWorkflow runs for the candidate's revision")


def _recovery(result: CellResult, timeline: Timeline, window: FaultWindow) -> None:
    assert window.cleared_at is not None
    change = timeline.first_change_after(window.cleared_at)
    result.recovery = change.at - window.cleared_at if change else None
    result.moved_during_fault = timeline.moved_between(window.injected_at, window.cleared_at)


def _evidence(
    rig: CellRig,
    result: CellResult,
    timeline: Timeline,
    probe: StableProbe,
    census: Census,
    window: FaultWindow,
    origin: float,
) -> dict[str, Any]:
    """The cell's story next to its process logs (build/chaos/<cell>/cell.json)."""
    restarts = {p.name: p.restarts for p in rig.processes}
    if any(restarts.values()):
        result.notes.append(f"restarted after exiting: {restarts}")
    if probe.failures:
        result.notes.append(f"stable probe failures: {probe.failures[:3]}")
    if census.seen_duplicates:
        result.notes.append(f"duplicates: {sorted(census.seen_duplicates)}")
    story = {
        "cell": rig.cell.id,
        "namespace": rig.namespace,
        # Seconds in this story count from here (wall clock, for the logs and the Pods).
        "started_utc": datetime.fromtimestamp(wall(origin), UTC),
        "result": {k: v for k, v in vars(result).items() if k not in ("notes", "wall")},
        "notes": result.notes,
        "fault": [window.injected_at - origin, (window.cleared_at or origin) - origin],
        "timeline": timeline.describe(origin),
        "query_errors": dict(timeline.errors),
        "probe_failures": probe.failures,
        "restarts": restarts,
    }
    return story


def pod_story(rig: CellRig) -> list[str]:
    """Each Pod of the namespace with its conditions' transition times (wall clock, UTC)."""
    found = rig.cluster.kubectl("-n", rig.namespace, "get", "pods", "-o", "json", check=False)
    if found.returncode != 0:
        return [found.stderr.strip()]
    lines = []
    for pod in json.loads(found.stdout)["items"]:
        meta, status = pod["metadata"], pod.get("status") or {}
        conditions = " ".join(
            f"{c['type']}={c['status']}@{str(c.get('lastTransitionTime', ''))[11:19]}"
            for c in status.get("conditions") or []
        )
        created = str(meta.get("creationTimestamp", ""))[11:19]
        lines.append(f"{meta['name']} created@{created} {status.get('phase')} {conditions}")
    return lines


async def history(handle: WorkflowHandle[Any, Any] | None, origin: float) -> list[str]:
    """The rollout's history, one line per event, seconds from the cell's start."""
    if handle is None:
        return []
    try:
        events = (await handle.fetch_history()).events
    except RPCError as e:
        return [f"history unavailable: {e}"]
    wall_origin = wall(origin)
    return [_event_line(e, wall_origin) for e in events]


def _event_line(event: HistoryEvent, wall_origin: float) -> str:
    at = event.event_time.ToDatetime(tzinfo=UTC).timestamp() - wall_origin
    kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    detail = ""
    if event.HasField("activity_task_scheduled_event_attributes"):
        detail = event.activity_task_scheduled_event_attributes.activity_type.name
    elif event.HasField("activity_task_started_event_attributes"):
        detail = f"attempt {event.activity_task_started_event_attributes.attempt}"
    elif event.HasField("activity_task_failed_event_attributes"):
        detail = event.activity_task_failed_event_attributes.failure.message[:160]
    elif event.HasField("activity_task_timed_out_event_attributes"):
        detail = event.activity_task_timed_out_event_attributes.failure.message[:160]
    return f"{at:7.1f}s #{event.event_id} {kind} {detail}".rstrip()

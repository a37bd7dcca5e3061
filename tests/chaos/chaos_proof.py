"""What a cell proves from Temporal and the API server themselves (issue 23): the fault landed
in its step, the candidate's revision had one RolloutWorkflow run, and no revision object was
created twice.

The step is read from the rollout's own history, not from the progress query the hold used:
the step's activity (or, for a wait, the span of the wait) must be open at the moment the
fault went in. A cell whose fault goes in before the spec changes (registry errors at resolve)
proves instead that the step's activity started while the fault was on.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

from chaos_matrix import Step
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from controller.temporal.rollouts import dm_query

# Activity steps are named as their activity type (decisionmodel/rollout/contracts.py).
ACTIVITY_STEPS = frozenset(
    {Step.RESOLVE, Step.PREFETCH, Step.START, Step.WARMUP_INSPECT, Step.EVALUATE, Step.PROMOTE}
)
_CLOSED = (
    "activity_task_completed_event_attributes",
    "activity_task_failed_event_attributes",
    "activity_task_timed_out_event_attributes",
    "activity_task_canceled_event_attributes",
)
_APPROVALS = (
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
)


@dataclass(frozen=True)
class Span:
    """Something the rollout was doing, wall-clock seconds; ``end`` None while still open."""

    what: str
    start: float
    end: float | None

    def open_at(self, t: float) -> bool:
        return self.start <= t and (self.end is None or self.end > t)

    def describe(self, origin: float) -> str:
        end = "open" if self.end is None else f"{self.end - origin:.1f}s"
        return f"{self.what} {self.start - origin:.1f}s..{end}"


def wall(monotonic: float) -> float:
    """A time.monotonic() instant as wall-clock seconds (history events are wall clock)."""
    return time.time() - (time.monotonic() - monotonic)


def _at(event: HistoryEvent) -> float:
    return event.event_time.ToDatetime(tzinfo=UTC).timestamp()


def activity_spans(events: Iterable[HistoryEvent]) -> list[Span]:
    """Each activity from its scheduling to its close (retries stay in one span)."""
    scheduled: dict[int, tuple[str, float]] = {}
    closed: dict[int, float] = {}
    for e in events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            name = e.activity_task_scheduled_event_attributes.activity_type.name
            scheduled[e.event_id] = (name, _at(e))
        for field in _CLOSED:
            if e.HasField(field):
                closed[getattr(e, field).scheduled_event_id] = _at(e)
    return [Span(name, start, closed.get(i)) for i, (name, start) in scheduled.items()]


def timer_spans(events: Iterable[HistoryEvent]) -> list[Span]:
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            started[e.event_id] = _at(e)
        elif e.HasField("timer_fired_event_attributes"):
            ended[e.timer_fired_event_attributes.started_event_id] = _at(e)
        elif e.HasField("timer_canceled_event_attributes"):
            ended[e.timer_canceled_event_attributes.started_event_id] = _at(e)
    return [Span("timer", start, ended.get(i)) for i, start in started.items()]


def approval_wait(events: list[HistoryEvent]) -> list[Span]:
    """From the evaluation's close to the first approval (signal or update) after it."""
    evaluations = [s for s in activity_spans(events) if s.what == Step.EVALUATE.value]
    if not evaluations or evaluations[-1].end is None:
        return []
    began = evaluations[-1].end
    approvals = [_at(e) for e in events if e.event_type in _APPROVALS and _at(e) >= began]
    return [Span("awaiting approval", began, min(approvals) if approvals else None)]


def step_spans(events: list[HistoryEvent], step: Step) -> list[Span]:
    if step in ACTIVITY_STEPS:
        return [s for s in activity_spans(events) if s.what == step.value]
    if step is Step.GRACE:
        return timer_spans(events)
    return approval_wait(events)


def step_proof(
    events: list[HistoryEvent],
    step: Step,
    injected: float,
    cleared: float,
    before_trigger: bool,
    origin: float,
) -> str | None:
    """None when the history shows the fault in the step; else what it shows instead.
    Times are wall clock; ``origin`` only makes the message readable."""
    spans = step_spans(events, step)
    if before_trigger:
        if any(injected <= s.start <= cleared for s in spans):
            return None
    elif any(s.open_at(injected) for s in spans):
        return None
    seen = ", ".join(s.describe(origin) for s in spans) or "never"
    return f"fault at {injected - origin:.1f}s..{cleared - origin:.1f}s; {step.value}: {seen}"


async def revision_runs(client: Client, namespace: str, dm: str, workflow_id: str) -> int:
    """RolloutWorkflow runs of the revision of ``workflow_id`` (rollout/<ns>/<name>/<rev>[/…]),
    under any ID: a second one is a duplicate, as a second Deployment would be."""
    revision = workflow_id.split("/")[3]
    runs = 0
    async for wf in client.list_workflows(dm_query(namespace, dm)):
        parts = wf.id.split("/")
        if wf.workflow_type == "RolloutWorkflow" and len(parts) > 3 and parts[3] == revision:
            runs += 1
    return runs


AUDITED_KINDS = {"deployments", "jobs", "persistentvolumeclaims"}


def created_twice(audit_log: Path, namespace: str) -> list[str]:
    """Objects of a revision kind created more than once in ``namespace`` (the API server's
    audit log of dmrollout's ServiceAccounts): a duplicate even when the first was gone
    before the census could see both."""
    if not audit_log.exists():
        return []
    creates: Counter[str] = Counter()
    with audit_log.open() as lines:
        for line in lines:
            if '"create"' not in line or namespace not in line:
                continue
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if (
                event.get("stage") == "ResponseComplete"
                and event.get("verb") == "create"
                and ref.get("namespace") == namespace
                and ref.get("resource") in AUDITED_KINDS
                and (event.get("responseStatus") or {}).get("code") == 201
            ):
                creates[f"{ref['resource']}/{ref.get('name')}"] += 1
    return sorted(f"created {n} times: {what}" for what, n in creates.items() if n > 1)

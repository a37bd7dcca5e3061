"""The step proof of a chaos cell, on histories built by hand (chaos_proof.py)."""

from __future__ import annotations

import json
from pathlib import Path

from chaos_matrix import Step
from chaos_proof import created_twice, step_proof
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import ActivityType
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import (
    ActivityTaskCompletedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    HistoryEvent,
    TimerFiredEventAttributes,
)

T0 = 1_800_000_000.0


def _event(event_id: int, at: float, event_type: int, **attributes: object) -> HistoryEvent:
    stamp = Timestamp()
    stamp.FromNanoseconds(int((T0 + at) * 1e9))
    return HistoryEvent(event_id=event_id, event_time=stamp, event_type=event_type, **attributes)


def activity(first_id: int, name: str, start: float, end: float | None) -> list[HistoryEvent]:
    events = [
        _event(
            first_id, start, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
            activity_task_scheduled_event_attributes=ActivityTaskScheduledEventAttributes(
                activity_type=ActivityType(name=name)
            ),
        )
    ]  # fmt: skip
    if end is not None:
        events.append(
            _event(
                first_id + 1, end, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                activity_task_completed_event_attributes=ActivityTaskCompletedEventAttributes(
                    scheduled_event_id=first_id
                ),
            )
        )  # fmt: skip
    return events


def proof(events: list[HistoryEvent], step: Step, at: float, before: bool = False) -> str | None:
    return step_proof(events, step, T0 + at, T0 + at + 20, before, T0)


def test_fault_inside_the_steps_activity_is_proved() -> None:
    history = activity(1, "prefetch", 5, 30) + activity(3, "start", 30, 40)
    assert proof(history, Step.PREFETCH, 10) is None
    assert proof(activity(1, "prefetch", 5, None), Step.PREFETCH, 10) is None  # still open


def test_fault_after_the_step_ended_is_not() -> None:
    history = activity(1, "prefetch", 5, 8) + activity(3, "start", 8, 40)
    miss = proof(history, Step.PREFETCH, 10)
    assert miss is not None and "prefetch: prefetch 5.0s..8.0s" in miss
    assert "never" in (proof(history, Step.EVALUATE, 10) or "")


def test_a_fault_before_the_trigger_must_see_the_step_start_during_it() -> None:
    assert proof(activity(1, "resolve", 12, 14), Step.RESOLVE, 10, before=True) is None
    assert proof(activity(1, "resolve", 40, 41), Step.RESOLVE, 10, before=True) is not None


def test_grace_is_its_timer_and_approval_the_wait_after_evaluation() -> None:
    timer = [
        _event(7, 50, EventType.EVENT_TYPE_TIMER_STARTED),
        _event(
            8, 70, EventType.EVENT_TYPE_TIMER_FIRED,
            timer_fired_event_attributes=TimerFiredEventAttributes(started_event_id=7),
        ),
    ]  # fmt: skip
    assert proof(timer, Step.GRACE, 60) is None
    assert proof(timer, Step.GRACE, 75) is not None
    evaluated = activity(1, "evaluate", 5, 20)
    approved = [_event(9, 90, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)]
    assert proof(evaluated + approved, Step.AWAITING_PROMOTION, 30) is None
    assert proof(evaluated + approved, Step.AWAITING_PROMOTION, 95) is not None
    assert proof(activity(1, "evaluate", 5, 40), Step.AWAITING_PROMOTION, 30) is not None


def test_an_object_created_twice_in_the_namespace_is_a_duplicate(tmp_path: Path) -> None:
    def line(name: str, code: int, namespace: str = "cell", stage: str = "ResponseComplete") -> str:
        return json.dumps(
            {
                "stage": stage,
                "verb": "create",
                "objectRef": {"resource": "jobs", "namespace": namespace, "name": name},
                "responseStatus": {"code": code},
            }
        )

    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                line("pf-a", 201),
                line("pf-a", 409),  # refused: AlreadyExists, nothing created
                line("pf-b", 201),
                line("pf-b", 201, stage="ResponseStarted"),
                line("pf-c", 201),
                line("pf-c", 201, namespace="other"),
                line("pf-d", 201),
                line("pf-d", 201),
            ]
        )
        + "\n"
    )
    assert created_twice(log, "cell") == ["created 2 times: jobs/pf-d"]
    assert created_twice(tmp_path / "missing.log", "cell") == []

"""Reading rollouts back from Temporal for the CLI: the runs a visibility query finds (``dmrollout
history``), and the evaluation a closed run's history holds (``dmrollout report --revision``).
Every call bounded (``runs.RPC_TIMEOUT``); only numbers and names leave this module (the history's
payloads are decoded here, never printed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from controller.temporal.runs import RPC_TIMEOUT
from decisionmodel.rollout.contracts import EVALUATE, EvaluationOutcome, RolloutInput
from workflows import search_attributes as sa


@dataclass(frozen=True)
class ListedRollout:
    """One run as visibility lists it: its search attributes by name."""

    workflow_id: str
    run_id: str
    started: datetime | None
    closed: datetime | None
    status: str | None  # WorkflowExecutionStatus name, None when not told
    attributes: dict[str, str | None] = field(default_factory=dict)


_NAMED = (sa.DM_NAMESPACE, sa.DM_NAME, sa.DM_REVISION, sa.DM_MODEL, sa.DM_RESULT)


async def listed(client: Client, query: str) -> list[ListedRollout]:
    found: list[ListedRollout] = []
    async for wf in client.list_workflows(query, rpc_timeout=RPC_TIMEOUT):
        attrs = wf.typed_search_attributes
        found.append(
            ListedRollout(
                workflow_id=wf.id,
                run_id=wf.run_id,
                started=wf.start_time,
                closed=wf.close_time,
                status=wf.status.name if wf.status else None,
                attributes={key.name: attrs.get(key) for key in _NAMED},
            )
        )
    return found


async def evaluation_in(
    client: Client, run: ListedRollout
) -> tuple[EvaluationOutcome | None, RolloutInput | None]:
    """The run's input and the outcome of its (last) completed evaluate step."""
    handle = client.get_workflow_handle(run.workflow_id, run_id=run.run_id)
    history = await handle.fetch_history(rpc_timeout=RPC_TIMEOUT)
    return await _outcome_and_input(client.data_converter, history.events)


async def _outcome_and_input(
    converter: Any, events: Sequence[HistoryEvent]
) -> tuple[EvaluationOutcome | None, RolloutInput | None]:
    inp: RolloutInput | None = None
    evaluate_ids: set[int] = set()
    outcome: EvaluationOutcome | None = None
    for e in events:
        if e.HasField("workflow_execution_started_event_attributes"):
            payloads = e.workflow_execution_started_event_attributes.input.payloads
            if payloads:
                [inp] = await converter.decode(payloads[:1], [RolloutInput])
        elif e.HasField("activity_task_scheduled_event_attributes"):
            if e.activity_task_scheduled_event_attributes.activity_type.name == EVALUATE:
                evaluate_ids.add(e.event_id)
        elif e.HasField("activity_task_completed_event_attributes"):
            done = e.activity_task_completed_event_attributes
            if done.scheduled_event_id in evaluate_ids and done.result.payloads:
                [outcome] = await converter.decode(done.result.payloads[:1], [EvaluationOutcome])
    return outcome, inp

"""Recorded RolloutWorkflow histories replay against the current workflow code.

``histories/{promoted,rolled_back,superseded}.json`` are real histories (``history.to_json()``)
recorded on the local environment by ``tests/record_histories.py`` before the change
``status-in-steps`` (each phase change a record_status activity); ``histories/status_in_steps/``
holds the same three recorded after it (each step writes its own status): a second revision with
evaluation and manual promotion (a rejected stale approval, the bound one, the grace timer, the
previous revision deleted), a third rolled back for EvaluationFailed, a fourth superseded
(cancelled) during prefetch. The Replayer needs no server: it runs the workflow code over each
history and fails when the code would now issue different commands — what would happen to a
rollout in flight when a worker with the new code picks it up.

When this test fails, the change to ``workflows/rollout.py`` is not safe for running rollouts:
put it behind ``workflow.patched("<change-id>")`` (see ``test_patched_change_replays``), keep the
old path, and do not re-record. Re-record only together with such a deliberate, versioned
change (the committed files then stay the previous code's histories until a later cleanup
removes the patch), inside the private network namespace::

    hack/in-netns.sh .venv/bin/python tests/record_histories.py
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from decisionmodel.rollout.contracts import RolloutOutcome, RolloutResult
from workflows.rollout import RolloutWorkflow

HISTORIES = Path(__file__).resolve().parent / "histories"
# Histories by the code that wrote them: before ``status-in-steps`` (replayed down the old path)
# and after it.
SETS = {"before-status-in-steps": HISTORIES, "status-in-steps": HISTORIES / "status_in_steps"}
CASES = [(s, n) for s in sorted(SETS) for n in sorted(("promoted", "rolled_back", "superseded"))]
WORKFLOW_SOURCE = Path(__file__).resolve().parents[2] / "workflows" / "rollout.py"
RECORDED = {
    "promoted": RolloutResult.PROMOTED,
    "rolled_back": RolloutResult.ROLLED_BACK,
    "superseded": RolloutResult.SUPERSEDED,
}
# The first command of every rollout; the changed copies add an activity just before it.
ANCHOR = '        status = await self._enter(Phase.RESOLVING, "resolve")\n'


def load(name: str, recorded: str = "before-status-in-steps") -> WorkflowHistory:
    text = (SETS[recorded] / f"{name}.json").read_text()
    return WorkflowHistory.from_json(f"recorded-{name}", text)


def outcome_of(history: WorkflowHistory) -> RolloutOutcome:
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    payloads = last.workflow_execution_completed_event_attributes.result.payloads
    [outcome] = pydantic_data_converter.payload_converter.from_payloads(
        list(payloads), [RolloutOutcome]
    )
    assert isinstance(outcome, RolloutOutcome)
    return outcome


def replayer(workflow: type) -> Replayer:
    return Replayer(workflows=[workflow], data_converter=pydantic_data_converter)


@pytest.mark.parametrize(("recorded", "name"), CASES)
async def test_recorded_history_replays(recorded: str, name: str) -> None:
    history = load(name, recorded)
    assert outcome_of(history).result == RECORDED[name]
    result = await replayer(RolloutWorkflow).replay_workflow(history)
    assert result.replay_failure is None


@pytest.mark.parametrize("recorded", sorted(SETS))
def test_recorded_histories_cover_messages_timers_and_cancellation(recorded: str) -> None:
    """The histories hold what a replay must get right, not just a straight line."""

    def types(name: str) -> set[EventType.ValueType]:
        return {e.event_type for e in load(name, recorded).events}

    assert {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        EventType.EVENT_TYPE_TIMER_FIRED,
    } <= types("promoted")
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in types("superseded")
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in types("superseded")
    assert outcome_of(load("rolled_back", recorded)).reason == "EvaluationFailed"


def scheduled(history: WorkflowHistory) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def test_the_two_sets_are_the_two_paths() -> None:
    """Before the change a promotion scheduled record_status at every phase change; after it
    only the wait for an approval and the rejected approval do (no step runs there)."""
    before = Counter(scheduled(load("promoted")))
    after = Counter(scheduled(load("promoted", "status-in-steps")))
    assert before["record_status"] >= 9
    assert after["record_status"] == 2  # AwaitingPromotion, ApprovalRejected
    steps = ("resolve", "prefetch", "start", "warmup_inspect", "evaluate", "promote")
    assert all(before[s] == after[s] == 1 for s in steps)


def changed_copy(tmp_path: Path, insert: str) -> type:
    """workflows/rollout.py with ``insert`` placed just before the first command of a rollout,
    loaded as a module of its own; its class keeps the name "RolloutWorkflow"."""
    source = WORKFLOW_SOURCE.read_text()
    assert source.count(ANCHOR) == 1, "the anchor line moved: update ANCHOR"
    name = f"changed_rollout_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(source.replace(ANCHOR, insert + ANCHOR))
    module = importlib.import_module(name)
    cls = module.RolloutWorkflow
    assert isinstance(cls, type) and cls is not RolloutWorkflow
    return cls


@pytest.fixture
def importable(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` on sys.path: the replay sandbox re-imports a workflow's module by name."""
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))


# One more activity before resolve, as a careless edit would add it.
EXTRA_ACTIVITY = (
    '        await workflow.execute_activity("audit", inp.dm, '
    "start_to_close_timeout=timedelta(seconds=10))\n"
)


@pytest.mark.parametrize(("recorded", "name"), CASES)
async def test_unversioned_change_fails_replay(importable: Path, recorded: str, name: str) -> None:
    """The replay test can fail: an extra activity is a nondeterminism error on every history."""
    changed = changed_copy(importable, EXTRA_ACTIVITY)
    with pytest.raises(NondeterminismError):
        await replayer(changed).replay_workflow(load(name, recorded))


async def test_patched_change_replays(importable: Path) -> None:
    """The same change behind ``workflow.patched`` is safe: old histories take the old path."""
    patched = '        if workflow.patched("replay-test-audit"):\n    ' + EXTRA_ACTIVITY
    changed = changed_copy(importable, patched)
    for recorded, name in CASES:
        result = await replayer(changed).replay_workflow(load(name, recorded))
        assert result.replay_failure is None, (recorded, name)


# PipelineWorkflow (issue 25), recorded on the code before issue 34's pipeline changes (run
# shown before the resolve, soak watch, approvals bound to verdicts, retries) by running a
# staging -> prod-eu pipeline (1 h soak, Manual, approved) on the time-skipping server.
PIPELINE_HISTORIES = HISTORIES / "pipeline"
# The run's workflow ID as recorded: its stages' child IDs derive from it.
PIPELINE_RUNS = {"soak_approval_promoted": "pipeline/hub/scoring/be38cb72a6"}


@pytest.mark.parametrize("name", ["soak_approval_promoted"])
async def test_recorded_pipeline_history_replays(name: str) -> None:
    from workflows.pipeline import PipelineWorkflow

    text = (PIPELINE_HISTORIES / f"{name}.json").read_text()
    history = WorkflowHistory.from_json(PIPELINE_RUNS[name], text)
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    result = await replayer(PipelineWorkflow).replay_workflow(history)
    assert result.replay_failure is None, result.replay_failure

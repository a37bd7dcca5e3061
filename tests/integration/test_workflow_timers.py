"""The workflow's timer paths at their real lengths, on Temporal's time-skipping test server.

The dev-server tests shorten every timer to seconds; here the defaults run as they ship (the
30 s promotion grace, a cleanup that keeps failing for an hour, an approval awaited for a week)
and the test server skips the time: the history must show the same timers and the same order
as they would in production, without the wait. The server is the Java build from Maven
Central (hack/test-server.sh), as the SDK's own download is out of reach here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from harness.time_skipping import register_search_attributes, start_time_skipping
from harness.workflow_fakes import FakeCluster, make_input, start, wait_phase
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from decisionmodel.rollout import contracts as c
from workflows import search_attributes as sa
from workflows.rollout import RolloutWorkflow

ROOT = Path(__file__).resolve().parents[2]
TIMER_STARTED = EventType.EVENT_TYPE_TIMER_STARTED
TIMER_FIRED = EventType.EVENT_TYPE_TIMER_FIRED
ACTIVITY_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED


T = TypeVar("T")

# Real seconds any one wait of these tests may take. Time is skipped, so each takes seconds;
# one that stopped skipping (the server holds the clock while an activity runs) would otherwise
# wait the skipped hours for real, and pytest-timeout's signal may reach a thread of the SDK's
# runtime instead of the event loop (stop 42's CI: a worker silent for an hour).
REAL_WAIT_SECONDS = 240.0


async def bounded(wait: Awaitable[T]) -> T:
    return await asyncio.wait_for(wait, REAL_WAIT_SECONDS)


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await start_time_skipping()
    # The rollout's search attributes, as `dmrollout temporal setup` registers them.
    await register_search_attributes(environment, sa.ALL)
    yield environment
    await environment.shutdown()


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
async def queue(env: WorkflowEnvironment, cluster: FakeCluster) -> AsyncIterator[str]:
    name = f"timers-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client, task_queue=name, workflows=[RolloutWorkflow], activities=cluster.activities()
    ):
        yield name


def shipped(inp: c.RolloutInput) -> c.RolloutInput:
    """The input with the tempo the controller dispatches (RolloutTuning's defaults)."""
    return inp.model_copy(update={"tuning": c.RolloutTuning()})


def timers(history: WorkflowHistory) -> list[timedelta]:
    return [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for e in history.events
        if e.event_type == TIMER_STARTED
    ]


def activity_after_timer(history: WorkflowHistory, activity_type: str) -> bool:
    """Whether ``activity_type`` was scheduled only after a timer fired."""
    fired = False
    for e in history.events:
        if e.event_type == TIMER_FIRED:
            fired = True
        scheduled = e.activity_task_scheduled_event_attributes.activity_type.name
        if e.event_type == ACTIVITY_SCHEDULED and scheduled == activity_type:
            return fired
    return False


async def test_the_shipped_grace_keeps_the_previous_revision_30_s_then_deletes_it(
    env: WorkflowEnvironment, queue: str, cluster: FakeCluster
) -> None:
    handle = await start(env.client, queue, shipped(make_input(stable=True)))
    outcome = await bounded(handle.result())
    assert outcome.result == c.RolloutResult.PROMOTED
    assert cluster.calls[-2:] == [c.PROMOTE, "delete:stable0000000000"]
    history = await handle.fetch_history()
    assert timedelta(seconds=c.RolloutTuning().promotion_grace_seconds) in timers(history)
    assert activity_after_timer(history, c.DELETE_REVISION)


async def test_an_approval_is_awaited_for_a_week_and_still_promotes(
    env: WorkflowEnvironment, queue: str, cluster: FakeCluster
) -> None:
    """No timeout on AwaitingPromotion (reference): a week later the candidate still waits,
    and the approval then promotes it."""
    handle = await start(env.client, queue, shipped(make_input(stable=True, promotion="Manual")))
    waiting = await wait_phase(handle, c.Phase.AWAITING_PROMOTION)
    await bounded(env.sleep(timedelta(days=7)))
    still = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
    assert still.phase == c.Phase.AWAITING_PROMOTION
    assert c.PROMOTE not in cluster.calls
    await handle.signal(RolloutWorkflow.promote, waiting.expected_approval or "")
    outcome = await bounded(handle.result())
    assert outcome.result == c.RolloutResult.PROMOTED
    assert cluster.promoted == [waiting.revision]


async def test_a_guard_holds_the_step_past_its_deadline_until_it_is_fixed(
    env: WorkflowEnvironment, queue: str, cluster: FakeCluster
) -> None:
    """Seed 001: a dataset Secret without its label holds Evaluating until it is labelled; the
    step's deadline (10 min) does not run while a guard is the cause. 30 minutes later it still
    waits; the fix lets it go on and promote."""
    cluster.fail[c.EVALUATE] = ApplicationError("label the Secret", type="SecretNotAllowed")
    handle = await start(env.client, queue, shipped(make_input(stable=True, evaluation=True)))
    await wait_phase(handle, c.Phase.EVALUATING)
    await bounded(env.sleep(timedelta(minutes=30)))
    still = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
    assert still.phase == c.Phase.EVALUATING
    assert "record-failure" not in cluster.calls
    del cluster.fail[c.EVALUATE]
    outcome = await bounded(handle.result())
    assert outcome.result == c.RolloutResult.PROMOTED


async def test_a_guard_never_fixed_ends_at_the_decision_deadline(
    env: WorkflowEnvironment, queue: str, cluster: FakeCluster
) -> None:
    """Every wait is bounded: a guard nobody fixes ends the rollout at timeouts.decision
    (24 h by default, 1 h here: each skipped minute is still two real attempts) with the step's
    timeout reason; the stable serves throughout."""
    cluster.fail[c.EVALUATE] = ApplicationError("label the Secret", type="SecretNotAllowed")
    inp = shipped(make_input(stable=True, evaluation=True))
    inp = inp.model_copy(update={"timeouts": c.PhaseTimeouts(decision=3600)})
    handle = await start(env.client, queue, inp)
    outcome = await bounded(handle.result())
    assert outcome.result == c.RolloutResult.ROLLED_BACK
    assert outcome.reason == "EvaluationTimeout", outcome


async def test_a_cleanup_failing_for_an_hour_keeps_its_rounds_and_finishes(
    env: WorkflowEnvironment, queue: str, cluster: FakeCluster
) -> None:
    """A rolled-back candidate's delete keeps failing: each round (10 min of retries) is followed
    by the shipped 30 s pause and another round, never given up; once the API server answers
    again the candidate is deleted and the rollout ends RolledBack."""
    cluster.cleanup_down = asyncio.Event()
    cluster.evaluation_result = "Failed"
    handle = await start(env.client, queue, shipped(make_input(stable=True, evaluation=True)))
    await bounded(env.sleep(timedelta(hours=1)))
    progress = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
    assert progress.cleanup is not None and progress.cleanup.rounds >= 3
    cluster.cleanup_down.set()
    outcome = await bounded(handle.result())
    assert outcome.result == c.RolloutResult.ROLLED_BACK
    assert "record-failure" in cluster.calls and cluster.deleted
    history = await handle.fetch_history()
    pause = timedelta(seconds=c.RolloutTuning().cleanup_pause_seconds)
    assert timers(history).count(pause) >= 3
    # The DecisionModel said so after each round, naming the objects, then that it is done.
    shown = [
        (cond.status, cond.reason, cond.message)
        for update in cluster.statuses
        for cond in update.conditions
        if cond.type == "CleanupPending"
    ]
    pending = [m for status, _, m in shown if status == "True"]
    assert len(pending) >= 3 and all("by workflow rollout/" in m for m in pending)
    assert any("(the status write)" in m for m in pending)  # recording the failure, first
    assert shown[-1][:2] == ("False", "CleanupDone"), shown[-1]


async def test_the_client_of_the_time_skipping_server_is_a_real_temporal_client(
    env: WorkflowEnvironment,
) -> None:
    # The fixtures above are only worth something if time really skips: a day in an instant.
    before = await env.get_current_time()
    await bounded(env.sleep(timedelta(days=1)))
    assert await env.get_current_time() - before >= timedelta(days=1)
    assert isinstance(env.client, Client)

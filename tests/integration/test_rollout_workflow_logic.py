"""RolloutWorkflow's orchestration on the real Temporal dev server, with same-name fake activities.

The real activities are tested against the cluster elsewhere; here the workflow's decisions are
under test: step order, failure recording before deletion, approvals bound to the candidate,
abort, cancellation as supersede, search attributes, and that handlers drain.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness.helpers import async_assert_eventually, eventually
from harness.workflow_fakes import FakeCluster, make_input, start, wait_phase
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from decisionmodel.rollout import contracts as c
from localenv.temporal import TemporalDevServer
from workflows.rollout import RolloutWorkflow

ACTIVITY_COMPLETED = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED


@pytest.fixture
async def client(temporal_server: TemporalDevServer) -> Client:
    return await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
async def queue(client: Client, cluster: FakeCluster) -> AsyncIterator[str]:
    name = f"logic-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=name, workflows=[RolloutWorkflow], activities=cluster.activities()
    ):
        yield name


async def test_first_rollout_promotes_in_order(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    handle = await start(client, queue, make_input())
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.PROMOTED
    assert cluster.calls == [c.RESOLVE, c.PREFETCH, c.START, c.WARMUP_INSPECT, c.PROMOTE]
    assert cluster.phases() == ["Resolving", "Caching", "Starting", "Promoting"]
    desc = await handle.describe()
    attrs = {k.name: v for k, v in desc.typed_search_attributes}  # type: ignore[attr-defined]
    assert attrs["DmResult"] == "Promoted" and attrs["DmPhase"] == "Ready"
    assert attrs["DmRevision"] == "r:en"


async def test_second_rollout_deletes_previous_after_grace(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    outcome = await (await start(client, queue, make_input(stable=True, evaluation=True))).result()
    assert outcome.result == c.RolloutResult.PROMOTED
    assert cluster.calls[-3:] == [c.EVALUATE, c.PROMOTE, "delete:stable0000000000"]


async def test_post_promotion_watch_held_keeps_the_promotion(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """spec.rollout.postPromotionWatch: the previous revision is deleted only after the watch."""
    outcome = await (await start(client, queue, make_input(stable=True, watch_seconds=60))).result()
    assert outcome.result == c.RolloutResult.PROMOTED
    assert cluster.calls[-3:] == [c.PROMOTE, c.WATCH_PROMOTED, "delete:stable0000000000"]
    assert cluster.promoted == ["r:en"]
    # The watch knows the revision it may go back to (issue 34: at once when the new fails).
    assert cluster.watched_previous == "stable0000000000"


async def test_post_promotion_watch_failed_switches_back_and_rolls_back(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """The gate failed in the window: the Service goes back to the previous revision (promote
    of the old stable), the failure is recorded, the new revision deleted, the old kept."""
    cluster.watch_held = False
    outcome = await (await start(client, queue, make_input(stable=True, watch_seconds=60))).result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK
    assert outcome.reason == "PostPromotionGateFailed"
    assert outcome.message and "stable0000000000 again" in outcome.message
    assert cluster.promoted == ["r:en", "stable0000000000"]
    assert cluster.calls[-4:] == [c.WATCH_PROMOTED, c.PROMOTE, "record-failure", "delete:r:en"]
    assert "stable0000000000" not in cluster.deleted
    failure = next(s for s in cluster.statuses if s.failed is not None)
    assert failure.phase == c.Phase.ROLLED_BACK and failure.failed_reason == outcome.reason


async def test_without_a_watch_no_watch_runs(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.watch_held = False
    outcome = await (await start(client, queue, make_input(stable=True))).result()
    assert outcome.result == c.RolloutResult.PROMOTED
    assert c.WATCH_PROMOTED not in cluster.calls


async def test_failed_evaluation_records_failure_before_deleting(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.evaluation_result = "Failed"
    outcome = await (await start(client, queue, make_input(stable=True, evaluation=True))).result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK and outcome.reason == "EvaluationFailed"
    assert cluster.calls[-2:] == ["record-failure", "delete:r:en"]
    failure = next(s for s in cluster.statuses if s.failed is not None)
    assert failure.phase == c.Phase.ROLLED_BACK and failure.clear_candidate
    assert failure.failed_reason == "EvaluationFailed"


async def wait_cleanup(
    handle: WorkflowHandle[Any, Any], rounds: int, timeout: float = 60
) -> c.CleanupProgress:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        p = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
        if p.cleanup is not None and p.cleanup.rounds >= rounds:
            return p.cleanup
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"cleanup not retried {rounds} round(s): {p.cleanup}")
        await asyncio.sleep(0.2)


async def test_compensation_outlives_its_old_deadline_and_finishes(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """The failure record and the candidate's delete fail for longer than a round (the old
    deadline, shortened here): the rollout says so and keeps retrying, then finishes both."""
    cluster.evaluation_result = "Failed"
    cluster.cleanup_down = asyncio.Event()
    inp = make_input(stable=True, evaluation=True, cleanup_round_seconds=2)
    handle = await start(client, queue, inp)
    pending = await wait_cleanup(handle, rounds=2)
    assert pending.step.startswith("status: RolledBack")
    assert "APIServerUnavailable" in pending.last_error
    cluster.cleanup_down.set()
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK and outcome.reason == "EvaluationFailed"
    assert cluster.calls[-2:] == ["record-failure", "delete:r:en"]
    final = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
    assert final.cleanup is None


async def test_delete_of_the_previous_revision_is_never_given_up(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.cleanup_down = asyncio.Event()
    handle = await start(client, queue, make_input(stable=True, cleanup_round_seconds=2))
    pending = await wait_cleanup(handle, rounds=1)
    assert pending.step == "delete revision stable0000000000"
    cluster.cleanup_down.set()
    assert (await handle.result()).result == c.RolloutResult.PROMOTED
    assert cluster.calls[-1] == "delete:stable0000000000"


async def test_permanent_error_without_stable_is_failed(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.fail[c.RESOLVE] = ApplicationError(
        "laya:nope not found", type="ModelNotFound", non_retryable=True
    )
    outcome = await (await start(client, queue, make_input(model="laya:nope"))).result()
    assert outcome.result == c.RolloutResult.FAILED and outcome.reason == "ModelNotFound"
    assert cluster.calls == [c.RESOLVE, "record-failure"]  # nothing to delete: never created


async def test_manual_promotion_refuses_stale_and_early_approvals(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    inp = make_input(stable=True, evaluation=True, promotion="Manual")
    handle = await start(client, queue, inp)
    progress = await wait_phase(handle, c.Phase.AWAITING_PROMOTION)
    token = progress.expected_approval
    assert token is not None and token.startswith("r:en.")
    # A stale approval (another revision) is refused by the update's validator...
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(RolloutWorkflow.approve, "oldrevision00000")
    assert "does not match" in str(err.value.cause)
    # ...and as a signal it is recorded, never applied.
    await handle.signal(RolloutWorkflow.promote, "oldrevision00000")

    async def rejected() -> c.RolloutProgress:
        while True:
            p = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
            if p.rejected_approvals:
                return p
            await asyncio.sleep(0.1)

    p = await asyncio.wait_for(rejected(), 10)
    assert p.phase == c.Phase.AWAITING_PROMOTION
    assert p.rejected_approvals[0].approval == "oldrevision00000"
    for _ in range(100):  # the Event is written by an activity the signal handler runs
        if any(s.event_reason == "ApprovalRejected" for s in cluster.statuses):
            break
        await asyncio.sleep(0.1)
    assert any(s.event_reason == "ApprovalRejected" for s in cluster.statuses)
    assert c.PROMOTE not in cluster.calls
    # The bound approval promotes (through the update, which answers).
    answer = await handle.execute_update(RolloutWorkflow.approve, token)
    assert "approved" in answer
    assert (await handle.result()).result == c.RolloutResult.PROMOTED


async def test_an_approval_of_a_candidate_not_model_ready_is_refused_not_rolled_back(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """Issue 34: the approve update checks the held candidate first (check_candidate); one
    not model-ready refuses the approval, saying why, and the candidate keeps waiting."""
    cluster.candidate_ready = 0
    handle = await start(client, queue, make_input(stable=True, promotion="Manual"))
    token = (await wait_phase(handle, c.Phase.AWAITING_PROMOTION)).expected_approval
    assert token is not None
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(RolloutWorkflow.approve, token)
    assert "not model-ready (0/1)" in str(err.value.cause) and "pod-0" in str(err.value.cause)
    p = await handle.query(RolloutWorkflow.progress, result_type=c.RolloutProgress)
    assert p.phase == c.Phase.AWAITING_PROMOTION and c.PROMOTE not in cluster.calls
    cluster.candidate_ready = None  # warmed up and gated meanwhile
    assert "approved" in await handle.execute_update(RolloutWorkflow.approve, token)
    assert (await handle.result()).result == c.RolloutResult.PROMOTED


async def test_an_approval_of_a_run_being_stopped_is_refused_saying_so(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """Explorer seed 6013: a held run cancelled for a newer spec stays open while it removes
    its candidate (here: its cleanup retried while the API server is away). An approval then
    is refused as "being stopped", not taken (nor checked against Pods its cancelled hold no
    longer warms up)."""
    cluster.cleanup_down = asyncio.Event()
    handle = await start(client, queue, make_input(stable=True, promotion="Manual"))
    token = (await wait_phase(handle, c.Phase.AWAITING_PROMOTION)).expected_approval
    assert token is not None
    await handle.cancel()

    async def cleaning_up() -> bool:
        history = await handle.fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        ]
        assert c.DELETE_REVISION in scheduled
        return True

    await async_assert_eventually(cleaning_up, what="the superseded run's cleanup")
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(RolloutWorkflow.approve, token)
    assert "being stopped" in str(err.value.cause)
    cluster.cleanup_down.set()
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.SUPERSEDED and c.PROMOTE not in cluster.calls


def foreign_service() -> ApplicationError:
    return ApplicationError("Service ns/dm is foreign", type="ResourceConflict", non_retryable=True)


async def test_a_foreign_service_at_promotion_is_waited_for_then_promoted(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """Issue 34: promote refusing a foreign Service before it records anything (non-retryable)
    is not the end: the workflow waits with await_guards, then promotes."""
    cluster.fail_once[c.PROMOTE] = foreign_service()
    outcome = await (await start(client, queue, make_input())).result()
    assert outcome.result == c.RolloutResult.PROMOTED, outcome
    assert cluster.calls[-3:] == [c.PROMOTE, "promote:await_guards", c.PROMOTE]


async def test_an_abort_while_a_foreign_service_holds_the_promotion_stops_it(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """The wait for a foreign Service is outside the promotion's commitment: abort works."""
    cluster.fail_once[c.PROMOTE] = foreign_service()
    cluster.fail["promote:await_guards"] = ApplicationError(
        "Service ns/dm is foreign", type="ResourceConflict"
    )
    handle = await start(client, queue, make_input(stable=True))

    async def held() -> bool:
        return "promote:await_guards" in cluster.calls

    await async_assert_eventually(held, 30, what="waiting for the foreign Service")
    await handle.signal(RolloutWorkflow.abort, "wrong place")
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK and outcome.reason == "Aborted", outcome
    assert "delete:r:en" in cluster.calls and cluster.promoted == []


async def test_an_inconclusive_hold_ends_by_reject_or_by_its_deadline(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """Issue 24, point 4: onInconclusive Hold parks the candidate; a reject bound to the
    evidence rolls it back (a stale one is refused); timeouts.decision rejects it by itself."""
    cluster.evaluation_result = "Inconclusive"
    inp = make_input(stable=True, evaluation=True)
    assert inp.evaluation is not None
    held = inp.model_copy(
        update={"evaluation": inp.evaluation.model_copy(update={"confidence": "0.95"})}
    )
    handle = await start(client, queue, held)
    token = (await wait_phase(handle, c.Phase.AWAITING_PROMOTION)).expected_approval
    assert token is not None
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(RolloutWorkflow.reject, token + "x")
    assert "does not match" in str(err.value.cause)
    await handle.execute_update(RolloutWorkflow.reject, token)
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK
    assert outcome.reason == "InconclusiveRejected" and c.PROMOTE not in cluster.calls

    timed = held.model_copy(
        update={
            "requested_revision": "u" + uuid.uuid4().hex[:15],
            "timeouts": held.timeouts.model_copy(update={"decision": 2}),
        }
    )
    outcome = await (await start(client, queue, timed)).result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK and outcome.reason == "DecisionTimeout"
    assert c.PROMOTE not in cluster.calls


async def test_on_inconclusive_promote_and_reject_act_at_once(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.evaluation_result = "Inconclusive"
    base = make_input(stable=True, evaluation=True)
    assert base.evaluation is not None
    for action, result in (
        ("Reject", c.RolloutResult.ROLLED_BACK),
        ("Promote", c.RolloutResult.PROMOTED),
    ):
        policy = base.evaluation.model_copy(
            update={"confidence": "0.95", "on_inconclusive": action}
        )
        inp = base.model_copy(
            update={"evaluation": policy, "requested_revision": "u" + uuid.uuid4().hex[:15]}
        )
        outcome = await (await start(client, queue, inp)).result()
        assert outcome.result == result, action


def _decision(estimate: str) -> Any:
    """One inconclusive minAccuracy gate at 0.90 whose estimate is ``estimate``."""
    from decisionmodel.evaluation.decision import EvaluationDecision, FigureInterval, GateDecision

    shown = FigureInterval(
        figure="accuracy", estimate=estimate, lower="0.8700", upper="0.9200", cases=500,
        method="clopper-pearson",
    )  # fmt: skip
    gate = GateDecision(
        gate="minAccuracy", interval=shown, threshold="0.90", side="min",
        verdict=c.EvaluationResult.INCONCLUSIVE, more_cases=900,
    )  # fmt: skip
    return EvaluationDecision(
        confidence="0.95", result=c.EvaluationResult.INCONCLUSIVE, gates=[gate],
        dataset_digest="d" * 64,
    ).sealed()  # fmt: skip


async def test_promote_on_inconclusive_needs_every_undecided_estimate_to_pass(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """Issue 35: onInconclusive Promote is never more permissive than the point gate: an
    undecided gate whose estimate fails holds the candidate for a person, saying why; one whose
    estimate passes promotes."""
    cluster.evaluation_result = "Inconclusive"
    base = make_input(stable=True, evaluation=True)
    assert base.evaluation is not None
    policy = base.evaluation.model_copy(update={"confidence": "0.95", "on_inconclusive": "Promote"})
    cluster.evaluation_decision = _decision("0.8950")
    held = base.model_copy(
        update={"evaluation": policy, "requested_revision": "u" + uuid.uuid4().hex[:15]}
    )
    handle = await start(client, queue, held)
    progress = await wait_phase(handle, c.Phase.AWAITING_PROMOTION)

    def held_saying_why() -> bool:
        said = [u.message or "" for s in cluster.statuses for u in s.conditions]
        return any("minAccuracy: accuracy 0.8950 < 0.90: held for a person" in m for m in said)

    # The phase is the workflow's state; the status that says why is written by an activity
    # right after it (CI: asserted before that write landed).
    await eventually(held_saying_why, 30, what="the hold's reason written")
    await handle.execute_update(RolloutWorkflow.approve, progress.expected_approval or "")
    assert (await handle.result()).result == c.RolloutResult.PROMOTED
    cluster.evaluation_decision = _decision("0.9050")
    passing = base.model_copy(
        update={"evaluation": policy, "requested_revision": "u" + uuid.uuid4().hex[:15]}
    )
    assert (await (await start(client, queue, passing)).result()).result == c.RolloutResult.PROMOTED


async def test_early_approval_is_refused(client: Client, queue: str, cluster: FakeCluster) -> None:
    cluster.block_prefetch = asyncio.Event()
    handle = await start(client, queue, make_input(stable=True, promotion="Manual"))
    await wait_phase(handle, c.Phase.CACHING)
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(RolloutWorkflow.approve, "r:en")
    assert "no candidate awaits promotion" in str(err.value.cause)
    cluster.block_prefetch.set()
    p = await wait_phase(handle, c.Phase.AWAITING_PROMOTION)
    await handle.signal(RolloutWorkflow.promote, p.expected_approval or "")
    assert (await handle.result()).result == c.RolloutResult.PROMOTED


async def test_first_revision_is_never_held(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    outcome = await (
        await start(client, queue, make_input(stable=False, promotion="Manual"))
    ).result()
    assert outcome.result == c.RolloutResult.PROMOTED


async def test_cancel_is_superseded_and_cleans_own_objects(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.block_prefetch = asyncio.Event()
    handle = await start(client, queue, make_input(stable=True))
    await wait_phase(handle, c.Phase.CACHING)
    await handle.cancel()
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.SUPERSEDED
    assert cluster.deleted == ["r:en"]  # its own candidate, never the stable
    assert not any(s.failed for s in cluster.statuses)  # status is the newer rollout's


@pytest.mark.parametrize("stop", ["abort", "cancel"])
async def test_a_step_that_times_out_after_the_stop_is_the_stop_not_a_failure(
    client: Client, queue: str, cluster: FakeCluster, stop: str
) -> None:
    """The step's worker died, so the cancel never reaches it and the attempt times out on its
    heartbeat: the run ends as the stop asked (explorer seed 3524: it ended Failed/
    StartTimeout, a failure recorded for a revision nobody asked for any more)."""
    cluster.hold_step = c.PREFETCH  # held without a heartbeat: as on a killed worker
    handle = await start(client, queue, make_input(stable=True))
    try:
        await asyncio.wait_for(cluster.step_held.wait(), 20)
        if stop == "abort":
            await handle.signal(RolloutWorkflow.abort, "operator said no")
        else:
            await handle.cancel()
        outcome = await asyncio.wait_for(handle.result(), 60)
    finally:
        cluster.release_step.set()
    if stop == "abort":
        assert (outcome.result, outcome.reason) == (c.RolloutResult.ROLLED_BACK, "Aborted")
    else:
        assert outcome.result == c.RolloutResult.SUPERSEDED, outcome
        assert not any(s.failed for s in cluster.statuses)  # status is the newer rollout's
    assert cluster.deleted == ["r:en"]


async def test_abort_rolls_back(client: Client, queue: str, cluster: FakeCluster) -> None:
    cluster.block_prefetch = asyncio.Event()
    handle = await start(client, queue, make_input(stable=True))
    await wait_phase(handle, c.Phase.CACHING)
    await handle.signal(RolloutWorkflow.abort, "operator said no")
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK and outcome.reason == "Aborted"
    assert cluster.deleted == ["r:en"]
    # A newer run that made this revision its candidate meanwhile keeps its objects (seed 3458).
    assert cluster.kept_if_rolling_out == [True]


@pytest.mark.parametrize("stop", ["abort", "cancel"])
async def test_stop_landing_with_a_step_result_still_stops(
    client: Client, cluster: FakeCluster, stop: str
) -> None:
    """The stop request and a step's completion reach the workflow in one activation.

    The SDK then resolves the step with its result and never raises the CancelledError; the
    workflow has to notice the request itself. Made deterministic by keeping the workflow worker
    down while both happen (seen before: the abort was lost and the rollout sat in prefetch).
    """
    name = f"logic-{uuid.uuid4().hex[:8]}"
    cluster.hold_step = c.PREFETCH
    async with Worker(client, task_queue=name, activities=cluster.activities()):
        async with Worker(client, task_queue=name, workflows=[RolloutWorkflow]):
            handle = await start(client, name, make_input(stable=True))
            await asyncio.wait_for(cluster.step_held.wait(), 20)
        if stop == "abort":
            await handle.signal(RolloutWorkflow.abort, "operator said no")
        else:
            await handle.cancel()
        cluster.release_step.set()

        async def prefetch_completed() -> bool:
            events = (await handle.fetch_history()).events
            scheduled = {
                e.event_id
                for e in events
                if e.activity_task_scheduled_event_attributes.activity_type.name == c.PREFETCH
            }
            return any(
                e.event_type == ACTIVITY_COMPLETED
                and e.activity_task_completed_event_attributes.scheduled_event_id in scheduled
                for e in events
            )

        # Both now in history, seen by no workflow worker yet.
        await async_assert_eventually(prefetch_completed, 20, what="prefetch completed")
        async with Worker(client, task_queue=name, workflows=[RolloutWorkflow]):
            outcome = await asyncio.wait_for(handle.result(), 60)
    assert c.START not in cluster.calls
    if stop == "abort":
        assert (outcome.result, outcome.reason) == (c.RolloutResult.ROLLED_BACK, "Aborted")
    else:
        assert outcome.result == c.RolloutResult.SUPERSEDED
    assert cluster.deleted == ["r:en"]


async def test_cancel_or_abort_during_promotion_finishes_it(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.block_promote = asyncio.Event()
    handle = await start(client, queue, make_input(stable=True))
    await wait_phase(handle, c.Phase.PROMOTING)
    await handle.signal(RolloutWorkflow.abort, "too late")
    await handle.cancel()
    await asyncio.sleep(0.5)
    cluster.block_promote.set()
    outcome = await handle.result()
    assert outcome.result == c.RolloutResult.PROMOTED
    assert cluster.deleted == ["stable0000000000"]  # the previous revision still goes
    assert not any(s.failed for s in cluster.statuses)


async def test_decision_model_deleted_mid_rollout_ends_aborted(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    cluster.dm_gone_after = c.PREFETCH
    outcome = await (await start(client, queue, make_input(stable=True))).result()
    assert outcome.result == c.RolloutResult.ABORTED and outcome.reason == "DecisionModelGone"
    assert c.START not in cluster.calls  # nothing more was attempted


# --- the history a rollout leaves (issue 14: 91 events without evaluation, 121 with) --------
SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
UPSERTED = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
MAX_EVENTS_WITHOUT_EVALUATION = 45  # issue 14's target
# A workflow task that timed out or failed (a loaded machine: the first task of a worker
# imports the sandbox) is retried: its scheduled/started/timed-out events are the machine's,
# not the workflow's shape.
RETRIED_TASK = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
}


def history_shape(history: WorkflowHistory) -> tuple[list[str], int, list[str], int]:
    """The activities scheduled (by name, in order), the workflow tasks, the DmPhase values
    upserted (in order), and the events but those of retried workflow tasks."""
    activities, tasks, phases = [], 0, []
    retried = sum(e.event_type in RETRIED_TASK for e in history.events)
    for event in history.events:
        if event.event_type == SCHEDULED:
            activities.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.event_type == TASK_COMPLETED:
            tasks += 1
        elif event.event_type == UPSERTED:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
            if "DmPhase" in fields.indexed_fields:
                phases.append(json.loads(fields.indexed_fields["DmPhase"].data))
    return activities, tasks, phases, len(history.events) - 3 * retried


@pytest.mark.parametrize("evaluation", [False, True])
async def test_a_rollout_is_its_steps_in_history_and_nothing_else(
    client: Client, queue: str, cluster: FakeCluster, evaluation: bool
) -> None:
    """Each step is one named activity that writes its own status: no record_status between
    steps, one workflow task per step, DmPhase upserted once per phase."""
    handle = await start(client, queue, make_input(evaluation=evaluation))
    assert (await handle.result()).result == c.RolloutResult.PROMOTED
    history = await handle.fetch_history()
    activities, tasks, phases, events = history_shape(history)
    evaluate = [c.EVALUATE] if evaluation else []
    steps = [c.RESOLVE, c.PREFETCH, c.START, c.WARMUP_INSPECT, *evaluate, c.PROMOTE]
    assert activities == steps
    assert tasks == len(steps) + 1  # the first, then one per step that returned
    assert phases == [
        "Resolving",
        "Caching",
        "Starting",
        *(["Evaluating"] * evaluation),
        "Promoting",
        "Ready",
    ]
    if not evaluation:
        assert events <= MAX_EVENTS_WITHOUT_EVALUATION, events
    # Status as before: every phase at the start of its step, every step's Event after it.
    assert cluster.phases() == [
        "Resolving",
        "Caching",
        "Starting",
        *(["Evaluating"] * evaluation),
        "Promoting",
    ]
    written = [s.event_reason for s in cluster.statuses if s.event_reason]
    evaluated = ["Evaluated"] if evaluation else []
    assert written == ["Resolved", "Cached", "ModelReady", *evaluated, "Promoted"]
    resolved = next(s for s in cluster.statuses if s.event_reason == "Resolved")
    assert resolved.candidate is not None and resolved.clear_failed
    ready = next(s for s in cluster.statuses if s.event_reason == "ModelReady")
    assert ready.candidate is not None and ready.candidate.precision == "F32"


async def test_each_decision_is_recorded_and_a_promotion_waits_for_its_record(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """Issue 38 item 6: a promotion is not switched until its signed record is written (the
    activity retried while it cannot be); a hold and a rollback are recorded too."""
    cluster.records_down = asyncio.Event()
    handle = await start(client, queue, make_input(records=True))
    await eventually(lambda: cluster.record_attempts >= 2, 30, what="record retried")
    assert c.PROMOTE not in cluster.calls and cluster.decisions == []
    cluster.records_down.set()
    assert (await handle.result()).result == c.RolloutResult.PROMOTED
    assert cluster.decisions == ["Promote:r:en"]
    assert cluster.calls[-1] == c.PROMOTE

    held = await start(
        client, queue, make_input(stable=True, promotion="Manual", model="laya:v2", records=True)
    )
    await wait_phase(held, c.Phase.AWAITING_PROMOTION)
    await held.signal(RolloutWorkflow.abort, "no")
    assert (await held.result()).result == c.RolloutResult.ROLLED_BACK
    assert [d.split(":")[0] for d in cluster.decisions] == ["Promote", "Hold", "RollBack"]


async def test_a_hold_aborted_while_its_status_is_written_keeps_its_record(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """CI, stop 46: queries show AwaitingPromotion from the phase's first moment, so an abort can
    come while the hold's status is still being written, before its record was asked for. The
    chain still gets the hold, before the rollback."""
    cluster.hold_status_phase = c.Phase.AWAITING_PROMOTION
    held = await start(
        client, queue, make_input(stable=True, promotion="Manual", model="laya:v2", records=True)
    )
    await wait_phase(held, c.Phase.AWAITING_PROMOTION)
    await asyncio.wait_for(cluster.status_held.wait(), 20)
    await held.signal(RolloutWorkflow.abort, "no")
    await async_assert_eventually(
        lambda: _cancel_requested(held), 20, what="the hold's step cancelled"
    )
    cluster.release_status.set()
    assert (await held.result()).result == c.RolloutResult.ROLLED_BACK
    assert [d.split(":")[0] for d in cluster.decisions] == ["Hold", "RollBack"]


async def _cancel_requested(handle: WorkflowHandle[Any, Any]) -> bool:
    """The abort reached the run: its history shows the status write's cancellation asked."""
    history = await handle.fetch_history()
    kinds = {e.event_type for e in history.events}
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
    return True


async def test_a_golden_set_that_cannot_decide_its_gate_fails_before_anything_is_made(
    client: Client, queue: str, cluster: FakeCluster
) -> None:
    """Issue 35 item 6: the design check runs first; its refusal fails the rollout at once
    (nothing resolved, nothing to delete); too little power is said and the rollout goes on;
    a check that could not run (not a refusal) leaves the dataset to the evaluation."""
    from decisionmodel.evaluation.design import GateDesign

    base = make_input(stable=True, evaluation=True)
    assert base.evaluation is not None
    policy = base.evaluation.model_copy(update={"confidence": "0.95"})

    def fresh() -> c.RolloutInput:
        return base.model_copy(
            update={"evaluation": policy, "requested_revision": "u" + uuid.uuid4().hex[:15]}
        )

    cluster.fail[c.CHECK_EVALUATION_DESIGN] = ApplicationError(
        "spec.rollout.evaluation.minAccuracy 0.98 on the golden set's 50 cases ...",
        type="InvalidEvaluationPolicy",
        non_retryable=True,
    )
    outcome = await (await start(client, queue, fresh())).result()
    assert outcome.result == c.RolloutResult.ROLLED_BACK
    assert outcome.reason == "InvalidEvaluationPolicy"
    assert cluster.calls == [c.CHECK_EVALUATION_DESIGN, "record-failure"]

    cluster.calls.clear()
    cluster.fail[c.CHECK_EVALUATION_DESIGN] = ApplicationError(
        "the API server refused the read", type="SecretReadFailed", non_retryable=True
    )
    assert (await (await start(client, queue, fresh())).result()).result == "Promoted"
    assert cluster.calls[:2] == [c.CHECK_EVALUATION_DESIGN, c.RESOLVE]

    del cluster.fail[c.CHECK_EVALUATION_DESIGN]
    weak = GateDesign(
        gate="minAccuracy", threshold="0.90", design="accuracy 0.95", cases=50, can_pass=True,
        can_fail=True, power=0.2, cases_for_power=232,
    )  # fmt: skip
    cluster.design = c.EvaluationDesign(checked=True, cases=50, gates=[weak], message="too small")
    cluster.statuses.clear()
    assert (await (await start(client, queue, fresh())).result()).result == "Promoted"
    said = [s for s in cluster.statuses if s.evaluation_design is not None]
    assert said and said[0].event_reason == "EvaluationUnderpowered"
    assert [(u.type, u.status, u.reason) for u in said[0].conditions] == [
        ("Evaluated", "Unknown", "EvaluationUnderpowered")
    ]

    cluster.calls.clear()  # without confidence the point gates are judged: nothing to check
    plain = base.model_copy(update={"requested_revision": "u" + uuid.uuid4().hex[:15]})
    assert (await (await start(client, queue, plain)).result()).result == "Promoted"
    assert c.CHECK_EVALUATION_DESIGN not in cluster.calls

"""PipelineWorkflow and PipelineStageWorkflow on Temporal's time-skipping test server (issue 25).

Each cluster is a worker of its own on its own task queue (``dmrollout-stage-<cluster>``), as
in production: the hub's worker runs the pipeline and resolves the freight, a cluster's worker
runs its stage. The cluster's side (apply, find the rollout, its verdict) is a fake that records
what it was asked and answers as the test says; soaks, windows and approvals run at their real
lengths and the server skips the time.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from typing import Any

import pytest
from harness.time_skipping import register_search_attributes, start_time_skipping
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from decisionmodel.api.pipeline import DecisionModelPipelineSpec, stage_task_queue
from decisionmodel.pipeline import contracts as p
from decisionmodel.pipeline.status import run_status
from decisionmodel.vocabulary import PipelinePhase, Reason, StageReason, StageState
from workflows import search_attributes as sa
from workflows.pipeline import APPROVAL_BOUND, RESOLVE_BOUND, PipelineWorkflow
from workflows.pipeline_attributes import at_start
from workflows.pipeline_details import ui_path
from workflows.pipeline_stage import PipelineStageWorkflow

METADATA = "__temporal_workflow_metadata"  # what the UI asks for its User Metadata tab

DIGEST_A, DIGEST_B = "a" * 64, "b" * 64
Handle = WorkflowHandle[PipelineWorkflow, p.PipelineRecord]


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await start_time_skipping()
    await register_search_attributes(environment, sa.registered(pipelines=True))
    yield environment
    await environment.shutdown()


@dataclass
class Hub:
    """The hub's side: the registry's answer for the tag, and every status it was given."""

    digest: str = DIGEST_A
    resolves: int = 0
    records: list[p.PipelineRecord] = field(default_factory=list)
    refuse: str | None = None  # the resolve fails with this reason (an ApplicationError type)
    # The first resolve waits for it (the registry never answers: the step times out; the
    # test server skips no time while an activity runs, so the later ones fail at once with
    # `refuse`).
    hang: asyncio.Event | None = None

    def activities(self) -> list[object]:
        @activity.defn(name=p.RESOLVE_FREIGHT)
        async def resolve(inp: p.ResolveFreightInput) -> p.Freight:
            self.resolves += 1
            if self.hang is not None and self.resolves == 1:
                await self.hang.wait()
            if self.refuse is not None:
                raise ApplicationError(f"{inp.model}: no such tag", type=self.refuse)
            return p.Freight(model=inp.model, digest=self.digest)

        @activity.defn(name=p.RECORD_PIPELINE)
        async def record(rec: p.PipelineRecord) -> None:
            self.records.append(rec)

        return [resolve, record]


@dataclass
class FakeCluster:
    """One cluster's worker: what it applied, and the verdict its rollout reaches."""

    name: str
    verdict: StageState = StageState.PROMOTED
    hold: bool = False  # the rollout never decides (until the stage is cancelled)
    applied: list[dict[str, object]] = field(default_factory=list)
    client: Client | None = None
    # Set: the apply has begun and waits for `release_apply` (the API server is slow).
    applying: asyncio.Event | None = None
    release_apply: asyncio.Event | None = None
    # Its API server does not answer: a health check of its promoted stage fails (retried).
    unanswering: bool = False
    # Its API server refuses the apply (retryable) while this is set; `apply_attempts` counts.
    apply_away: bool = False
    apply_attempts: int = 0
    # What the promoted stage's DecisionModel looks like when the run asks during a soak.
    health: p.StageHealth = field(default_factory=lambda: p.StageHealth(serving=True))
    health_from: int = 1  # the check from which it answers `health` (serving before)
    checks: int = 0

    def activities(self) -> list[object]:
        @activity.defn(name=p.APPLY_STAGE)
        async def apply(inp: p.StageInput) -> p.AppliedStage:
            self.apply_attempts += 1
            if self.apply_away:
                raise ApplicationError("the API server did not answer", type="Unavailable")
            if self.applying is not None and self.release_apply is not None:
                self.applying.set()
                await self.release_apply.wait()
            self.applied.append(inp.spec)
            return p.AppliedStage(namespace=inp.namespace, name=inp.name, uid="u", generation=1)

        @activity.defn(name=p.AWAIT_STAGE_ROLLOUT)
        async def rollout(applied: p.AppliedStage) -> p.StageRollout:
            return p.StageRollout(
                workflow_id=self.rollout_id(applied.namespace, applied.name),
                temporal_namespace=f"rollouts-{self.name}",  # the cluster's own namespace
            )

        @activity.defn(name=p.AWAIT_STAGE_VERDICT)
        async def verdict(rollout: p.StageRollout) -> p.StageVerdict:
            while self.hold:
                activity.heartbeat()
                await asyncio.sleep(0.1)
            reason = "AsExpected" if self.verdict == StageState.PROMOTED else "EvaluationFailed"
            return p.StageVerdict(state=self.verdict, reason=reason, message=self.name)

        @activity.defn(name=p.ABORT_STAGE_ROLLOUT)
        async def abort(inp: p.AbortStageRollout) -> bool:
            # In production: the cluster's own namespace, with its own client.
            assert self.client is not None
            await self.client.get_workflow_handle(inp.workflow_id).signal("abort", inp.reason)
            return True

        @activity.defn(name=p.CHECK_STAGE)
        async def check(inp: p.StageHealthInput) -> p.StageHealth:
            if self.unanswering:
                # Each look fails at once (the run treats it as a look that got no answer, as
                # one timed out on an empty queue): a week of retried looks took the test
                # server 600 s of real time on a loaded machine.
                raise ApplicationError(
                    "no answer",
                    type="Unavailable",
                    non_retryable=True,
                    category=ApplicationErrorCategory.BENIGN,
                )
            self.checks += 1
            return self.health if self.checks >= self.health_from else p.StageHealth(serving=True)

        return [apply, rollout, verdict, abort, check]

    def rollout_id(self, namespace: str, name: str) -> str:
        return f"rollout/{namespace}/{name}/{self.name}"


@workflow.defn(name="RolloutWorkflow")
class FakeRollout:
    """The cluster's rollout, as far as a stage sees it: it can be aborted."""

    def __init__(self) -> None:
        self.reason: str | None = None

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.reason is not None)
        return self.reason or ""

    @workflow.signal
    def abort(self, reason: str) -> None:
        self.reason = reason


@dataclass
class Fleet:
    client: Client
    hub: Hub
    clusters: dict[str, FakeCluster]
    hub_queue: str
    stack: AsyncExitStack

    async def start_worker(self, cluster: FakeCluster) -> None:
        cluster.client = self.client
        await self.stack.enter_async_context(
            Worker(
                self.client,
                task_queue=stage_task_queue(cluster.name),
                workflows=[PipelineStageWorkflow, FakeRollout],
                activities=cluster.activities(),
            )
        )


@pytest.fixture
async def fleet(env: WorkflowEnvironment) -> AsyncIterator[Fleet]:
    async for f in fleet_on(env):
        yield f


@pytest.fixture
async def own_env() -> AsyncIterator[WorkflowEnvironment]:
    """A server of its own, for a test that skips a week: on the module's server, after the
    other tests, the skip did not come (the test waited out its timeout)."""
    environment = await start_time_skipping()
    await register_search_attributes(environment, sa.registered(pipelines=True))
    yield environment
    await environment.shutdown()


@pytest.fixture
async def own_fleet(own_env: WorkflowEnvironment) -> AsyncIterator[Fleet]:
    async for f in fleet_on(own_env):
        yield f


async def fleet_on(env: WorkflowEnvironment) -> AsyncIterator[Fleet]:
    suffix = uuid.uuid4().hex[:6]
    hub = Hub()
    clusters = {n: FakeCluster(f"{n}-{suffix}") for n in ("staging", "prod-eu", "prod-us")}
    async with AsyncExitStack() as stack:
        f = Fleet(env.client, hub, clusters, f"hub-{suffix}", stack)
        await stack.enter_async_context(
            Worker(
                env.client,
                task_queue=f.hub_queue,
                workflows=[PipelineWorkflow],
                activities=hub.activities(),
            )
        )
        yield f


def spec(fleet: Fleet, *stages: dict[str, object]) -> DecisionModelPipelineSpec:
    for s in stages:
        s["cluster"] = fleet.clusters[str(s["cluster"])].name
        s.setdefault("namespace", "models")
    return DecisionModelPipelineSpec.model_validate(
        {"template": {"spec": {"model": "laya:en"}}, "stages": list(stages)}
    )


async def start(fleet: Fleet, pipeline: DecisionModelPipelineSpec) -> Handle:
    ref = p.PipelineRef(namespace="hub", name="scoring", uid="u1")
    inp = p.PipelineInput(pipeline=ref, revision=uuid.uuid4().hex[:10], spec=pipeline)
    return await fleet.client.start_workflow(
        PipelineWorkflow.run,
        inp,
        id=f"pipeline/hub/scoring/{inp.revision}",
        task_queue=fleet.hub_queue,
        search_attributes=at_start(inp),  # as the hub controller starts it
    )


async def progress(handle: Handle) -> p.PipelineRecord:
    return await handle.query(PipelineWorkflow.progress, result_type=p.PipelineRecord)


async def stage_reaches(handle: Handle, stage: str, state: StageState) -> p.PipelineRecord:
    """Query until ``stage`` is in ``state`` (bounded: 200 queries)."""
    for _ in range(200):
        rec = await progress(handle)
        if rec.stages[stage].state == state:
            return rec
        await asyncio.sleep(0.05)
    raise AssertionError(f"{stage} never reached {state}: {(await progress(handle)).stages}")


async def prod_soaking(fleet: Fleet) -> Handle:
    """Every cluster's worker up; staging then prod-eu (soak 1h), started and soaking."""
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"], "soak": "1h"},
    )
    handle = await start(fleet, pipeline)
    await stage_reaches(handle, "prod-eu", StageState.SOAKING)
    return handle


async def result(handle: Handle) -> p.PipelineRecord:
    return await handle.result()


async def test_staging_soaks_then_a_manual_production_stage_gets_the_staging_digest(
    env: WorkflowEnvironment, fleet: Fleet
) -> None:
    """Freight pinned once: the tag moves after staging, production still gets DIGEST_A; the
    soak is a durable timer; the approval must name the freight."""
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {
            "name": "prod-eu",
            "cluster": "prod-eu",
            "dependsOn": ["staging"],
            "soak": "2h",
            "approval": "Manual",
        },
    )
    handle = await start(fleet, pipeline)
    await stage_reaches(handle, "prod-eu", StageState.SOAKING)
    with pytest.raises(WorkflowUpdateFailedError):  # not before staging verified and soaked
        await handle.execute_update(
            PipelineWorkflow.approve, p.Approval(stage="prod-eu", digest=DIGEST_A)
        )
    fleet.hub.digest = DIGEST_B  # the tag is re-published meanwhile
    await env.sleep(timedelta(hours=2))
    waiting = await stage_reaches(handle, "prod-eu", StageState.AWAITING_APPROVAL)
    assert waiting.freight is not None and waiting.freight.digest == DIGEST_A
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(
            PipelineWorkflow.approve, p.Approval(stage="prod-eu", digest=DIGEST_B)
        )
    assert fleet.clusters["prod-eu"].applied == []
    fleet.hub.digest = DIGEST_A  # the verified bytes are back under the tag
    await handle.execute_update(
        PipelineWorkflow.approve, p.Approval(stage="prod-eu", digest=DIGEST_A)
    )
    done = await result(handle)
    assert {s.state for s in done.stages.values()} == {StageState.PROMOTED}
    for name in ("staging", "prod-eu"):
        assert [a["digest"] for a in fleet.clusters[name].applied] == [DIGEST_A]
    soaked = done.stages["prod-eu"].since
    promoted = done.stages["staging"].promoted_at
    assert soaked is not None and promoted is not None
    assert soaked - promoted >= timedelta(hours=2)
    assert fleet.clusters["prod-us"].applied == []


async def test_a_tag_re_published_after_staging_holds_production_until_it_serves_the_freight(
    env: WorkflowEnvironment, fleet: Fleet
) -> None:
    """The runtime pulls by tag: production can only fetch what staging verified while the tag
    serves it. Re-published meanwhile, production waits (applies nothing, fails nothing),
    saying what the tag serves and the fix; once the verified bytes are back it rolls out
    exactly them."""
    handle = await prod_soaking(fleet)
    fleet.hub.digest = DIGEST_B  # re-published after staging verified DIGEST_A
    await env.sleep(timedelta(hours=1))
    held = await stage_reaches(handle, "prod-eu", StageState.PENDING)
    stage = held.stages["prod-eu"]
    assert stage.reason == StageReason.FREIGHT_NOT_SERVED
    assert f"sha256:{DIGEST_B[:12]}" in stage.message
    assert f"sha256:{DIGEST_A[:12]}" in stage.message
    assert "re-publish the verified bytes" in stage.message
    await env.sleep(timedelta(minutes=5))  # re-checked, never taken for served
    await stage_reaches(handle, "prod-eu", StageState.PENDING)
    assert fleet.clusters["prod-eu"].applied == []
    fleet.hub.digest = DIGEST_A  # the verified bytes re-published under the tag
    await env.sleep(timedelta(minutes=1))
    done = await result(handle)
    assert done.stages["prod-eu"].state == StageState.PROMOTED
    assert [a["digest"] for a in fleet.clusters["prod-eu"].applied] == [DIGEST_A]


async def test_a_tag_moved_for_days_keeps_the_runs_history_small(
    own_env: WorkflowEnvironment, own_fleet: Fleet
) -> None:
    """Found by the pipeline explorer: the stage looked at the tag every 30 s for up to a week,
    about ten history events a look, and Temporal terminates a run past 51,200 events (about
    two days). The looks now back off to one every 30 minutes."""
    fleet = own_fleet
    handle = await prod_soaking(fleet)
    fleet.hub.digest = DIGEST_B
    await own_env.sleep(timedelta(days=3))
    held = await stage_reaches(handle, "prod-eu", StageState.PENDING)
    assert held.stages["prod-eu"].reason == StageReason.FREIGHT_NOT_SERVED
    events = len((await handle.fetch_history()).events)
    assert events < 3_000, events  # at 30 s a look: ~70,000
    fleet.hub.digest = DIGEST_A
    await own_env.sleep(timedelta(hours=1))
    done = await result(handle)
    assert done.stages["prod-eu"].state == StageState.PROMOTED


async def test_a_dependency_whose_cluster_never_answers_fails_the_stage_after_the_bound(
    own_env: WorkflowEnvironment, own_fleet: Fleet
) -> None:
    """Soaked, but staging's cluster stopped answering whether it still serves the freight: the
    stage asked again every minute without end (a history without bound). It now backs off
    and, a week on, fails naming the dependency and the fix; production never rolled out."""
    fleet = own_fleet
    handle = await prod_soaking(fleet)
    fleet.clusters["staging"].unanswering = True
    await own_env.sleep(timedelta(days=2))
    waiting = await progress(handle)
    assert waiting.stages["prod-eu"].state == StageState.SOAKING
    assert "a cluster did not answer" in waiting.stages["prod-eu"].message
    done = await result(handle)
    stage = done.stages["prod-eu"]
    assert stage.state == StageState.FAILED
    assert stage.reason == StageReason.DEPENDENCY_UNCONFIRMED
    assert "staging" in stage.message and "dmrollout pipeline retry" in stage.message
    assert fleet.clusters["prod-eu"].applied == []
    # Before the bound and backoff: a look every minute for the 9 days, ~100,000 events.
    assert len((await handle.fetch_history()).events) < 5_000


async def test_a_failing_staging_never_reaches_production(fleet: Fleet) -> None:
    fleet.clusters["staging"].verdict = StageState.FAILED
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"]},
        {"name": "prod-us", "cluster": "prod-us", "dependsOn": ["prod-eu"]},
    )
    done = await result(await start(fleet, pipeline))
    assert done.stages["staging"].state == StageState.FAILED
    assert done.stages["staging"].reason == "EvaluationFailed"
    assert done.stages["prod-eu"].state == StageState.BLOCKED
    assert "staging" in done.stages["prod-eu"].message
    assert done.stages["prod-us"].state == StageState.BLOCKED
    assert fleet.clusters["prod-eu"].applied == [] and fleet.clusters["prod-us"].applied == []


async def test_runs_and_stage_runs_are_found_by_their_search_attributes(fleet: Fleet) -> None:
    """The audit trail's index: the run by pipeline, model, revision, stage names, phase and
    each stage's state (kept current); each stage's child by its pipeline and stage."""
    fleet.clusters["staging"].verdict = StageState.FAILED
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"]},
    )
    handle = await start(fleet, pipeline)
    await result(handle)
    run = (await handle.describe()).typed_search_attributes
    assert run.get(sa.DM_PIPELINE) == "hub/scoring"
    assert run.get(sa.DM_MODEL) == "laya:en"
    assert run.get(sa.DM_STAGES) == ["staging", "prod-eu"]
    assert run.get(sa.DM_PHASE) == PipelinePhase.FAILED
    blocked = StageState.BLOCKED
    assert run.get(sa.DM_STAGE_STATES) == [f"staging={StageState.FAILED}", f"prod-eu={blocked}"]
    child = fleet.client.get_workflow_handle(f"{handle.id}/staging")
    # The UI's User Metadata tab: links to each stage run and to its cluster's rollout.
    details = (await handle.query(METADATA, result_type=WorkflowMetadata)).current_details
    rollout = fleet.clusters["staging"].rollout_id("models", "scoring")
    namespace = fleet.client.namespace
    assert f"[stage run]({ui_path(namespace, child.id)})" in details
    assert f"({ui_path('rollouts-' + fleet.clusters['staging'].name, rollout)})" in details
    assert f"**prod-eu** on `{fleet.clusters['prod-eu'].name}`: {StageState.BLOCKED}" in details
    stage_meta = await child.query(METADATA, result_type=WorkflowMetadata)
    assert ui_path("rollouts-" + fleet.clusters["staging"].name, rollout) in (
        stage_meta.current_details
    )
    stage = (await child.describe()).typed_search_attributes
    assert stage.get(sa.DM_STAGE) == "staging"
    assert stage.get(sa.DM_PIPELINE) == "hub/scoring"
    assert stage.get(sa.DM_REVISION) == run.get(sa.DM_REVISION)


async def test_independent_production_stages_run_in_parallel(fleet: Fleet) -> None:
    """prod-eu holds its rollout; prod-us still promotes: only dependents wait."""
    fleet.clusters["prod-eu"].hold = True
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"]},
        {"name": "prod-us", "cluster": "prod-us", "dependsOn": ["staging"]},
    )
    handle = await start(fleet, pipeline)
    await stage_reaches(handle, "prod-us", StageState.PROMOTED)
    assert (await progress(handle)).stages["prod-eu"].state == StageState.ROLLING_OUT
    fleet.clusters["prod-eu"].hold = False
    done = await result(handle)
    assert done.stages["prod-eu"].state == StageState.PROMOTED
    assert done.stages["prod-us"].rollout_workflow_id is not None


async def test_a_cluster_that_is_away_leaves_its_stage_waiting_until_it_is_back(
    fleet: Fleet,
) -> None:
    """No worker polls prod-eu's queue at first: the stage waits RollingOut, nothing fails;
    once the cluster's worker is back the stage goes on and promotes."""
    await fleet.start_worker(fleet.clusters["staging"])
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"]},
    )
    handle = await start(fleet, pipeline)
    await stage_reaches(handle, "prod-eu", StageState.ROLLING_OUT)
    await asyncio.sleep(1)
    assert (await progress(handle)).stages["prod-eu"].state == StageState.ROLLING_OUT
    await fleet.start_worker(fleet.clusters["prod-eu"])
    done = await result(handle)
    assert done.stages["prod-eu"].state == StageState.PROMOTED


async def test_a_change_window_delays_the_stage_to_its_next_opening(
    env: WorkflowEnvironment, fleet: Fleet
) -> None:
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    now = (await env.get_current_time()).astimezone(UTC)
    opens = (now + timedelta(hours=3)).replace(second=0, microsecond=0)
    window = {
        "days": [opens.strftime("%a")],
        "start": opens.strftime("%H:%M"),
        "end": (opens + timedelta(hours=1)).strftime("%H:%M"),
    }
    pipeline = spec(fleet, {"name": "staging", "cluster": "staging", "windows": [window]})
    handle = await start(fleet, pipeline)
    held = await stage_reaches(handle, "staging", StageState.WAITING_FOR_WINDOW)
    assert opens.isoformat() in held.stages["staging"].message
    assert fleet.clusters["staging"].applied == []
    done = await result(handle)
    started = done.stages["staging"].promoted_at
    assert started is not None and started >= opens


async def test_abort_stops_the_stages_in_flight_and_starts_no_other(fleet: Fleet) -> None:
    fleet.clusters["staging"].hold = True
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"]},
    )
    staging = fleet.clusters["staging"]
    rollout = await fleet.client.start_workflow(
        FakeRollout.run,
        id=staging.rollout_id("models", "scoring"),
        task_queue=stage_task_queue(staging.name),
    )
    handle = await start(fleet, pipeline)
    await stage_reaches(handle, "staging", StageState.ROLLING_OUT)
    await handle.signal(PipelineWorkflow.abort, "change freeze")
    done = await result(handle)
    assert done.stages["staging"].state == StageState.ABORTED
    assert done.stages["prod-eu"].state in (StageState.BLOCKED, StageState.ABORTED)
    assert "stopped stage staging" in await rollout.result()
    assert fleet.clusters["prod-eu"].applied == []
    assert "change freeze" in done.message


async def test_an_abort_while_the_stage_applies_still_aborts_the_rollout_it_started(
    fleet: Fleet,
) -> None:
    """The apply reached the cluster just as the abort came: the stage finishes the apply,
    finds the rollout the cluster's controller started for it and aborts it (else it would
    promote with nobody left to stop it)."""
    staging = fleet.clusters["staging"]
    staging.applying, staging.release_apply = asyncio.Event(), asyncio.Event()
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    rollout = await fleet.client.start_workflow(
        FakeRollout.run,
        id=staging.rollout_id("models", "scoring"),
        task_queue=stage_task_queue(staging.name),
    )
    handle = await start(fleet, spec(fleet, {"name": "staging", "cluster": "staging"}))
    await asyncio.wait_for(staging.applying.wait(), 30)
    await handle.signal(PipelineWorkflow.abort, "change freeze")
    child = fleet.client.get_workflow_handle(f"{handle.id}/staging")
    await cancel_requested(child)
    staging.release_apply.set()
    assert "stopped stage staging" in await asyncio.wait_for(rollout.result(), 30)
    done = await result(handle)
    assert done.stages["staging"].state == StageState.ABORTED


async def test_an_abort_while_the_stage_cluster_is_away_never_applies_when_it_returns(
    fleet: Fleet,
) -> None:
    """Pipeline explorer seed 21: the stage's cluster refused the apply (away) when the run was
    aborted; the stage stops retrying and closes, and the cluster, once back, is never sent
    the stopped run's spec (it could land over a newer run's)."""
    staging = fleet.clusters["staging"]
    staging.apply_away = True
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    handle = await start(fleet, spec(fleet, {"name": "staging", "cluster": "staging"}))
    for _ in range(200):  # bounded: the first attempts are a second apart
        if staging.apply_attempts >= 2:
            break
        await asyncio.sleep(0.05)
    assert staging.apply_attempts >= 2
    await handle.signal(PipelineWorkflow.abort, "change freeze")
    done = await result(handle)
    assert done.stages["staging"].state == StageState.ABORTED
    # Closed while the cluster is still away: no attempt of a closed run is ever retried.
    child = fleet.client.get_workflow_handle(f"{handle.id}/staging")
    assert (await child.describe()).status != WorkflowExecutionStatus.RUNNING
    staging.apply_away = False
    assert staging.applied == []


async def cancel_requested(handle: WorkflowHandle[Any, Any]) -> None:
    """Until the workflow's history holds its cancel request (bounded: 200 reads)."""
    requested = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
    for _ in range(200):
        if any([e.event_type == requested async for e in handle.fetch_history_events()]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{handle.id} was never asked to cancel")


async def test_a_manual_stage_not_approved_within_the_bound_fails_and_blocks_downstream(
    own_fleet: Fleet,
) -> None:
    fleet = own_fleet
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"], "approval": "Manual"},
        {"name": "prod-us", "cluster": "prod-us", "dependsOn": ["prod-eu"]},
    )
    handle = await start(fleet, pipeline)
    waiting = await stage_reaches(handle, "prod-eu", StageState.AWAITING_APPROVAL)
    done = await result(handle)  # the server skips the week
    assert done.stages["prod-eu"].state == StageState.FAILED
    since = waiting.stages["prod-eu"].since
    failed = done.stages["prod-eu"].since
    assert since is not None and failed is not None and failed - since >= APPROVAL_BOUND
    assert done.stages["prod-eu"].reason == StageReason.APPROVAL_EXPIRED
    assert "a new revision starts a new run" in done.stages["prod-eu"].message
    assert done.stages["prod-us"].state == StageState.BLOCKED
    assert fleet.clusters["prod-eu"].applied == []


async def test_an_approval_after_the_window_closed_waits_for_its_next_opening(
    own_env: WorkflowEnvironment, own_fleet: Fleet
) -> None:
    env, fleet = own_env, own_fleet
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    now = (await env.get_current_time()).astimezone(UTC)
    start_at = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    window = {  # open now, for 30 minutes, on this weekday: next opening a week later
        "days": [start_at.strftime("%a")],
        "start": start_at.strftime("%H:%M"),
        "end": (start_at + timedelta(minutes=30)).strftime("%H:%M"),
    }
    stage = {"name": "prod-eu", "cluster": "prod-eu", "approval": "Manual", "windows": [window]}
    handle = await start(fleet, spec(fleet, stage))
    waiting = await stage_reaches(handle, "prod-eu", StageState.AWAITING_APPROVAL)
    await env.sleep(timedelta(hours=2))  # the window closes before anyone approves
    assert waiting.freight is not None
    approval = p.Approval(stage="prod-eu", digest=waiting.freight.digest)
    await handle.execute_update(PipelineWorkflow.approve, approval)
    held = await stage_reaches(handle, "prod-eu", StageState.WAITING_FOR_WINDOW)
    assert fleet.clusters["prod-eu"].applied == []
    assert held.stages["prod-eu"].reason == StageReason.OUTSIDE_CHANGE_WINDOW
    done = await result(handle)
    promoted = done.stages["prod-eu"].promoted_at
    assert promoted is not None and promoted >= start_at + timedelta(days=7)


def test_a_stage_names_its_clusters_task_queue() -> None:
    assert stage_task_queue("prod-eu") == "dmrollout-stage-prod-eu"


def freight_condition(record: p.PipelineRecord) -> dict[str, Any]:
    conditions = run_status(record)["conditions"]
    return next(c for c in conditions if c["type"] == "FreightPinned")


async def test_a_tag_that_does_not_resolve_shows_on_the_run_and_fails_it_before_any_stage(
    fleet: Fleet,
) -> None:
    """Issue 34: the run shows its own stages (Pending) before it resolves, so the previous
    run's stages never stand for this revision's; the failed resolve is on FreightPinned with
    its reason and the fix, the phase Failed, and no stage started."""
    fleet.hub.refuse = Reason.MODEL_NOT_FOUND
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"]},
    )
    with pytest.raises(WorkflowFailureError):
        await result(await start(fleet, pipeline))
    first, last = fleet.hub.records[0], fleet.hub.records[-1]
    assert first.freight is None and first.freight_problem is None
    assert {s.state for s in first.stages.values()} == {StageState.PENDING}
    assert run_status(first)["phase"] == PipelinePhase.PROGRESSING
    assert freight_condition(first)["status"] == "Unknown"
    shown = run_status(last)
    assert shown["phase"] == PipelinePhase.FAILED
    assert {s["state"] for s in shown["stages"]} == {StageState.PENDING}
    condition = freight_condition(last)
    assert condition["status"] == "False" and condition["reason"] == Reason.MODEL_NOT_FOUND
    assert "laya:en" in condition["message"]
    assert "dmrollout pipeline retry scoring" in condition["message"]
    assert fleet.hub.resolves == 1  # a permanent reason: not tried again
    assert all(c.applied == [] for c in fleet.clusters.values())


async def test_a_registry_that_never_answers_is_shown_then_bounded(own_fleet: Fleet) -> None:
    """A hung resolve is a bounded step: each timeout shows on FreightPinned (not final,
    saying until when it retries), and after RESOLVE_BOUND the run fails, naming the fix.
    On a server of its own: it skips ten minutes (see ``own_env``)."""
    fleet = own_fleet
    fleet.hub.hang = asyncio.Event()
    fleet.hub.refuse = Reason.REGISTRY_UNAVAILABLE  # after the first: transient, retried
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(fleet, {"name": "staging", "cluster": "staging"})
    handle = await start(fleet, pipeline)
    try:
        with pytest.raises(WorkflowFailureError):
            await result(handle)
    finally:
        fleet.hub.hang.set()
    problems = [r.freight_problem for r in fleet.hub.records if r.freight_problem]
    assert problems and not problems[0].final
    assert problems[0].reason == Reason.REGISTRY_UNAVAILABLE
    assert "resolving again until" in problems[0].message
    assert "did not answer" in problems[0].message
    assert problems[-1].final and "dmrollout pipeline retry" in problems[-1].message
    assert fleet.hub.resolves > 3  # retried until the bound, then failed
    assert problems[-1].since == problems[0].since  # one transition, not one per attempt
    described = await handle.describe()
    assert described.close_time is not None and described.start_time is not None
    took = described.close_time - described.start_time
    assert RESOLVE_BOUND <= took <= RESOLVE_BOUND + timedelta(minutes=2)
    assert fleet.clusters["staging"].applied == []


async def test_a_retry_rolls_out_the_verified_freight_from_where_the_run_failed(
    own_env: WorkflowEnvironment, own_fleet: Fleet
) -> None:
    """Issue 34: a retry of a failed run (decisionmodel.io/retry) carries the freight and the
    stages the failed run promoted: the tag is not resolved again (it serves other bytes
    now), staging is not rolled out again, production gets the verified digest, and its soak
    counts from staging's promotion."""
    env, fleet = own_env, own_fleet
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    fleet.hub.digest = DIGEST_B  # the tag moved since staging verified DIGEST_A
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"], "soak": "1h"},
    )
    promoted_at = (await env.get_current_time()) - timedelta(minutes=20)
    ref = p.PipelineRef(namespace="hub", name="scoring", uid="u1")
    revision = uuid.uuid4().hex[:10]
    inp = p.PipelineInput(
        pipeline=ref,
        revision=revision,
        spec=pipeline,
        retry_of=f"pipeline/hub/scoring/{revision}",
        freight=p.Freight(model="laya:en", digest=DIGEST_A),
        promoted={"staging": promoted_at},
    )
    handle: Handle = await fleet.client.start_workflow(
        PipelineWorkflow.run,
        inp,
        id=f"pipeline/hub/scoring/{revision}/r1",
        task_queue=fleet.hub_queue,
        search_attributes=at_start(inp),
    )
    rec = await stage_reaches(handle, "prod-eu", StageState.SOAKING)
    assert rec.stages["staging"].state == StageState.PROMOTED
    assert rec.stages["staging"].reason == StageReason.PROMOTED_BY_EARLIER_RUN
    assert rec.freight is not None and rec.freight.digest == DIGEST_A
    fleet.hub.digest = DIGEST_A  # served again: production may fetch exactly those bytes
    done = await result(handle)
    assert done.stages["prod-eu"].state == StageState.PROMOTED
    assert [a["digest"] for a in fleet.clusters["prod-eu"].applied] == [DIGEST_A]
    assert fleet.clusters["staging"].applied == []  # not rolled out again
    started = done.stages["prod-eu"].since
    assert started is not None and started >= promoted_at + timedelta(hours=1)
    assert started < promoted_at + timedelta(hours=1, minutes=5)  # not a new hour from now
    # Only the freight-served check asked the registry: never a resolve that pins.
    assert all(r.freight is None or r.freight.digest == DIGEST_A for r in fleet.hub.records)


async def test_a_staging_that_degrades_during_its_soak_stops_production(own_fleet: Fleet) -> None:
    """Issue 34: the soak watches the stage it soaks on. Staging promoted, then its
    DecisionModel degrades (or rolls back) half an hour into production's 2 h soak: staging is
    Failed with the reason and what its cluster said, production Blocked, nothing applied
    there. On a server of its own (see ``own_env``)."""
    fleet = own_fleet
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"], "soak": "2h"},
    )
    fleet.clusters["staging"].health_from = 30  # the soak checks every minute
    fleet.clusters["staging"].health = p.StageHealth(
        serving=False,
        reason=StageReason.UNHEALTHY,
        message="DecisionModel models/scoring serves sha256:bbbbbbbbbbbb, not the freight",
    )
    done = await result(await start(fleet, pipeline))
    assert done.stages["staging"].state == StageState.FAILED
    assert done.stages["staging"].reason == StageReason.UNHEALTHY
    assert "not the freight" in done.stages["staging"].message
    assert done.stages["prod-eu"].state == StageState.BLOCKED
    assert done.stages["prod-eu"].reason == StageReason.DEPENDENCY_FAILED
    assert "staging" in done.stages["prod-eu"].message
    assert fleet.clusters["prod-eu"].applied == []
    assert run_status(done)["phase"] == PipelinePhase.FAILED
    assert fleet.clusters["staging"].checks == 30  # watched, and stopped at the first bad one


async def test_an_approval_binds_the_run_and_the_upstream_verdicts_it_approved(
    fleet: Fleet,
) -> None:
    """Issue 34: an approval for another run, or naming other upstream verdicts than the
    run's, is refused; the run records the verdicts it accepted, and when staging no longer
    serves the freight by the time prod-eu would roll out (rolled back after the approval),
    the approval no longer holds: staging Failed, prod-eu Blocked naming the verdicts, nothing
    applied in prod."""
    for c in fleet.clusters.values():
        await fleet.start_worker(c)
    staging = fleet.clusters["staging"]
    staging.health = p.StageHealth(
        serving=False, reason=StageReason.UNHEALTHY, message="rolled back by its watch"
    )
    pipeline = spec(
        fleet,
        {"name": "staging", "cluster": "staging"},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"], "approval": "Manual"},
    )
    handle = await start(fleet, pipeline)
    waiting = await stage_reaches(handle, "prod-eu", StageState.AWAITING_APPROVAL)
    rollout = waiting.stages["staging"].rollout_workflow_id
    verdicts = {"staging": f"Promoted@{rollout}"}
    refused = [
        p.Approval(stage="prod-eu", digest=DIGEST_A, run_id="pipeline/hub/scoring/other"),
        p.Approval(stage="prod-eu", digest=DIGEST_A, upstream={"staging": "Promoted@elsewhere"}),
    ]
    for approval in refused:
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(PipelineWorkflow.approve, approval)
    said = await handle.execute_update(
        PipelineWorkflow.approve,
        p.Approval(stage="prod-eu", digest=DIGEST_A, run_id=handle.id, upstream=verdicts),
    )
    assert f"staging=Promoted@{rollout}" in said
    done = await result(handle)
    assert done.stages["staging"].state == StageState.FAILED
    assert "rolled back by its watch" in done.stages["staging"].message
    blocked = done.stages["prod-eu"]
    assert blocked.state == StageState.BLOCKED
    assert f"the approval was for {verdicts}" in blocked.message
    assert fleet.clusters["prod-eu"].applied == []

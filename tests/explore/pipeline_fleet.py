"""The fleet a pipeline lifecycle runs on: the hub's worker and one worker per stage cluster,
on Temporal's time-skipping server, with the clusters' side faked (docs/explore.md
"Pipelines"). Every call the workflows make is logged with the server's (skipped) time, which
the invariants read (pipeline_checks).

The hub answers the tag's digest (re-published by an operation) or refuses; a cluster applies
the stage's DecisionModel, reaches the verdict the lifecycle set for it, and answers whether a
promoted stage still serves. A cluster that is away fails every call with a retryable error
(its API server or network gone): the time-skipping server skips no time while a task waits in
a queue that nobody polls, so a cluster whose worker is gone cannot be modelled there.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError
from temporalio.worker import Worker

from decisionmodel.api.pipeline import stage_task_queue
from decisionmodel.pipeline import contracts as p
from decisionmodel.vocabulary import StageState
from workflows.pipeline import PipelineWorkflow
from workflows.pipeline_stage import PipelineStageWorkflow


def _now() -> datetime:
    """The server's time of this activity's attempt: the skipped clock the workflows read."""
    return activity.info().current_attempt_scheduled_time


def _run_of(child_id: str) -> str:
    """A stage's child workflow is ``<run>/<stage>``: the run it belongs to."""
    return child_id.rsplit("/", 1)[0]


@dataclass
class Apply:
    run: str
    stage: str
    digest: str
    at: datetime


@dataclass
class Hub:
    digest: str
    refuse: str | None = None  # resolves fail with this reason while set
    records: list[p.PipelineRecord] = field(default_factory=list)
    resolves: int = 0

    def activities(self) -> list[object]:
        @activity.defn(name=p.RESOLVE_FREIGHT)
        async def resolve(inp: p.ResolveFreightInput) -> p.Freight:
            self.resolves += 1
            if self.refuse is not None:
                raise ApplicationError(f"{inp.model}: {self.refuse}", type=self.refuse)
            return p.Freight(model=inp.model, digest=self.digest)

        @activity.defn(name=p.RECORD_PIPELINE)
        async def record(rec: p.PipelineRecord) -> None:
            self.records.append(rec)

        return [resolve, record]


@dataclass
class Cluster:
    name: str
    applies: list[Apply]  # shared by the fleet: one log for the invariants
    verdict: StageState = StageState.PROMOTED
    serving: bool = True  # what a health check of its promoted stage answers
    away: bool = False
    worker: Worker | None = None

    def _reachable(self) -> None:
        if self.away:
            raise ApplicationError(
                f"cluster {self.name} does not answer",
                type="Unavailable",
                category=ApplicationErrorCategory.BENIGN,  # expected: logged at DEBUG, not each try
            )

    def activities(self) -> list[object]:
        @activity.defn(name=p.APPLY_STAGE)
        async def apply(inp: p.StageInput) -> p.AppliedStage:
            self._reachable()
            run = _run_of(activity.info().workflow_id or "")
            self.applies.append(Apply(run, inp.stage, str(inp.spec.get("digest")), _now()))
            return p.AppliedStage(namespace=inp.namespace, name=inp.name, uid="u", generation=1)

        @activity.defn(name=p.AWAIT_STAGE_ROLLOUT)
        async def rollout(applied: p.AppliedStage) -> p.StageRollout:
            self._reachable()
            return p.StageRollout(
                workflow_id=f"rollout/{applied.namespace}/{applied.name}/{self.name}",
                temporal_namespace=f"rollouts-{self.name}",
            )

        @activity.defn(name=p.AWAIT_STAGE_VERDICT)
        async def verdict(rollout: p.StageRollout) -> p.StageVerdict:
            self._reachable()
            promoted = self.verdict == StageState.PROMOTED
            reason = "AsExpected" if promoted else "EvaluationFailed"
            return p.StageVerdict(state=self.verdict, reason=reason, message=f"in {self.name}")

        @activity.defn(name=p.ABORT_STAGE_ROLLOUT)
        async def abort(inp: p.AbortStageRollout) -> bool:
            self._reachable()
            return True  # the cluster's rollout is not modelled: its abort always lands

        @activity.defn(name=p.CHECK_STAGE)
        async def check(inp: p.StageHealthInput) -> p.StageHealth:
            self._reachable()
            if self.serving:
                return p.StageHealth(serving=True)
            return p.StageHealth(serving=False, reason="Degraded", message=f"{self.name} down")

        return [apply, rollout, verdict, abort, check]


@dataclass
class Fleet:
    client: Client
    hub: Hub
    hub_queue: str
    clusters: dict[str, Cluster]
    applies: list[Apply]
    stack: AsyncExitStack

    @classmethod
    async def start(
        cls, client: Client, suffix: str, names: list[str], digest: str, stack: AsyncExitStack
    ) -> Fleet:
        applies: list[Apply] = []
        hub = Hub(digest)
        fleet = cls(
            client,
            hub,
            f"hub-{suffix}",
            {n: Cluster(f"{n}-{suffix}", applies) for n in names},
            applies,
            stack,
        )
        await stack.enter_async_context(
            Worker(
                client,
                task_queue=fleet.hub_queue,
                workflows=[PipelineWorkflow],
                activities=hub.activities(),
            )
        )
        # The clusters' workers too, however the lifecycle ends (one the test server failed
        # left them polling a server that was gone).
        stack.push_async_callback(fleet.workers_down)
        return fleet

    async def workers_down(self) -> None:
        for name in self.clusters:
            with contextlib.suppress(Exception):
                await self.down(name)

    async def up(self, name: str) -> bool:
        cluster = self.clusters[name]
        if cluster.worker is not None:
            return False
        cluster.worker = Worker(
            self.client,
            task_queue=stage_task_queue(cluster.name),
            workflows=[PipelineStageWorkflow],
            activities=cluster.activities(),
        )
        asyncio.get_running_loop().create_task(cluster.worker.run())
        return True

    async def down(self, name: str) -> bool:
        cluster = self.clusters[name]
        if cluster.worker is None:
            return False
        worker, cluster.worker = cluster.worker, None
        await asyncio.wait_for(worker.shutdown(), timeout=60)
        return True

    async def close(self, runs: list[str], stages: list[str]) -> None:
        """Stop the lifecycle: its runs and their stages' workflows still going are terminated,
        so that none of their timers or retries loads the shared server for the next
        lifecycle (a stage cancelled with its run waits for its cluster's abort), then its
        workers."""
        for wid in [*runs, *(f"{run}/{stage}" for run in runs for stage in stages)]:
            handle = self.client.get_workflow_handle(wid)
            with contextlib.suppress(RPCError):
                await asyncio.wait_for(handle.terminate("the lifecycle ended"), 30)
        for name in self.clusters:
            await self.down(name)

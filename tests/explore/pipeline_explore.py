"""Random pipeline lifecycles (issue 34: the explorer drives pipelines too), on Temporal's
time-skipping server with the real PipelineWorkflow and PipelineStageWorkflow and the clusters'
side faked (pipeline_fleet): seeded stage graphs (dependencies, soaks, Manual approvals, change
windows, a pinned or a resolved template), then operations a person or a fault applies (time
passing, approvals right and stale, abort, a new revision superseding the run, a retry of a
failed run, the tag re-published and restored, the registry away, a cluster away and back, a
cluster's rollout failing, a promoted stage degrading), then the faults healed and every stage
approved until every run has ended. The invariants (pipeline_checks) are judged on what the
clusters were asked and when, the runs' records and histories.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipeline_fleet import Fleet
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from decisionmodel.api.pipeline import DecisionModelPipelineSpec
from decisionmodel.pipeline import contracts as p
from decisionmodel.pipeline.retry import retry_asked
from decisionmodel.pipeline.status import run_phase, run_status
from decisionmodel.vocabulary import PipelinePhase, StageState
from workflows.pipeline import PipelineWorkflow
from workflows.pipeline_attributes import at_start

# The stage states a run ends with.
ENDED = frozenset(
    {
        StageState.PROMOTED,
        StageState.FAILED,
        StageState.BLOCKED,
        StageState.ABORTED,
        StageState.SUPERSEDED,
    }
)

Handle = WorkflowHandle[PipelineWorkflow, p.PipelineRecord]
DIGEST = "a" * 64
PINNED = "c" * 64
SKIPS = (timedelta(minutes=1), timedelta(minutes=10), timedelta(hours=1), timedelta(hours=3))
SKIPS += (timedelta(days=1),)
WINDOW = {"days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], "start": "09:00"}
WINDOW |= {"end": "17:00", "timeZone": "UTC"}
# (operation, weight): what a person or a fault does between two looks.
OPS = (
    ("skip", 8),
    ("approve", 5),
    ("approve_stale", 1),
    ("abort", 1),
    ("supersede", 1),
    ("retry", 2),
    ("republish", 1),
    ("restore_tag", 1),
    ("registry_down", 1),
    ("registry_up", 1),
    ("cluster_away", 1),
    ("cluster_back", 2),
    ("stage_fails", 1),
    ("stage_succeeds", 1),
    ("degrade", 1),
    ("recover", 1),
)
# After the operations: rounds of (heal, approve what waits, a day passes) until every run ended.
SETTLE_ROUNDS = 12


@dataclass
class Run:
    wid: str
    revision: str
    spec: DecisionModelPipelineSpec
    handle: Handle
    inherited: dict[str, datetime] = field(default_factory=dict)  # a retry's promoted stages
    freight: p.Freight | None = None  # a retry's, given
    stopped_at: datetime | None = None  # abort or supersede sent
    approvals: dict[str, datetime] = field(default_factory=dict)  # stage -> accepted at
    final: p.PipelineRecord | None = None


@dataclass
class Lifecycle:
    seed: int
    env: WorkflowEnvironment
    fleet: Fleet
    names: list[str]
    suffix: str
    rng: random.Random
    pinned: bool
    runs: list[Run] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # approvals that must be refused, were not
    retries: int = 0
    ops: Counter[str] = field(default_factory=Counter)

    @property
    def current(self) -> Run:
        return self.runs[-1]

    def note(self, text: str) -> None:
        self.trace.append(text)

    async def now(self) -> datetime:
        return await self.env.get_current_time()


def stages(rng: random.Random, names: list[str], suffix: str) -> list[dict[str, Any]]:
    """A random DAG: each stage depends on a random subset of the earlier ones."""
    out = []
    for i, name in enumerate(names):
        stage: dict[str, Any] = {"name": name, "cluster": f"{name}-{suffix}", "namespace": "m"}
        earlier = names[:i]
        deps = [d for d in earlier if rng.random() < 0.6] or (earlier[-1:] if earlier else [])
        if deps:
            stage["dependsOn"] = deps
            stage["soak"] = rng.choice(["0s", "10m", "2h"])
        if rng.random() < 0.4:
            stage["approval"] = "Manual"
        if rng.random() < 0.2:
            stage["windows"] = [dict(WINDOW)]
        out.append(stage)
    return out


def pipeline_spec(rng: random.Random, names: list[str], suffix: str, pinned: bool) -> Any:
    template: dict[str, Any] = {"model": "laya:en"}
    if pinned:
        template["digest"] = PINNED
    return DecisionModelPipelineSpec.model_validate(
        {"template": {"spec": template}, "stages": stages(rng, names, suffix)}
    )


async def skip(env: WorkflowEnvironment, duration: timedelta) -> None:
    """Let ``duration`` pass on the server's clock. The test server answers a sleep it could
    not finish in time (its workers busy with retries) with "Timeout expired": the rest of it is
    slept again, a bounded number of times."""
    target = await env.get_current_time() + duration
    for _ in range(10):
        left = target - await env.get_current_time()
        if left <= timedelta(0):
            return
        try:
            await asyncio.wait_for(env.sleep(left), 180)
            return
        except RPCError as e:
            if "Timeout expired" not in str(e):
                raise
    raise AssertionError(f"the test server did not let {duration} pass in 10 tries")


async def start_run(
    life: Lifecycle,
    revision: str,
    wid: str,
    spec: DecisionModelPipelineSpec | None = None,
    **retry: Any,
) -> Run:
    """A run as the hub's controller starts it: a new revision (a new random spec over the same
    clusters), or a retry of the same one with what the failed run established."""
    if spec is None:
        spec = pipeline_spec(life.rng, life.names, life.suffix, life.pinned)
    ref = p.PipelineRef(namespace="hub", name=f"p{life.seed}", uid="u1")
    inp = p.PipelineInput(pipeline=ref, revision=revision, spec=spec, **retry)
    handle: Handle = await life.fleet.client.start_workflow(
        PipelineWorkflow.run,
        inp,
        id=wid,
        task_queue=life.fleet.hub_queue,
        search_attributes=at_start(inp),
    )
    run = Run(wid, revision, spec, handle, dict(inp.promoted), inp.freight)
    life.runs.append(run)
    return run


async def progress(run: Run) -> p.PipelineRecord | None:
    """The run's record (the query; its result once it ended)."""
    if run.final is not None:
        return run.final
    try:
        return await asyncio.wait_for(
            run.handle.query(PipelineWorkflow.progress, result_type=p.PipelineRecord), 30
        )
    except Exception:  # not answerable now
        return None


async def ended(run: Run, life: Lifecycle | None = None) -> p.PipelineRecord | None:
    """The run's final record once it has ended, else None (no wait). Read by a query, never by
    waiting for the result (on the time-skipping server a client waiting for a result lets the
    clock run to the next timer of any workflow: a lifecycle once jumped ten years) nor by a
    describe (the test server fails one with a NullPointerException while a child is being
    started). Ended: every stage in a final state, or the freight given up."""
    if run.final is not None:
        return run.final
    try:
        rec = await asyncio.wait_for(
            run.handle.query(PipelineWorkflow.progress, result_type=p.PipelineRecord), 60
        )
    except Exception:  # failed (a final freight problem) before it could answer: its records
        records = records_of(life, run) if life is not None else []
        rec = records[-1] if records else None
        if rec is None:
            return None
    done = all(stage.state in ENDED for stage in rec.stages.values())
    if done or (rec.freight_problem is not None and rec.freight_problem.final):
        run.final = rec
    return run.final


def records_of(life: Lifecycle, run: Run) -> list[p.PipelineRecord]:
    """Every status the run wrote, in order."""
    return [r for r in life.fleet.hub.records if r.workflow_id == run.wid]


async def approve(life: Lifecycle, run: Run, stage: str, digest: str, run_id: str) -> bool:
    sent = await life.now()  # nothing skips time while the update is on its way
    try:
        await asyncio.wait_for(
            run.handle.execute_update(
                PipelineWorkflow.approve,
                p.Approval(stage=stage, digest=digest, by="explorer", run_id=run_id),
            ),
            60,
        )
    except (WorkflowUpdateFailedError, RPCError):  # refused, or the run closed meanwhile
        return False
    run.approvals.setdefault(stage, sent)
    return True


async def apply_op(life: Lifecycle, kind: str) -> str:
    run = life.current
    names = life.names
    if kind == "skip":
        d = life.rng.choice(SKIPS)
        if any(c.away for c in life.fleet.clusters.values()):
            # Each call to an away cluster is retried every 30 s (the product's policy): a day
            # is thousands of attempts the test server works through in real time, past its
            # own deadline ("Timeout expired"). An hour at most while one is away.
            d = min(d, timedelta(hours=1))
        await skip(life.env, d)
        return f"skip {d}"
    if kind in ("approve", "approve_stale"):
        return await _approve_op(life, run, kind == "approve_stale")
    if kind in ("abort", "supersede"):
        if await ended(run, life) is not None:
            return f"{kind}: {run.wid} has ended"
        reason = "explorer" if kind == "abort" else "superseded by revision r2"
        run.stopped_at = await life.now()
        await run.handle.signal(PipelineWorkflow.abort, reason)
        if kind == "supersede":
            rev = uuid.uuid4().hex[:10]
            new = await start_run(life, rev, f"pipeline/hub/p{life.seed}/{rev}")
            return f"supersede {run.wid} by {new.wid}"
        return f"abort {run.wid}"
    if kind == "retry":
        return await _retry_op(life, run)
    return await _fault_op(life, kind, names)


async def _approve_op(life: Lifecycle, run: Run, stale: bool) -> str:
    rec = await progress(run)
    if rec is None:
        return "approve: no record"
    manual = [s.name for s in run.spec.stages if s.approval == "Manual"]
    if not manual:
        return "approve: no Manual stage"
    stage = life.rng.choice(manual)
    digest = rec.freight.digest if rec.freight else DIGEST
    if stale:
        wrong = life.rng.choice(["digest", "run"])
        ok = await approve(
            life,
            run,
            stage,
            "f" * 64 if wrong == "digest" else digest,
            run.wid if wrong == "digest" else f"{run.wid}/other",
        )
        if ok:
            life.refused.append(f"{run.wid} {stage}: an approval for another {wrong} was taken")
        return f"approve_stale({wrong}) {stage}: {'taken' if ok else 'refused'}"
    # Whether the stage awaits an approval is the run's to judge when the update arrives (it
    # may have moved on since the look); an apply without one is what check_applies flags.
    ok = await approve(life, run, stage, digest, run.wid)
    return f"approve {stage} ({rec.stages[stage].state}): {'taken' if ok else 'refused'}"


async def _retry_op(life: Lifecycle, run: Run) -> str:
    rec = await ended(run, life)
    if rec is None:
        return f"retry: {run.wid} is still running"
    if run_phase(rec) not in (PipelinePhase.FAILED, PipelinePhase.ABORTED):
        return f"retry: {run.wid} ended {run_phase(rec)}"
    life.retries += 1
    status = {**run_status(rec), "workflowId": run.wid}
    base = f"pipeline/hub/p{life.seed}/{run.revision}"
    asked = retry_asked(status, run.wid, base, f"t{life.retries}")
    assert asked is not None, status
    await start_run(
        life,
        run.revision,
        asked.workflow_id,
        run.spec,
        retry_of=asked.retry_of,
        freight=asked.freight,
        promoted=asked.promoted,
    )
    return f"retry {run.wid} as {asked.workflow_id} (kept {sorted(asked.promoted)})"


async def _fault_op(life: Lifecycle, kind: str, names: list[str]) -> str:
    fleet, name = life.fleet, life.rng.choice(names)
    cluster = fleet.clusters[name]
    if kind == "republish":
        fleet.hub.digest = uuid.uuid4().hex * 2
        return "republish: the tag moves"
    if kind == "restore_tag":
        fleet.hub.digest = DIGEST
        return "restore_tag"
    if kind == "registry_down":
        fleet.hub.refuse = "RegistryUnavailable"
        return "registry_down"
    if kind == "registry_up":
        fleet.hub.refuse = None
        return "registry_up"
    if kind == "cluster_away":
        cluster.away = True
    elif kind == "cluster_back":
        cluster.away = False
    elif kind == "stage_fails":
        cluster.verdict = StageState.FAILED
    elif kind == "stage_succeeds":
        cluster.verdict = StageState.PROMOTED
    elif kind == "degrade":
        cluster.serving = False
    elif kind == "recover":
        cluster.serving = True
    return f"{kind} {name}"


async def heal(life: Lifecycle) -> None:
    fleet = life.fleet
    fleet.hub.refuse = None
    fleet.hub.digest = DIGEST
    for cluster in fleet.clusters.values():
        cluster.serving, cluster.away = True, False


async def settle(life: Lifecycle) -> list[str]:
    """Heal, approve what waits (as a person would, with the run's freight), let a day pass;
    until every run has ended. What is still open after the rounds."""
    await heal(life)
    for _ in range(SETTLE_ROUNDS):
        open_runs = [r for r in life.runs if await ended(r, life) is None]
        if not open_runs:
            return []
        for run in open_runs:
            rec = await progress(run)
            if rec is None or rec.freight is None:
                continue
            for name, stage in rec.stages.items():
                if stage.state == StageState.AWAITING_APPROVAL:
                    await approve(life, run, name, rec.freight.digest, run.wid)
        await skip(life.env, timedelta(days=1))
    return [r.wid for r in life.runs if await ended(r, life) is None]


async def lifecycle(
    env: WorkflowEnvironment, seed: int, ops: int, stack: AsyncExitStack
) -> Lifecycle:
    rng = random.Random(seed)
    suffix = f"{seed}-{uuid.uuid4().hex[:4]}"
    names = [f"s{i}" for i in range(rng.randint(1, 4))]
    fleet = await Fleet.start(env.client, suffix, names, DIGEST, stack)
    life = Lifecycle(seed, env, fleet, names, suffix, rng, pinned=rng.random() < 0.2)
    for name in names:
        await fleet.up(name)
        fleet.clusters[name].away = rng.random() < 0.15
    rev = uuid.uuid4().hex[:10]
    await start_run(life, rev, f"pipeline/hub/p{seed}/{rev}")
    shown = [s.model_dump(by_alias=True, exclude_defaults=True) for s in life.current.spec.stages]
    life.note(f"seed {seed}, pinned {life.pinned}: stages {shown}")
    kinds, weights = zip(*OPS, strict=True)
    for _ in range(ops):
        kind = rng.choices(kinds, weights)[0]
        life.ops[kind] += 1
        life.note(f"{await life.now():%Y-%m-%d %H:%M} {await apply_op(life, kind)}")
    left = await settle(life)
    for wid in left:
        life.note(f"still running after {SETTLE_ROUNDS} days of settling: {wid}")
    return life

"""The pipeline controller of the hub (issue 25): one PipelineWorkflow per pipeline revision.

Level-triggered from a list-then-watch of DecisionModelPipelines (and a resync every
``RESYNC_SECONDS``). For each: the spec is read as a pipeline (a cycle, a bad template:
``Accepted=False/PipelineInvalid`` naming the field, nothing started, nothing applied to any
cluster); its revision's run is started (idempotent by workflow ID); a run of an older
revision is aborted (superseded: its stages in flight roll back, promoted ones keep serving);
every stage's cluster is checked for a worker polling its task queue first: while one is not
(``StageWorkersPolling=False/NoStageWorker`` naming the stage, its cluster and the fix) the
revision's run is not started, so no earlier stage rolls out, and each reconcile looks again; a
deleted pipeline's run is aborted. The controller writes only its own status fields
(observedGeneration, revision, workflowId, conditions); the run writes the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import ValidationError

from controller.machinery.lifecycle import Elector, Outcome, run_leading, stop_on_signals
from controller.serve.liveness import LoopProgress
from controller.temporal import runs
from controller.temporal.runs import TemporalCallError, TemporalClient
from decisionmodel.api.pipeline import DecisionModelPipelineSpec, stage_task_queue
from decisionmodel.engine.render.labels import ANNOTATION_RETRY
from decisionmodel.pipeline.contracts import (
    HUB_TASK_QUEUE,
    PIPELINE_WORKFLOW_ID_PREFIX,
    PipelineInput,
    PipelineRef,
)
from decisionmodel.pipeline.retry import Retry, retry_asked
from decisionmodel.pipeline.revision import pipeline_revision, pipeline_workflow_id
from decisionmodel.vocabulary import (
    ConditionStatus,
    PipelineCondition,
    PipelinePhase,
    PipelineReason,
    StatusKey,
)
from kube.client import Kube
from kube.errors import KubeError, Unavailable
from kube.pipelines import PIPELINE_CONTROLLER_MANAGER, apply_pipeline_status
from kube.watch import Changes, Listed, ListWatch, Obj, source
from workflows import search_attributes as sa
from workflows.pipeline import PipelineWorkflow
from workflows.pipeline_attributes import at_start

log = logging.getLogger("dmrollout.pipelines")

RESYNC_SECONDS: Final = 30.0
# Retrying a list the API server refused (429, 5xx) or could not answer: 1 s doubling to 30 s.
BACKOFF_FIRST_SECONDS: Final = 1.0
BACKOFF_MAX_SECONDS: Final = 30.0
# A reconcile is a few calls, each bounded (RPC_TIMEOUT, the Kubernetes client's timeouts):
# one in flight this long is a wedged loop, and /healthz says so.
STALL_SECONDS: Final = 120.0
ENDED_PHASES: Final = frozenset(
    {PipelinePhase.SUCCEEDED.value, PipelinePhase.FAILED.value, PipelinePhase.ABORTED.value}
)
STALLED_PHASES: Final = frozenset(
    {PipelinePhase.FAILED.value, PipelinePhase.ABORTED.value, PipelinePhase.INVALID.value}
)
# Running runs looked at per full list; more are found by the lists after.
ORPHAN_SCAN_LIMIT: Final = 1000
PIPELINE_WORKFLOW: Final = "PipelineWorkflow"


def read_spec(obj: Obj) -> tuple[DecisionModelPipelineSpec | None, str]:
    """The spec, or None and what is wrong with it (every field named)."""
    try:
        return DecisionModelPipelineSpec.model_validate(obj.get("spec") or {}), ""
    except ValidationError as e:
        problems = [
            f"spec.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}".replace("spec.: ", "")
            for err in e.errors()
        ]
        return None, "; ".join(problems)[:1000]


def condition(kind: PipelineCondition, ok: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind.value,
        "status": (ConditionStatus.TRUE if ok else ConditionStatus.FALSE).value,
        "reason": reason,
        "message": message[:1024],
    }


def kstatus_conditions(phase: str | None, blocked: dict[str, Any] | None) -> list[dict[str, Any]]:
    """kstatus' Reconciling or Stalled for the revision's run in ``phase`` (None: not started
    or not written yet); ``blocked``: a False Accepted or StageWorkersPolling condition, which
    only a change (or an installed worker) ends. Without them kstatus read every pipeline as
    Current, a running or failed one included (issue 38)."""
    if blocked is not None:
        return [condition(PipelineCondition.STALLED, True, blocked["reason"], blocked["message"])]
    if phase in STALLED_PHASES:
        message = (
            f"the run of this revision ended {phase}: change the spec, or set a new "
            "decisionmodel.io/retry value"
        )
        return [condition(PipelineCondition.STALLED, True, str(phase), message)]
    if phase == PipelinePhase.SUCCEEDED.value:
        return []
    doing = f"is {phase}" if phase else "is starting"
    reason = phase or PipelineReason.RESOLVING.value
    return [
        condition(PipelineCondition.RECONCILING, True, reason, f"the run of this revision {doing}")
    ]


def phase_of(status: dict[str, Any], wid: str) -> bool:
    """Whether status.phase is run ``wid``'s: the run names itself in what it records
    (runWorkflowId); a record from before that field, by the workflowId the controller wrote.
    Before, a new revision or a retry was judged on the previous run's phase until its first
    record (Current after a success, Stalled after a failure)."""
    recorded = status.get("runWorkflowId")
    return bool(recorded == wid if recorded else status.get("workflowId") == wid)


def stamped(conditions: list[dict[str, Any]], obj: Obj) -> list[dict[str, Any]]:
    """Each condition with its lastTransitionTime: kept from the stored one when its status
    did not change (a resync rewrites nothing), now otherwise."""
    stored = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for c in conditions:
        before = stored.get(c["type"]) or {}
        same = before.get("status") == c["status"] and before.get("lastTransitionTime")
        out.append({**c, "lastTransitionTime": before["lastTransitionTime"] if same else now})
    return out


class PipelineHealth:
    """What ``/readyz`` and ``/healthz`` of the pipeline controller say. Ready: leading, and
    the last list of the pipelines succeeded (not backing off after an API error). Alive:
    no reconcile in flight for longer than ``STALL_SECONDS`` (a wedged loop; a loop backing
    off is alive: it retries on its own)."""

    def __init__(self, stall_seconds: float = STALL_SECONDS) -> None:
        self.progress = LoopProgress(stall_seconds)
        self.listed = False
        self.failed_lists = 0  # in a row; 0 once a list succeeds

    def ready(self) -> bool:
        return self.listed

    def healthy(self) -> bool:
        return self.progress.healthy()


class PipelineController:
    def __init__(
        self, kube: Kube, client: TemporalClient, health: PipelineHealth | None = None
    ) -> None:
        self.kube = kube
        self.client = client
        self.known: dict[tuple[str, str], str] = {}  # (ns, name) -> workflow id of its run
        self.health = health or PipelineHealth()
        self.pause: Callable[[float], Awaitable[None]] = asyncio.sleep  # tests skip the waits

    async def run(self) -> None:
        """Watch until cancelled. An API server that answers 429 or 5xx, or cannot be reached,
        is retried with a bounded backoff (not ready meanwhile), never a reason to exit: the
        first list of a start-up meets a busy API server as often as a later one."""
        while True:
            try:
                await self._watch()
            except Unavailable as e:
                self.health.listed = False
                self.health.failed_lists += 1
                pause = backoff(self.health.failed_lists)
                log.warning(
                    "the API server could not list the pipelines (%s): again in %.0f s", e, pause
                )
                await self.pause(pause)

    async def _watch(self) -> None:
        watch = ListWatch(self.kube, source("DecisionModelPipeline", None))
        async with aclosing(watch.events(idle=RESYNC_SECONDS)) as events:
            current: dict[tuple[str, str], Obj] = {}
            async for event in events:
                if isinstance(event, Listed):
                    self.health.listed, self.health.failed_lists = True, 0
                    current = {_key(o): o for o in event.items}
                    await self.abort_orphans(set(current))
                elif isinstance(event, Changes):
                    for change in event.changes:
                        if change.type == "DELETED":
                            current.pop(_key(change.object), None)
                            await self.deleted(change.object)
                        else:
                            current[_key(change.object)] = change.object
                for obj in list(current.values()):
                    await self.reconcile_safely(obj)

    async def reconcile_safely(self, obj: Obj) -> None:
        self.health.progress.started()
        try:
            await self.reconcile(obj)
        except (KubeError, TemporalCallError) as e:  # the next event or resync tries again
            log.warning("pipeline %s/%s: %s", *_key(obj), e)
        finally:
            self.health.progress.finished()

    async def reconcile(self, obj: Obj) -> None:
        meta = obj["metadata"]
        status = obj.get("status") or {}
        spec, problem = read_spec(obj)
        if spec is None:
            invalid = condition(
                PipelineCondition.ACCEPTED, False, PipelineReason.PIPELINE_INVALID, problem
            )
            # The run of the last valid revision (if any) stays named, so the CLI still reaches
            # it; only a pipeline that never had one shows phase Invalid.
            kept = {k: status[k] for k in ("revision", "workflowId") if status.get(k)}
            phase = {} if kept else {"phase": PipelinePhase.INVALID.value}
            stalled = kstatus_conditions(None, invalid)
            await self._write(obj, {**kept, **phase, "conditions": [invalid, *stalled]})
            return
        revision = pipeline_revision(spec)
        base = pipeline_workflow_id(meta["namespace"], meta["name"], revision)
        # The revision's current run: its first, or the latest retry of it.
        current = status.get("workflowId") or self.known.get(_key(obj)) or ""
        wid = current if current == base or current.startswith(f"{base}/") else base
        token = (meta.get("annotations") or {}).get(ANNOTATION_RETRY)
        retry = retry_asked(status, wid, base, token)
        if retry is not None:
            wid = retry.workflow_id
        accepted = condition(PipelineCondition.ACCEPTED, True, PipelineReason.ACCEPTED, "")
        polling = await self._stage_workers(spec, revision)
        started = wid in (status.get("workflowId"), self.known.get(_key(obj)))
        if polling["status"] != ConditionStatus.TRUE.value and not started:
            # A stage no worker serves would wait forever once reached, after the stages
            # before it rolled out: the run waits to start (nothing applied anywhere), and the
            # next reconcile (a change, or the resync) looks again.
            stalled = kstatus_conditions(None, polling)
            await self._write(obj, {"conditions": [accepted, polling, *stalled]})
            return
        # A run that ended is the record of its revision: never started again, even once
        # Temporal's retention has deleted it (status is the durable record).
        ended = status.get("workflowId") == wid and status.get("phase") in ENDED_PHASES
        if not ended:
            await self._start(obj, spec, revision, wid, retry)
        previous = status.get("workflowId") or self.known.get(_key(obj))
        if previous and previous != wid:
            await self._abort(previous, f"superseded by revision {revision}")
        self.known[_key(obj)] = wid
        fields: dict[str, Any] = {"revision": revision, "workflowId": wid}
        consumed = retry.token if retry else status.get(StatusKey.LAST_RETRY_TOKEN)
        if consumed:
            fields[StatusKey.LAST_RETRY_TOKEN.value] = consumed
        # The phase is the run's (its activity writes it): this revision's once it has written.
        run_phase = status.get("phase") if phase_of(status, wid) else None
        blocked = polling if polling["status"] != ConditionStatus.TRUE.value else None
        kstatus = kstatus_conditions(run_phase, blocked)
        await self._write(obj, {**fields, "conditions": [accepted, polling, *kstatus]})

    async def abort_orphans(self, listed: set[tuple[str, str]]) -> None:
        """Abort the running runs whose pipeline is not in the full list (deleted while no
        controller watched, so no DELETED event came): one bounded visibility list per full
        list of the pipelines (start-up, each relist), never one per pipeline."""
        query = f"WorkflowType = '{PIPELINE_WORKFLOW}' AND ExecutionStatus = 'Running'"
        try:
            async for wid, attributes in runs.running(self.client, query, ORPHAN_SCAN_LIMIT):
                owner = _owner(wid, attributes.get(sa.DM_PIPELINE))
                if owner is not None and owner not in listed:
                    await self._abort(wid, "the DecisionModelPipeline was deleted")
        except TemporalCallError as e:  # the next full list looks again
            log.warning("could not list the running pipeline runs: %s", e)

    async def deleted(self, obj: Obj) -> None:
        wid = ((obj.get("status") or {}).get("workflowId")) or self.known.pop(_key(obj), None)
        if wid:
            await self._abort(wid, "the DecisionModelPipeline was deleted")

    async def _start(
        self,
        obj: Obj,
        spec: DecisionModelPipelineSpec,
        revision: str,
        wid: str,
        retry: Retry | None = None,
    ) -> None:
        meta = obj["metadata"]
        ref = PipelineRef(
            namespace=meta["namespace"],
            name=meta["name"],
            uid=meta.get("uid", ""),
            generation=int(meta.get("generation") or 0),
        )
        inp = PipelineInput(pipeline=ref, revision=revision, spec=spec)
        if retry is not None:
            inp = inp.model_copy(
                update={
                    "retry_of": retry.retry_of,
                    "freight": retry.freight,
                    "promoted": retry.promoted,
                }
            )
        started = await runs.start_once(
            self.client,
            PipelineWorkflow.run,
            inp,
            wid=wid,
            attributes=at_start(inp),
            task_queue=HUB_TASK_QUEUE,
            # One run per revision: an ended run is not started again by a resync.
            reuse=runs.Reuse.ONCE,
            summary=f"pipeline {ref.namespace}/{ref.name} revision {revision}",
        )
        if started:
            log.info("pipeline %s/%s: started %s", ref.namespace, ref.name, wid)

    async def _abort(self, wid: str, reason: str) -> None:
        try:
            if await runs.signal_if_running(self.client, wid, PipelineWorkflow.abort, reason):
                log.info("aborted %s: %s", wid, reason)
        except TemporalCallError as e:
            log.warning("could not abort %s: %s", wid, e)

    async def _stage_workers(
        self, spec: DecisionModelPipelineSpec, revision: str
    ) -> dict[str, Any]:
        """Whether a worker polls each stage's task queue (Temporal keeps pollers of the last
        few minutes): a queue nobody polls is a cluster not installed, misspelt, or away."""
        polled: dict[str, bool] = {}
        for cluster in sorted({s.cluster for s in spec.stages}):
            polled[cluster] = await runs.polled(self.client, stage_task_queue(cluster))
        missing = [
            f"stage {s.name} (spec.stages[{i}].cluster {s.cluster!r}: no worker polls "
            f"{stage_task_queue(s.cluster)})"
            for i, s in enumerate(spec.stages)
            if not polled[s.cluster]
        ]
        if not missing:
            return condition(
                PipelineCondition.STAGE_WORKERS_POLLING, True, PipelineReason.POLLING, ""
            )
        message = (
            f"{'; '.join(missing)}: the run of revision {revision} waits to start, so no stage "
            "rolls out, until a worker polls every stage's queue; install dmrollout in that "
            "cluster with pipelines.stageCluster set to its name (DMROLLOUT_STAGE_CLUSTER), or "
            "fix the stage's cluster"
        )
        return condition(
            PipelineCondition.STAGE_WORKERS_POLLING, False, PipelineReason.NO_STAGE_WORKER, message
        )

    async def _write(self, obj: Obj, status: dict[str, Any]) -> None:
        meta = obj["metadata"]
        body = {StatusKey.OBSERVED_GENERATION.value: int(meta.get("generation") or 0), **status}
        body["conditions"] = stamped(body.get("conditions") or [], obj)
        await Kube.run(
            apply_pipeline_status,
            self.kube,
            meta["namespace"],
            meta["name"],
            meta.get("uid", ""),
            body,
            PIPELINE_CONTROLLER_MANAGER,
        )


def backoff(failures: int) -> float:
    """The pause before the next list after ``failures`` failed ones in a row."""
    return float(min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** max(0, failures - 1)))


def _owner(workflow_id: str, attribute: str | None) -> tuple[str, str] | None:
    """(namespace, name) of a run's pipeline: its DmPipeline attribute, or its ID
    (``pipeline/<ns>/<name>/<revision>``) for a run started before the attribute."""
    if attribute and "/" in attribute:
        namespace, name = attribute.split("/", 1)
        return namespace, name
    parts = workflow_id.split("/")
    # pipeline/<ns>/<name>/<revision>[/<retry generation>]
    if len(parts) in (4, 5) and parts[0] == PIPELINE_WORKFLOW_ID_PREFIX:
        return parts[1], parts[2]
    return None


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


async def run_pipeline_controller(
    kube: Kube,
    client: TemporalClient,
    elector: Elector | None,
    health: PipelineHealth | None = None,
) -> int:
    """The controller, reconciling only while ``elector`` holds its Lease (always, with None;
    controller/hub/leadership.py); the exit code: 0 after SIGTERM, 1 once the Lease is lost or
    the loop ended."""
    controller = PipelineController(kube, client, health)
    log.info(
        "pipeline controller on the hub: task queue %s, %s",
        HUB_TASK_QUEUE,
        "with leader election" if elector else "without leader election (one replica only)",
    )
    outcome = Outcome()
    stop_on_signals(outcome)
    return await run_leading(controller.run, elector, outcome, "reconciling DecisionModelPipelines")


__all__ = ["PipelineController", "PipelineHealth", "read_spec", "run_pipeline_controller"]

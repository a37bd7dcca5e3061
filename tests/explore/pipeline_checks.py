"""What a pipeline lifecycle must have kept (pipeline_explore): judged on every apply a cluster
received (with the server's time), every status a run wrote, the approvals taken, and each run's
history.

- freight: every apply carries the run's pinned digest (the template's pin, or the one digest
  the run resolved, or a retry's inherited one), never what the tag serves later;
- order: a stage is applied only after each dependency promoted in the same run (or in the run
  a retry kept it from), and after its soak from the latest of those promotions;
- a Manual stage only after an approval of it in that run was taken; a stage with change
  windows only inside one;
- at most one apply per stage and run; none after the run was aborted or superseded (but the
  apply of a stage already starting, which then aborts its rollout);
- approvals for another digest or run, or for a stage not awaiting one, are refused;
- after the faults are healed and waiting stages approved, every run ends; each stage ends in a
  final state with a reason;
- every run's history, and each of its stages' histories, replays on the current code and
  stays under Temporal's warning size (a wait that looks again every 30 s for days does not).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, time, timedelta

from pipeline_explore import ENDED, Lifecycle, Run, records_of
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from decisionmodel.api.pipeline import Stage
from decisionmodel.vocabulary import StageState
from workflows.pipeline import PipelineWorkflow
from workflows.pipeline_stage import PipelineStageWorkflow

# A stage whose child had started when the abort arrived still finishes its apply (then aborts
# the rollout): its apply may come that much after the stop was sent.
STOP_SLACK = timedelta(seconds=5)
# Temporal warns at this many events in one history and terminates the run at 51,200.
HISTORY_WARN = 10_240
FINAL = ENDED


def promotions(life: Lifecycle, run: Run) -> dict[str, datetime]:
    """When each stage of ``run`` promoted: a retry's inherited ones, then its records."""
    found = dict(run.inherited)
    for rec in records_of(life, run):
        for name, stage in rec.stages.items():
            if stage.state == StageState.PROMOTED and stage.promoted_at and name not in found:
                found[name] = stage.promoted_at
    return found


def freight_of(life: Lifecycle, run: Run) -> str | None:
    if run.freight is not None:
        return run.freight.digest
    for rec in records_of(life, run):
        if rec.freight is not None:
            return rec.freight.digest
    return run.final.freight.digest if run.final and run.final.freight else None


def _in_window(stage: Stage, at: datetime) -> bool:
    for w in stage.windows:
        start, end = time.fromisoformat(w.start), time.fromisoformat(w.end)
        if start <= at.time() < end:  # the explorer's windows are daily, in UTC
            return True
    return not stage.windows


def check_applies(life: Lifecycle) -> list[str]:
    bad = []
    runs = {r.wid: r for r in life.runs}
    counted = Counter((a.run, a.stage) for a in life.fleet.applies)
    bad += [f"{run} {stage}: applied {n} times" for (run, stage), n in counted.items() if n > 1]
    for a in life.fleet.applies:
        run = runs.get(a.run)
        if run is None:
            bad.append(f"{a.run} {a.stage}: applied by a run the explorer never started")
            continue
        stage = next(s for s in run.spec.stages if s.name == a.stage)
        what = f"{a.run} {a.stage} at {a.at:%m-%d %H:%M:%S}"
        freight = freight_of(life, run)
        if a.digest != freight:
            bad.append(f"{what}: applied digest {a.digest[:12]}, the run's freight {freight}")
        if life.pinned and a.digest != run.spec.template.spec.digest:
            bad.append(f"{what}: the template pins {run.spec.template.spec.digest}")
        promoted = promotions(life, run)
        deps = [promoted.get(d) for d in stage.depends_on]
        if any(d is None or d > a.at for d in deps):
            shown = dict(zip(stage.depends_on, deps, strict=True))
            bad.append(f"{what}: before its dependencies promoted ({shown})")
        elif deps and a.at < max(d for d in deps if d is not None) + stage.soak_time:
            bad.append(f"{what}: before its soak {stage.soak} ended")
        if stage.approval == "Manual":
            approved = run.approvals.get(a.stage)
            if approved is None or approved > a.at:
                bad.append(f"{what}: Manual, approved {approved}")
        if not _in_window(stage, a.at):
            bad.append(f"{what}: outside its change windows")
        if run.stopped_at is not None and a.at > run.stopped_at + STOP_SLACK:
            bad.append(f"{what}: after the run was stopped at {run.stopped_at:%m-%d %H:%M:%S}")
    return bad


def check_ends(life: Lifecycle, left: list[str]) -> list[str]:
    bad = [f"{wid}: still running after the faults were healed" for wid in left]
    bad += life.refused
    for run in life.runs:
        rec = run.final
        if rec is None:
            continue
        # A run that gave up on its freight failed before any stage: they stay Pending, and
        # FreightPinned says why (docs/pipelines.md).
        before_any = rec.freight_problem is not None and rec.freight_problem.final
        for name, stage in rec.stages.items():
            if stage.state not in FINAL and not (before_any and stage.state == StageState.PENDING):
                bad.append(f"{run.wid} {name}: ended {stage.state}")
            elif stage.state != StageState.PROMOTED and not (stage.reason and stage.message):
                bad.append(f"{run.wid} {name}: {stage.state} without a reason and message")
    return bad


async def replayed(life: Lifecycle) -> tuple[int, list[str]]:
    """Every run's history and each of its stages' histories, replayed on the current code."""
    client = life.fleet.client
    histories: list[WorkflowHistory] = []
    for run in life.runs:
        histories.append(await run.handle.fetch_history())
        for stage in run.spec.stages:
            handle = client.get_workflow_handle(f"{run.wid}/{stage.name}")
            try:
                histories.append(await handle.fetch_history())
            except Exception:  # the stage never rolled out
                continue
    replayer = Replayer(
        workflows=[PipelineWorkflow, PipelineStageWorkflow], data_converter=pydantic_data_converter
    )
    bad = [
        f"{h.workflow_id}: {len(h.events)} history events, past Temporal's warning at "
        f"{HISTORY_WARN} (it terminates a run at 51,200)"
        for h in histories
        if len(h.events) > HISTORY_WARN
    ]
    for history in histories:
        try:
            await replayer.replay_workflow(history)
        except Exception as e:
            bad.append(f"{history.workflow_id}: does not replay: {e}")
    return len(histories), bad

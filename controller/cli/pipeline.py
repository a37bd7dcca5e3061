"""``dmrollout pipeline …`` (issue 25): follow and steer a DecisionModelPipeline's run from the
hub, and ``dmrollout pipeline-controller``, the hub's controller.

``promote`` approves a Manual stage for the freight the run pinned (read from the pipeline's
status, or ``--digest``): an approval for other bytes than the run's is refused by the run
itself. ``abort`` stops the stages in flight. ``status`` prints each stage; ``history`` the run's
workflow and each stage's rollout in its cluster (the audit trail in the Temporal UI).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
from datetime import UTC, datetime
from typing import Any, Final

from controller.cli.context import CliContext, add_kube_flags, add_temporal_flags
from controller.cli.errors import CliError, ExitCode
from controller.hub.leadership import PipelineControllerSettings
from controller.machinery.leader import LeaderElector
from controller.temporal import pipeline_runs
from controller.temporal.client import TemporalSettings
from decisionmodel.engine.render.labels import ANNOTATION_RETRY
from decisionmodel.pipeline.contracts import Approval
from decisionmodel.pipeline.retry import RETRYABLE_PHASES
from decisionmodel.pipeline.stages import verdict_token
from decisionmodel.vocabulary import ConditionStatus
from kube.client import Kube
from kube.lease import LeaseStore
from kube.pipelines import annotate_pipeline, read_pipeline
from workflows.pipeline_details import ui_path

HISTORY_RUNS: Final = 20


async def _pipeline(ctx: CliContext) -> dict[str, Any]:
    namespace, name = ctx.namespace(), ctx.args.name
    obj = await Kube.run(read_pipeline, ctx.kube(), namespace, name)
    if obj is None:
        raise CliError(ExitCode.NOT_FOUND, f"no DecisionModelPipeline {namespace}/{name}")
    return obj


def _run_id(obj: dict[str, Any]) -> str:
    wid = (obj.get("status") or {}).get("workflowId")
    if not wid:
        meta = obj["metadata"]
        raise CliError(
            ExitCode.NOT_FOUND,
            f"{meta['namespace']}/{meta['name']} has no run yet: is the pipeline controller "
            "running on this hub (`dmrollout pipeline-controller`)?",
        )
    return str(wid)


async def promote(ctx: CliContext) -> int:
    obj = await _pipeline(ctx)
    wid = _run_id(obj)
    digest = ctx.args.digest or ((obj.get("status") or {}).get("freight") or {}).get("digest")
    if not digest:
        raise CliError(ExitCode.FAILED, "the run has not pinned its freight yet; try again")
    client, _ = await ctx.temporal(pipelines=True)
    approval = Approval(
        stage=ctx.args.stage,
        digest=digest,
        by=getpass.getuser(),
        run_id=wid,
        upstream=_upstream_shown(obj, ctx.args.stage),
    )
    try:
        said = await pipeline_runs.approve(client, wid, approval)
    except pipeline_runs.Refused as e:
        raise CliError(ExitCode.FAILED, f"refused: {e}") from None
    print(said)
    return ExitCode.OK


def _upstream_shown(obj: dict[str, Any], stage: str) -> dict[str, str]:
    """The verdicts of ``stage``'s dependencies as the status shows them: what the person
    approves (the run refuses the approval when its own differ)."""
    spec_stages = (obj.get("spec") or {}).get("stages") or []
    depends = next((s.get("dependsOn") or [] for s in spec_stages if s.get("name") == stage), [])
    shown = {s["name"]: s for s in (obj.get("status") or {}).get("stages") or []}
    return {
        d: verdict_token(shown[d].get("state", ""), shown[d].get("rolloutWorkflowId"))
        for d in depends
        if d in shown
    }


async def abort(ctx: CliContext) -> int:
    wid = _run_id(await _pipeline(ctx))
    client, _ = await ctx.temporal(pipelines=True)
    await pipeline_runs.abort(client, wid, ctx.args.reason)
    print(f"abort sent to {wid} ({ctx.args.reason})")
    return ExitCode.OK


async def retry(ctx: CliContext) -> int:
    """A fresh decisionmodel.io/retry value: the controller runs the failed revision again with
    the freight its stages verified (the tag is not resolved again) from where it failed."""
    obj = await _pipeline(ctx)
    wid = _run_id(obj)
    phase = (obj.get("status") or {}).get("phase")
    if phase not in RETRYABLE_PHASES:
        raise CliError(
            ExitCode.FAILED,
            f"run {wid} is {phase or 'not started'}, not Failed or Aborted: nothing to retry",
        )
    token = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    meta = obj["metadata"]
    await Kube.run(
        annotate_pipeline, ctx.kube(), meta["namespace"], meta["name"], {ANNOTATION_RETRY: token}
    )
    print(f"retry {token} of {wid} requested ({ANNOTATION_RETRY})")
    return ExitCode.OK


async def status(ctx: CliContext) -> int:
    obj = await _pipeline(ctx)
    st = obj.get("status") or {}
    freight = st.get("freight") or {}
    print(f"{obj['metadata']['name']}: {st.get('phase') or '-'} revision {st.get('revision')}")
    print(f"  freight {freight.get('model', '?')}@sha256:{freight.get('digest', '?')}")
    for s in st.get("stages") or []:
        print(f"  {s['name']:<16} {s['state']:<18} {s.get('reason', '')}: {s.get('message', '')}")
    for c in st.get("conditions") or []:
        if c.get("status") != ConditionStatus.TRUE:
            print(f"  {c['type']}={c['status']} {c.get('reason')}: {c.get('message')}")
    return ExitCode.OK


async def history(ctx: CliContext) -> int:
    obj = await _pipeline(ctx)
    wid = _run_id(obj)
    client, settings = await ctx.temporal(pipelines=True)
    meta = obj["metadata"]
    query = pipeline_runs.runs_query(meta["namespace"], meta["name"])
    print(f"runs of pipeline {meta['namespace']}/{meta['name']}, newest first ({query}):")
    for run in await pipeline_runs.runs_of(client, meta["namespace"], meta["name"], HISTORY_RUNS):
        print(
            f"  {run.workflow_id}  {run.status:<10} {run.phase:<16} revision {run.revision}  "
            f"{' '.join(run.stages)}"
        )
    record = await pipeline_runs.progress(client, wid)
    print(f"current run {wid}{_ui_link(settings, wid)}")
    for name, p in record.stages.items():
        cluster = record.clusters.get(name, "?")
        print(
            f"  {name:<16} {p.state:<18} stage {wid}/{name}  "
            f"rollout {p.rollout_workflow_id or '-'} (in {cluster}'s Temporal namespace)"
        )
    return ExitCode.OK


def _ui_link(settings: TemporalSettings, wid: str) -> str:
    if not settings.ui_url:
        return ""
    return f"\n  {settings.ui_url.rstrip('/')}{ui_path(settings.namespace, wid)}"


def pipeline_elector(
    settings: PipelineControllerSettings, leases: LeaseStore
) -> LeaderElector | None:
    """The pipeline controller's elector: the main controller's election on the pipeline
    controller's own Lease (built here: the hub and the reconciler are independent rooms).
    None with leader election off."""
    if not settings.leader_election:
        return None
    return LeaderElector(
        leases,
        settings.identity,
        lease_duration=settings.lease_duration_seconds,
        renew_deadline=settings.renew_deadline_seconds,
        retry_period=settings.retry_period_seconds,
    )


def pipeline_controller(args: argparse.Namespace) -> int:
    from controller.hub.pipelines import PipelineHealth, run_pipeline_controller
    from controller.serve.health import HealthServer
    from controller.serve.logs import configure_logging, log_format
    from controller.temporal.client import connect
    from decisionmodel.rollout.settings import RolloutSettings

    configure_logging(log_format(args))
    # Read first: a bad DMROLLOUT_PIPELINE_CONTROLLER_* fails before anything connects.
    settings = PipelineControllerSettings()

    async def main() -> int:
        client = await connect(TemporalSettings.load().for_pipelines())
        kube = Kube.from_settings(RolloutSettings())
        leases = LeaseStore(kube, settings.lease_namespace, settings.lease_name)
        health = PipelineHealth()
        # After the Temporal connection, as the controller's: the startup probe covers it.
        server = HealthServer("0.0.0.0", settings.health_port, None, health.ready, health.healthy)
        server.start()
        try:
            elector = pipeline_elector(settings, leases)
            return await run_pipeline_controller(kube, client, elector, health)
        finally:
            server.stop()

    return asyncio.run(main())


def add_pipeline_commands(sub: Any, cli_entry: Any) -> None:
    from controller.serve.logs import add_log_flag

    pc = sub.add_parser(
        "pipeline-controller", help="run the hub's DecisionModelPipeline controller"
    )
    add_log_flag(pc)
    pc.set_defaults(func=pipeline_controller)
    top = sub.add_parser("pipeline", help="DecisionModelPipelines: status, promote, abort, history")
    verbs = top.add_subparsers(dest="pipeline_verb", required=True)

    def verb(name: str, help: str, fn: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = verbs.add_parser(name, help=help)
        p.add_argument("name", help="the DecisionModelPipeline")
        add_kube_flags(p)
        add_temporal_flags(p)
        p.set_defaults(func=cli_entry(fn))
        return p

    verb("status", "the run in flight and each stage's state", status)
    pr = verb("promote", "approve a Manual stage for the run's freight", promote)
    pr.add_argument("--stage", required=True, help="the stage to approve")
    pr.add_argument("--digest", default=None, help="default: the freight in the status")
    ab = verb("abort", "stop the stages in flight (promoted stages keep serving)", abort)
    ab.add_argument("--reason", default="aborted from the CLI", help="recorded in history")
    verb("history", "the run's workflow and each stage's rollout", history)
    verb("retry", "run a failed or aborted run again, with the freight it verified", retry)

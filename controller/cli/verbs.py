"""The user-facing read and approve verbs: ``get``, ``status``, ``history``, ``promote``.

Each gathers everything it shows before printing (a failure half-way prints one line, not half
a view), and says what failed with a documented exit code (controller/cli/errors.py).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import socket
import sys
from datetime import UTC, datetime
from typing import Any

from controller.cli.context import CliContext
from controller.cli.errors import CliError, ExitCode, explain
from controller.cli.output import emit_data, table
from controller.temporal import rollout_history
from controller.temporal.rollouts import Rollouts, RunningRollout, dm_query
from controller.temporal.runs import TemporalClient
from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.rollout.contracts import Phase
from decisionmodel.rollout.evaluation_status import (
    decision_lines,
    design_lines,
    report_command,
)
from decisionmodel.vocabulary import Device, StatusKey
from kube.access_review import who_am_i
from kube.client import CONTROLLER_FIELD_MANAGER, Kube
from workflows import search_attributes as sa

# The run just left a query unanswered: a build whose last poll is older than one long poll
# (~60 s) has no worker left (controller/temporal/worker_presence.py).
QUERY_FAILED_STALE_SECONDS = 65.0


def _dm_or_not_found(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    obj = kube.read_dm(namespace, name)
    if obj is None:
        raise CliError(
            ExitCode.NOT_FOUND,
            f"DecisionModel {namespace}/{name} not found (`dmrollout get -n {namespace}` lists "
            "them; -n or the kubeconfig context picks the namespace)",
        )
    return obj


async def status(ctx: CliContext) -> int:
    args = ctx.args
    namespace = ctx.namespace()
    obj = await Kube.run(_dm_or_not_found, ctx.kube(), namespace, args.name)
    view = _status_view(namespace, obj)
    code, note = ExitCode.OK, ""
    try:
        view["rollouts"] = await _running_rollouts(ctx, namespace, args.name)
    except Exception as e:  # the DecisionModel part is true: show it, then say what failed
        failure = explain(e, ctx.where)
        view["rollouts"] = None
        code, note = failure.code, failure.message
    if not emit_data(view, args.output):
        print(_status_text(view))
    if note:
        print(f"dmrollout status: {note}", file=sys.stderr)
    return code


def _status_view(namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    st = obj.get("status") or {}
    spec = obj.get("spec") or {}
    return {
        "namespace": namespace,
        "name": obj["metadata"]["name"],
        "model": spec.get("model"),
        "device": spec.get("device", Device.CPU),
        "phase": st.get("phase"),
        StatusKey.PHASE_TRANSITION_TIME: st.get(StatusKey.PHASE_TRANSITION_TIME),
        "replicas": st.get("replicas") or {},
        StatusKey.STABLE_REVISION: st.get(StatusKey.STABLE_REVISION),
        StatusKey.CANDIDATE_REVISION: st.get(StatusKey.CANDIDATE_REVISION),
        StatusKey.FAILED_REVISION: st.get(StatusKey.FAILED_REVISION),
        # A rollback-to served in place of the spec until it changes (issue 34).
        StatusKey.ROLLBACK_TO: st.get(StatusKey.ROLLBACK_TO),
        "evaluation": st.get("evaluation"),
        # What the golden set can decide, checked at the rollout's start (issue 35 item 6).
        StatusKey.EVALUATION_DESIGN: st.get(StatusKey.EVALUATION_DESIGN),
        # The command that writes the evaluation report (reliability diagram, confusion).
        "report": report_command(namespace, obj["metadata"]["name"])
        if st.get("evaluation")
        else None,
        "conditions": st.get("conditions") or [],
    }


async def _running_rollouts(ctx: CliContext, namespace: str, name: str) -> list[dict[str, Any]]:
    client, temporal = await ctx.temporal()
    rollouts = Rollouts(client, temporal.task_queue, temporal.ui_url)
    found = []
    for r in await rollouts.running(namespace, name):
        progress = await rollouts.progress(r.workflow_id)
        build = await rollouts.build_of(r.workflow_id)
        found.append(
            {
                "workflowId": r.workflow_id,
                "phase": progress.phase.value if progress else None,
                "step": progress.step if progress else None,
                "expectedApproval": progress.expected_approval if progress else None,
                # The build whose workers run it (issue 34: a run pinned to a build no worker
                # serves waits; the DecisionModel's Stalled condition then says so).
                "build": build.text() if build else None,
                "ui": rollouts.ui_link(r.workflow_id, temporal.namespace),
            }
        )
    return found


def _rev(label: str, rev: dict[str, Any] | None) -> str:
    if not rev:
        return f"  {label:<10} -"
    extra = f"  reason {rev['reason']}: {rev.get('message', '')}" if rev.get("reason") else ""
    digest = (rev.get("digest") or "")[:12]
    return f"  {label:<10} {rev['hash']}  {rev.get('model', '')}  digest {digest}{extra}"


def _status_text(v: dict[str, Any]) -> str:
    replicas = v["replicas"]
    lines = [
        f"{v['namespace']}/{v['name']}: {v['model']} on {v['device']}",
        f"  phase      {v['phase'] or '-'} (since {v[StatusKey.PHASE_TRANSITION_TIME] or '-'})",
        f"  ready      {replicas.get('modelReady', 0)}/{replicas.get('desired', '-')}",
        _rev("stable", v[StatusKey.STABLE_REVISION]),
        _rev("candidate", v[StatusKey.CANDIDATE_REVISION]),
        _rev("failed", v[StatusKey.FAILED_REVISION]),
        *_rollback_lines(v[StatusKey.ROLLBACK_TO]),
    ]
    ev = v["evaluation"]
    if ev:
        lines.append(
            f"  evaluation {ev.get('result', '-')}: accuracy {ev.get('accuracy')} "
            f"(baseline {ev.get('baselineAccuracy', '-')}), ECE {ev.get('ece')}, "
            f"{ev.get('cases')} cases"
        )
        lines.extend(_verdict_lines(ev.get("decision")))
        lines.append(f"  report     {v['report']}")
    lines.extend(_design_lines(v.get(StatusKey.EVALUATION_DESIGN)))
    for c in v["conditions"]:
        lines.append(
            f"  {c['type']:<10} {c['status']:<5} {c.get('reason', '')}: {c.get('message', '')}"
        )
    lines.extend(_rollout_lines(v))
    return "\n".join(lines)


def _design_lines(raw: dict[str, Any] | None) -> list[str]:
    """Each gate's power and expected cases to a verdict, from status.evaluationDesign."""
    try:
        return [f"  design     {line}" for line in design_lines(raw)]
    except ValueError:
        return ["  design     (status.evaluationDesign does not read)"]


def _rollback_lines(rollback: dict[str, Any] | None) -> list[str]:
    if not rollback:
        return []
    return [
        f"  rollbackTo {rollback.get('revision')} in place of spec generation "
        f"{rollback.get('generation')}, until the spec changes"
    ]


def _verdict_lines(decision: dict[str, Any] | None) -> list[str]:
    """The evidence digest, then one line per gate of an evaluation with confidence."""
    if not decision:
        return []
    head = f"  evidence   {decision.get('evidence')} at confidence {decision.get('confidence')}"
    lines = decision_lines(decision)
    gates = len(decision.get("gates") or [])  # then the sequential test's own line, if any
    return [
        head,
        *(f"  gate       {line}" for line in lines[:gates]),
        *(f"  test       {line}" for line in lines[gates:]),
    ]


def _rollout_lines(v: dict[str, Any]) -> list[str]:
    if v["rollouts"] is None:
        return ["  rollout    unknown (Temporal not reachable, see below)"]
    if not v["rollouts"]:
        return ["  rollout    none running"]
    lines = []
    for r in v["rollouts"]:
        step = f" — {r['phase']}: {r['step']}" if r["phase"] else " — did not answer"
        lines.append(f"  rollout    {r['workflowId']}{step}")
        if r.get("build"):
            lines.append(f"  build      {r['build']}")
        if r["expectedApproval"]:
            lines.append(f"  approval   {r['expectedApproval']}")
            lines.append(f"  decide     dmrollout promote {v['name']} -n {v['namespace']}")
        lines.append(f"  UI         {r['ui']}")
    return lines


async def promote(ctx: CliContext) -> int:
    return await _decide(ctx, reject=False)


async def reject(ctx: CliContext) -> int:
    return await _decide(ctx, reject=True)


async def _decide(ctx: CliContext, *, reject: bool) -> int:
    """promote or reject the held candidate with the approval bound to the evidence shown
    (``--approval``; default: the one the rollout shows now)."""
    args = ctx.args
    namespace = ctx.namespace()
    client, temporal = await ctx.temporal(identity=await approver(ctx))
    rollouts = Rollouts(client, temporal.task_queue, temporal.ui_url)
    running = await rollouts.running(namespace, args.name)
    if not running:
        raise CliError(ExitCode.NOT_FOUND, f"no rollout of {namespace}/{args.name} is running")
    for r in running:
        progress = await rollouts.progress(r.workflow_id)
        if progress is None:
            raise CliError(ExitCode.FAILED, await _no_answer(client, temporal.task_queue, r))
        if progress.phase != Phase.AWAITING_PROMOTION:
            phase = progress.phase.value
            raise CliError(
                ExitCode.FAILED,
                f"{r.workflow_id} is not awaiting promotion (phase {phase}); approve once "
                "`dmrollout status` shows AwaitingPromotion",
            )
        approval = args.approval or progress.expected_approval or ""
        refusal = await rollouts.approve(r.workflow_id, approval, reject=reject)
        if refusal:
            raise CliError(ExitCode.FAILED, f"refused: {refusal}")
        done = "rejected" if reject else "approved"
        print(f"{done} {approval} for {namespace}/{args.name} ({r.workflow_id})")
    return ExitCode.OK


# The approver's Kubernetes user name is asked once per approval, bounded.
APPROVER_LOOKUP_SECONDS = 10.0


async def approver(ctx: CliContext) -> str:
    """Who approves, as the workflow history (and the signed decision record) will say: the
    Kubernetes user the API server authenticated (SelfSubjectReview), the local account and
    host."""
    local = f"{getpass.getuser()}@{socket.gethostname()}"
    try:
        user = await asyncio.wait_for(Kube.run(who_am_i, ctx.kube()), APPROVER_LOOKUP_SECONDS)
    except (TimeoutError, CliError):
        user = None
    return f"dmrollout-cli kubernetes-user={user or 'unknown'} {local}"[:255]


async def _no_answer(client: TemporalClient, task_queue: str, run: RunningRollout) -> str:
    """Why the run did not answer its progress query: no worker of the build it is pinned to
    (or none at all) polls, naming the fix; else what is known (issue 34)."""
    rollouts = Rollouts(client, task_queue, poll_stale_seconds=QUERY_FAILED_STALE_SECONDS)
    build = await rollouts.build_of(run.workflow_id)
    stranded = await rollouts.stranded(run.workflow_id, build)
    if stranded is not None:
        return f"cannot approve: {stranded}"
    where = f" (build {build.text()})" if build is not None else ""
    return (
        f"{run.workflow_id}{where} did not answer its progress query: no worker took it in "
        f"time; check the workers of task queue {task_queue}, then approve once `dmrollout "
        "status` shows AwaitingPromotion"
    )


async def history(ctx: CliContext) -> int:
    args = ctx.args
    every = getattr(args, "all_namespaces", False)
    namespace = None if every else ctx.namespace()
    if args.name is None and namespace is None:
        query = "WorkflowType = 'RolloutWorkflow'"
    elif args.name is None:
        query = f"WorkflowType = 'RolloutWorkflow' AND DmNamespace = '{namespace}'"
    else:
        query = dm_query(namespace or ctx.namespace(), args.name)
    client, _ = await ctx.temporal()
    rows = []
    for run in await rollout_history.listed(client, query):
        attrs = run.attributes
        duration = None
        if run.closed and run.started:
            duration = round((run.closed - run.started).total_seconds())
        rows.append(
            {
                "started": run.started.isoformat(timespec="seconds") if run.started else None,
                "namespace": attrs.get(sa.DM_NAMESPACE.name),
                "name": attrs.get(sa.DM_NAME.name),
                "revision": attrs.get(sa.DM_REVISION.name),
                "model": attrs.get(sa.DM_MODEL.name),
                "result": attrs.get(sa.DM_RESULT.name)
                or (run.status.title() if run.status else None),
                "durationSeconds": duration,
                "workflowId": run.workflow_id,
            }
        )
    rows.sort(key=lambda r: r["started"] or "")
    if not emit_data(rows, args.output):
        print(_history_table(rows))
    return ExitCode.OK


def _history_table(rows: list[dict[str, Any]]) -> str:
    def cell(v: Any) -> str:
        return "-" if v is None else str(v)

    return table(
        ["STARTED", "DM", "REVISION", "MODEL", "RESULT", "DURATION", "WORKFLOW"],
        [
            [
                cell(r["started"]),
                f"{cell(r['namespace'])}/{cell(r['name'])}",
                cell(r["revision"]),
                cell(r["model"]),
                cell(r["result"]),
                "-" if r["durationSeconds"] is None else f"{r['durationSeconds']}s",
                r["workflowId"],
            ]
            for r in rows
        ],
    )


async def get(ctx: CliContext) -> int:
    args = ctx.args
    kube = ctx.kube()
    every = args.all_namespaces
    namespace = ctx.namespace()
    items = await Kube.run(_list_dms, kube, None if every else namespace, args.name)
    rows = [_get_row(o) for o in items]
    if args.name and not rows:
        raise CliError(ExitCode.NOT_FOUND, f"DecisionModel {namespace}/{args.name} not found")
    if not emit_data(rows, args.output):
        if not rows:
            where = "any namespace" if every else f"namespace {namespace}"
            print(f"No DecisionModels in {where}.", file=sys.stderr)
        else:
            print(_get_table(rows, every))
            _note_unmanaged(rows)
    return ExitCode.OK


def _note_unmanaged(rows: list[dict[str, Any]]) -> None:
    """A DecisionModel no dmrollout controller has written keeps whatever status it had (the
    reference operator's after a migration: Ready), so it looks fine while nothing acts on it
    (issue 34): say so under the table."""
    unmanaged = [f"{r['namespace']}/{r['name']}" for r in rows if not r["managed"]]
    if unmanaged:
        print(
            f"{len(unmanaged)} DecisionModel(s) not (yet) written by any dmrollout controller, "
            f"their status is not dmrollout's: {', '.join(unmanaged)}; a namespace the "
            "controller does not watch? (chart: watchNamespaces or rbac.clusterWide; "
            "docs/migration.md step 5)",
            file=sys.stderr,
        )


def _list_dms(kube: Kube, namespace: str | None, name: str | None) -> list[dict[str, Any]]:
    if namespace is None:
        listed = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    else:
        listed = kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    items: list[dict[str, Any]] = listed.get("items") or []
    return [o for o in items if name is None or o["metadata"]["name"] == name]


def _get_row(obj: dict[str, Any]) -> dict[str, Any]:
    meta, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    stable = st.get(StatusKey.STABLE_REVISION) or {}
    replicas = st.get("replicas") or {}
    desired = spec.get("replicas", 1)
    return {
        "namespace": meta["namespace"],
        "name": meta["name"],
        "model": spec.get("model"),
        "phase": st.get("phase"),
        "ready": f"{replicas.get('modelReady', 0)}/{replicas.get('desired', desired)}",
        "revision": stable.get("hash"),
        "created": meta.get("creationTimestamp"),
        # Written by dmrollout's controller (its field manager on the status).
        "managed": any(
            f.get("manager") == CONTROLLER_FIELD_MANAGER for f in meta.get("managedFields") or []
        ),
    }


def _get_table(rows: list[dict[str, Any]], every: bool) -> str:
    headers = ["NAME", "MODEL", "PHASE", "READY", "REVISION", "AGE"]
    body = [
        [
            r["name"],
            r["model"] or "-",
            r["phase"] or "-",
            r["ready"],
            r["revision"] or "-",
            _age(r["created"]),
        ]
        for r in rows
    ]
    if every:
        headers = ["NAMESPACE", *headers]
        body = [[r["namespace"], *row] for r, row in zip(rows, body, strict=True)]
    return table(headers, body)


def _age(created: str | None) -> str:
    if not created:
        return "-"
    then = datetime.fromisoformat(created.replace("Z", "+00:00"))
    seconds = int((datetime.now(UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def cli_entry(verb: Any) -> Any:
    """argparse ``func`` for an async verb: run it with a context the error line can name."""
    import asyncio

    def run(args: argparse.Namespace) -> int:
        ctx = CliContext(args, args.where)
        return int(asyncio.run(verb(ctx)))

    return run

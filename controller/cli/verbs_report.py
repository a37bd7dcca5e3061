"""``dmrollout report``: write the evaluation report (one self-contained HTML file).

The figures come from ``status.evaluation`` (the latest evaluation), or with ``--revision`` from
the history of that revision's rollout in Temporal (the evaluate activity's result and the gates
of the workflow's input), so an older evaluation can still be drawn while its history is kept.
Either way they are aggregates only (decisionmodel/evaluation/aggregates.py).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from controller.cli.context import CliContext
from controller.cli.errors import CliError, ExitCode
from controller.cli.verbs import _dm_or_not_found
from controller.temporal import rollout_history
from controller.temporal.rollouts import revision_query
from decisionmodel.api.status import EvaluationGates, EvaluationStatus
from decisionmodel.report import ReportSubject, render_report
from decisionmodel.rollout.evaluation_status import evaluation_status
from kube.client import Kube


async def report(ctx: CliContext) -> int:
    args = ctx.args
    namespace = ctx.namespace()
    if args.revision:
        ev, source = await _from_history(ctx, namespace, args.name, args.revision)
    else:
        obj = await Kube.run(_dm_or_not_found, ctx.kube(), namespace, args.name)
        raw = (obj.get("status") or {}).get("evaluation")
        if not raw:
            raise CliError(
                ExitCode.NOT_FOUND,
                f"DecisionModel {namespace}/{args.name} has no evaluation in status yet (set "
                "spec.rollout.evaluation; the report is written once a rollout has evaluated)",
            )
        ev, source = EvaluationStatus.model_validate(raw), f"status of {namespace}/{args.name}"
    page = render_report(ReportSubject(namespace, args.name, source), ev)
    path = args.output_file or f"{args.name}-{ev.revision or 'evaluation'}-report.html"
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(page)
    except OSError as e:
        raise CliError(
            ExitCode.USAGE, f"cannot write the report to {path}: {e.strerror} (-o FILE)"
        ) from None
    print(f"wrote {os.path.abspath(path)} (evaluation of revision {ev.revision or '-'})")
    return ExitCode.OK


async def _from_history(
    ctx: CliContext, namespace: str, name: str, revision: str
) -> tuple[EvaluationStatus, str]:
    client, _ = await ctx.temporal()
    found = await rollout_history.listed(client, revision_query(namespace, name, revision))
    if not found:
        raise CliError(
            ExitCode.NOT_FOUND,
            f"no rollout of revision {revision} of {namespace}/{name} in Temporal (`dmrollout "
            f"history {name} -n {namespace}` lists the revisions still kept)",
        )
    latest = max(found, key=lambda run: run.started or datetime.min.replace(tzinfo=UTC))
    outcome, inp = await rollout_history.evaluation_in(client, latest)
    if outcome is None:
        raise CliError(
            ExitCode.NOT_FOUND,
            f"the rollout {latest.workflow_id} of revision {revision} has no completed evaluation",
        )
    ev = evaluation_status(outcome, revision)
    if inp is not None and inp.evaluation is not None:
        ev = ev.model_copy(update={"gates": EvaluationGates.model_validate(inp.evaluation.gates())})
    return ev, f"the history of {latest.workflow_id}"

"""The "Current Details" a pipeline run and its stage runs show in the Temporal UI (issue 25,
one history for the whole journey).

The UI renders them as Markdown on the workflow's User Metadata tab; the links are paths of
the UI itself, so they open the stage run in the pipelines' namespace and the cluster's
rollout in that cluster's own namespace, wherever the UI is served. Details are answered by
the worker from the run's state (which its history rebuilds), not written into history.
"""

from __future__ import annotations

from urllib.parse import quote

from decisionmodel.pipeline.contracts import PipelineRecord


def ui_path(namespace: str, workflow_id: str) -> str:
    return f"/namespaces/{quote(namespace, safe='')}/workflows/{quote(workflow_id, safe='')}"


def link(namespace: str | None, workflow_id: str | None) -> str:
    if not namespace or not workflow_id:
        return "-"
    return f"[{workflow_id}]({ui_path(namespace, workflow_id)})"


def _cell(text: str) -> str:
    """One Markdown table cell: no pipe, no line break."""
    return text.replace("|", "/").replace("\n", " ")[:160]


def pipeline_details(record: PipelineRecord, namespace: str, run_id: str) -> str:
    """A table of the stages: state, reason, its stage run and its cluster's rollout."""
    freight = record.freight.digest[:19] if record.freight else "not pinned yet"
    lines = [
        f"**{record.pipeline.namespace}/{record.pipeline.name}** revision `{record.revision}`, "
        f"freight `{freight}`",
        "",
        "| stage | cluster | state | reason | stage run | rollout |",
        "|---|---|---|---|---|---|",
    ]
    for name, p in record.stages.items():
        cluster = record.clusters.get(name, "?")
        lines.append(
            f"| {name} | {cluster} | {p.state} | {_cell(p.reason)} "
            f"| {link(namespace, f'{run_id}/{name}')} "
            f"| {link(p.rollout_namespace, p.rollout_workflow_id)} |"
        )
    return "\n".join(lines)


def stage_details(
    stage: str, where: str, rollout: str | None, namespace: str | None, now: str
) -> str:
    """One stage run: where it runs, what it does now, and the rollout in its cluster."""
    return f"stage **{stage}** ({where}): {now}\n\nrollout: {link(namespace, rollout)}"

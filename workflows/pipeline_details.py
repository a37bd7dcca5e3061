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


def link(text: str, namespace: str | None, workflow_id: str | None) -> str:
    if not namespace or not workflow_id:
        return "no rollout yet"  # the one link that can be missing
    return f"[{text}]({ui_path(namespace, workflow_id)})"


def _plain(text: str) -> str:
    """Inline text: no line break, no link syntax of its own."""
    return text.replace("\n", " ").replace("[", "(").replace("]", ")")[:160]


def pipeline_details(record: PipelineRecord, namespace: str, run_id: str) -> str:
    """One line per stage: state and reason, its stage run, its cluster's rollout (a list,
    not a table: the panel is half the page wide)."""
    freight = record.freight.digest[:19] if record.freight else "not pinned yet"
    lines = [
        f"**{record.pipeline.namespace}/{record.pipeline.name}** revision `{record.revision}`, "
        f"freight `{freight}`",
        "",
    ]
    for name, p in record.stages.items():
        cluster = record.clusters.get(name, "?")
        why = f" ({_plain(p.reason)})" if p.reason and p.reason != p.state else ""
        stage_run = link("stage run", namespace, f"{run_id}/{name}")
        where = f"rollout in {p.rollout_namespace}"
        rollout = link(where, p.rollout_namespace, p.rollout_workflow_id)
        lines.append(f"- **{name}** on `{cluster}`: {p.state}{why} · {stage_run} · {rollout}")
    return "\n".join(lines)


def stage_details(
    stage: str, where: str, rollout: str | None, namespace: str | None, now: str
) -> str:
    """One stage run: where it runs, what it does now, and the rollout in its cluster."""
    shown = link(f"rollout {rollout} in {namespace}", namespace, rollout)
    return f"stage **{stage}** ({where}): {_plain(now)}\n\n{shown}"

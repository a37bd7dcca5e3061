"""The CLI's and the hub's calls to a pipeline's runs: approve a stage, abort, list the runs of a
pipeline, read the current run's progress. Every call bounded (``runs.RPC_TIMEOUT``); a refused
approval is a ``Refused`` carrying the run's own words, not an SDK exception."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client, WorkflowUpdateFailedError

from controller.temporal.runs import RPC_TIMEOUT
from decisionmodel.pipeline.contracts import Approval, PipelineRecord
from workflows import search_attributes as sa
from workflows.pipeline import PipelineWorkflow


class Refused(Exception):
    """The run refused the request; the message is its reason."""


@dataclass(frozen=True)
class PipelineRun:
    """One run of a pipeline as visibility lists it."""

    workflow_id: str
    status: str
    phase: str
    revision: str
    stages: list[str]


async def approve(client: Client, wid: str, approval: Approval) -> str:
    """Approve a Manual stage; the run's answer, or Refused with its reason."""
    handle = client.get_workflow_handle(wid)
    try:
        said: str = await handle.execute_update(
            PipelineWorkflow.approve, approval, rpc_timeout=RPC_TIMEOUT
        )
    except WorkflowUpdateFailedError as e:
        raise Refused(str(e.cause or e)) from None
    return said


async def abort(client: Client, wid: str, reason: str) -> None:
    await client.get_workflow_handle(wid).signal(
        PipelineWorkflow.abort, reason, rpc_timeout=RPC_TIMEOUT
    )


def runs_query(namespace: str, name: str) -> str:
    """Every run of one pipeline, by its search attribute (names are DNS labels, so the quoted
    value needs no escaping)."""
    return f"WorkflowType = 'PipelineWorkflow' AND {sa.DM_PIPELINE.name} = '{namespace}/{name}'"


async def runs_of(client: Client, namespace: str, name: str, limit: int) -> list[PipelineRun]:
    """The pipeline's runs, newest first (at most ``limit``)."""
    found: list[PipelineRun] = []
    query = runs_query(namespace, name)
    async for run in client.list_workflows(query, limit=limit, rpc_timeout=RPC_TIMEOUT):
        attrs = run.typed_search_attributes
        found.append(
            PipelineRun(
                workflow_id=run.id,
                status=run.status.name if run.status else "?",
                phase=attrs.get(sa.DM_PHASE) or "-",
                revision=attrs.get(sa.DM_REVISION) or "-",
                stages=list(attrs.get(sa.DM_STAGE_STATES) or []),
            )
        )
    return found


async def progress(client: Client, wid: str) -> PipelineRecord:
    handle = client.get_workflow_handle_for(PipelineWorkflow.run, wid)
    record: PipelineRecord = await handle.query(PipelineWorkflow.progress, rpc_timeout=RPC_TIMEOUT)
    return record

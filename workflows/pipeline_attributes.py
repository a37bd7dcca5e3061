"""The search attributes of a pipeline run and of its stage runs (issue 25, the audit trail).

A run is found by its pipeline, model, revision and stages from the moment it starts (the hub
controller sets them on the start request), and by its phase and each stage's state as they
change (the run upserts them). A stage run carries its pipeline, revision and stage, so
``DmPipeline = 'models/scoring' AND DmStage = 'prod-eu'`` lists prod-eu's runs across
revisions. Values are names, digests never (the digest is in the run's own status).
"""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributePair, SearchAttributeUpdate, TypedSearchAttributes

from decisionmodel.pipeline.contracts import PipelineInput, PipelineRecord
from decisionmodel.pipeline.status import run_phase
from workflows import search_attributes as sa


def pipeline_key(inp: PipelineInput) -> str:
    return f"{inp.pipeline.namespace}/{inp.pipeline.name}"


def at_start(inp: PipelineInput) -> TypedSearchAttributes:
    """What the hub controller starts a run with."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(sa.DM_PIPELINE, pipeline_key(inp)),
        SearchAttributePair(sa.DM_MODEL, inp.spec.template.spec.model),
        SearchAttributePair(sa.DM_REVISION, inp.revision),
        SearchAttributePair(sa.DM_STAGES, [s.name for s in inp.spec.stages]),
    ]
    return TypedSearchAttributes(pairs)


def for_stage(inp: PipelineInput, stage: str) -> TypedSearchAttributes:
    """What the run starts a stage's child workflow with."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(sa.DM_PIPELINE, pipeline_key(inp)),
        SearchAttributePair(sa.DM_MODEL, inp.spec.template.spec.model),
        SearchAttributePair(sa.DM_REVISION, inp.revision),
        SearchAttributePair(sa.DM_STAGE, stage),
    ]
    return TypedSearchAttributes(pairs)


def progress(record: PipelineRecord) -> dict[str, SearchAttributeUpdate[Any]]:
    """The run's phase and ``<stage>=<state>`` of every stage, keyed by attribute name so the
    run upserts only what changed."""
    states = [f"{name}={p.state}" for name, p in record.stages.items()]
    return {
        sa.DM_PHASE.name: sa.DM_PHASE.value_set(run_phase(record).value),
        sa.DM_STAGE_STATES.name: sa.DM_STAGE_STATES.value_set(states),
    }

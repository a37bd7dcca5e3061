"""Typed search attributes of a rollout workflow and of a pipeline run.

They make the Temporal UI and ``temporal workflow list --query`` answer "all rollouts of
support-router" (``DmName = 'support-router'``) or "all failed rollouts"
(``DmResult = 'Failed'``); in the pipelines' namespace "every run of models/scoring"
(``DmPipeline = 'models/scoring'``), "runs with a stage prod-eu" (``DmStages = 'prod-eu'``),
"runs whose prod-eu failed" (``DmStageStates = 'prod-eu=Failed'``) or "prod-eu's stage runs"
(``DmStage = 'prod-eu'``). A namespace must have them registered before a worker runs
(``dmrollout temporal setup``; the local dev server registers them at start).
"""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey

DM_NAMESPACE = SearchAttributeKey.for_keyword("DmNamespace")
DM_NAME = SearchAttributeKey.for_keyword("DmName")
DM_REVISION = SearchAttributeKey.for_keyword("DmRevision")
DM_MODEL = SearchAttributeKey.for_keyword("DmModel")
DM_PHASE = SearchAttributeKey.for_keyword("DmPhase")
DM_RESULT = SearchAttributeKey.for_keyword("DmResult")

ALL: tuple[SearchAttributeKey[str], ...] = (
    DM_NAMESPACE,
    DM_NAME,
    DM_REVISION,
    DM_MODEL,
    DM_PHASE,
    DM_RESULT,
)


# A pipeline run (issue 25): ``<namespace>/<name>`` of the DecisionModelPipeline; its stage
# names; ``<stage>=<state>`` of each stage, kept current; a stage run's own stage name. Beside
# DmModel, DmRevision (the pipeline's revision) and DmPhase (the run's phase).
DM_PIPELINE = SearchAttributeKey.for_keyword("DmPipeline")
DM_STAGES = SearchAttributeKey.for_keyword_list("DmStages")
DM_STAGE_STATES = SearchAttributeKey.for_keyword_list("DmStageStates")
DM_STAGE = SearchAttributeKey.for_keyword("DmStage")

PIPELINE_ALL: tuple[SearchAttributeKey[Any], ...] = (
    DM_PIPELINE,
    DM_MODEL,
    DM_REVISION,
    DM_PHASE,
    DM_STAGES,
    DM_STAGE_STATES,
    DM_STAGE,
)


CLI_TYPES = {
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
}


def registered(pipelines: bool = False) -> tuple[SearchAttributeKey[Any], ...]:
    """What a namespace needs: the rollouts', or the pipelines' too when one holds both."""
    if not pipelines:
        return ALL
    return ALL + tuple(k for k in PIPELINE_ALL if k not in ALL)


def cli_registrations() -> list[str]:
    """``name=Type`` pairs for ``temporal server start-dev --search-attribute`` (every
    namespace of the local server holds both sets)."""
    return [f"{k.name}={CLI_TYPES[k.indexed_value_type]}" for k in registered(pipelines=True)]

"""The rules that move a pipeline's stages (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from decisionmodel.api.pipeline import DecisionModelPipelineSpec
from decisionmodel.pipeline.stages import (
    StageProgress,
    blocked_by,
    dependencies_promoted,
    downstream,
    soaked_at,
    upstream_verdicts,
)
from decisionmodel.vocabulary import StageState

T0 = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
SPEC = DecisionModelPipelineSpec.model_validate(
    {
        "template": {"spec": {"model": "laya:en"}},
        "stages": [
            {"name": "staging", "cluster": "s", "namespace": "m"},
            {"name": "canary", "cluster": "s", "namespace": "c", "dependsOn": ["staging"]},
            {
                "name": "prod",
                "cluster": "p",
                "namespace": "m",
                "dependsOn": ["staging", "canary"],
                "soak": "1h",
            },
        ],
    }
)


def at(**states: StageProgress) -> dict[str, StageProgress]:
    return {s.name: states.get(s.name, StageProgress()) for s in SPEC.stages}


def test_the_soak_counts_from_the_latest_dependency_promotion() -> None:
    progress = at(
        staging=StageProgress(state=StageState.PROMOTED, promoted_at=T0),
        canary=StageProgress(state=StageState.PROMOTED, promoted_at=T0 + timedelta(minutes=20)),
    )
    prod = SPEC.stage("prod")
    assert dependencies_promoted(prod, progress)
    assert soaked_at(prod, progress) == T0 + timedelta(minutes=80)
    assert soaked_at(SPEC.stage("staging"), progress) is None


def test_a_failed_dependency_blocks_and_a_pending_one_does_not() -> None:
    prod = SPEC.stage("prod")
    assert blocked_by(prod, at(canary=StageProgress(state=StageState.ROLLING_OUT))) is None
    assert blocked_by(prod, at(canary=StageProgress(state=StageState.FAILED))) == "canary"
    assert not dependencies_promoted(prod, at())


def test_downstream_follows_every_path() -> None:
    assert downstream(SPEC.stages, "staging") == ["canary", "prod"]
    assert downstream(SPEC.stages, "prod") == []


def test_an_approval_binds_each_dependency_by_its_state_and_its_clusters_rollout() -> None:
    prod = SPEC.stages[2]
    progress = {
        "staging": StageProgress(state=StageState.PROMOTED, rollout_workflow_id="rollout/m/x/1"),
        "canary": StageProgress(state=StageState.FAILED),
        "prod": StageProgress(),
    }
    assert upstream_verdicts(prod, progress) == {
        "staging": "Promoted@rollout/m/x/1",
        "canary": "Failed@-",
    }
    assert upstream_verdicts(SPEC.stages[0], progress) == {}

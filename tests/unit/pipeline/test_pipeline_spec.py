"""The DecisionModelPipeline spec: what it refuses, naming the field (issue 25, "Bad input")."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from decisionmodel.api.pipeline import DecisionModelPipelineSpec, find_cycle, graph_problem


def pipeline(*stages: dict[str, Any], template: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "template": template or {"spec": {"model": "laya:en"}},
        "stages": [{"cluster": "c1", "namespace": "models", **s} for s in stages],
    }


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        DecisionModelPipelineSpec.model_validate(data)
    return str(caught.value)


def test_a_valid_pipeline_reads_with_its_defaults() -> None:
    spec = DecisionModelPipelineSpec.model_validate(
        pipeline({"name": "staging"}, {"name": "prod", "dependsOn": ["staging"], "soak": "30m"})
    )
    assert spec.stage("staging").approval == "Automatic"
    assert spec.stage("prod").soak_time.total_seconds() == 1800
    assert spec.stage("prod").task_queue == "dmrollout-stage-c1"


@pytest.mark.parametrize(
    ("stages", "names"),
    [
        (({"name": "a"}, {"name": "a"}), ["stages[1].name", "duplicate stage name 'a'"]),
        (({"name": "a", "dependsOn": ["b"]},), ["stages[0].dependsOn", "'b'"]),
        (({"name": "a", "dependsOn": ["a"]},), ["stages[0].dependsOn", "itself"]),
        (
            (
                {"name": "a", "dependsOn": ["c"]},
                {"name": "b", "dependsOn": ["a"]},
                {"name": "c", "dependsOn": ["b"]},
            ),
            ["a dependency cycle (a -> c -> b -> a)", "remove one edge"],
        ),
        (({"name": "a", "soak": "forever"},), ["soak"]),
        (({"name": "a", "soak": "721h"},), ["720h"]),
        (({"name": "Prod"},), ["name"]),
        (
            ({"name": "a", "windows": [{"days": ["Mon"], "start": "09:00", "end": "09:00"}]},),
            ["must differ"],
        ),
        (
            ({"name": "a", "windows": [{"days": ["Mon"], "start": "25:00", "end": "09:00"}]},),
            ["start"],
        ),
        (
            (
                {
                    "name": "a",
                    "windows": [
                        {
                            "days": ["Mon"],
                            "start": "09:00",
                            "end": "10:00",
                            "timeZone": "Mars/Olympus",
                        }
                    ],
                },
            ),
            ["unknown time zone 'Mars/Olympus'"],
        ),
        (({"name": "a", "windows": [{"days": [], "start": "09:00", "end": "10:00"}]},), ["days"]),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    stages: tuple[dict[str, Any], ...], names: list[str]
) -> None:
    message = refusal(pipeline(*stages))
    for name in names:
        assert name in message


def test_a_template_that_is_not_a_decision_model_spec_is_refused() -> None:
    message = refusal(pipeline({"name": "a"}, template={"spec": {"model": "laya"}}))
    assert "template.spec.model" in message
    assert "explicit tag" in message


def test_no_stages_is_refused() -> None:
    assert "stages" in refusal({"template": {"spec": {"model": "laya:en"}}, "stages": []})


def test_the_graph_helpers_agree_on_a_diamond() -> None:
    spec = DecisionModelPipelineSpec.model_validate(
        pipeline(
            {"name": "staging"},
            {"name": "eu", "dependsOn": ["staging"]},
            {"name": "us", "dependsOn": ["staging"]},
            {"name": "global", "dependsOn": ["eu", "us"]},
        )
    )
    assert find_cycle(spec.stages) == []
    assert graph_problem(spec.stages) is None

"""The spec models: defaults, wire names, effective promotion, and the shared case table."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from api_schema_tools import Case, load_cases

from decisionmodel.api import (
    MSG_DECIMAL_RANGE,
    AccessMode,
    DecisionModel,
    DecisionModelInvalid,
    DecisionModelSpec,
    Device,
    Engine,
    EvaluationSpec,
    Promotion,
    RolloutSpec,
    SchedulingSpec,
)


def test_defaults() -> None:
    spec = DecisionModelSpec(model="laya:en")
    assert spec.engine is Engine.OLLAYA
    assert spec.replicas == 1
    assert spec.device is Device.CPU
    assert spec.digest is None and spec.image is None and spec.runtime_version is None
    assert spec.resources == {}
    assert spec.scheduling.is_empty()
    assert spec.cache.size == "10Gi"
    assert spec.cache.access_modes == [AccessMode.READ_WRITE_ONCE]
    assert spec.cache.storage_class_name is None
    assert spec.auth.api_key_secret_ref is None
    assert spec.rollout.evaluation is None
    assert spec.rollout.promotion is None
    timeouts = spec.rollout.timeouts
    assert (timeouts.caching, timeouts.starting, timeouts.evaluating) == ("30m", "10m", "10m")
    assert timeouts.caching_duration.total_seconds() == 1800
    assert timeouts.starting_duration.total_seconds() == 600
    assert timeouts.evaluating_duration.total_seconds() == 600


def test_default_access_modes_are_not_shared_between_instances() -> None:
    a = DecisionModelSpec(model="laya:en")
    a.cache.access_modes.append(AccessMode.READ_WRITE_MANY)
    assert DecisionModelSpec(model="laya:en").cache.access_modes == [AccessMode.READ_WRITE_ONCE]


def _evaluation() -> dict[str, Any]:
    return {"datasetRef": {"configMapRef": {"name": "g", "key": "c"}}, "minAccuracy": "0.9"}


def test_max_cases_default() -> None:
    assert EvaluationSpec.model_validate(_evaluation()).max_cases == 500


@pytest.mark.parametrize(
    ("rollout", "expected"),
    [
        ({}, Promotion.AUTOMATIC),
        ({"evaluation": _evaluation()}, Promotion.EVALUATION_GATED),
        ({"promotion": "Manual"}, Promotion.MANUAL),
        ({"promotion": "Manual", "evaluation": _evaluation()}, Promotion.MANUAL),
        ({"promotion": "Automatic", "evaluation": _evaluation()}, Promotion.AUTOMATIC),
        ({"promotion": "EvaluationGated", "evaluation": _evaluation()}, Promotion.EVALUATION_GATED),
    ],
)
def test_effective_promotion(rollout: dict[str, Any], expected: Promotion) -> None:
    assert RolloutSpec.model_validate(rollout).effective_promotion is expected
    spec = DecisionModelSpec.model_validate({"model": "laya:en", "rollout": rollout})
    assert spec.effective_promotion is expected


def test_wire_names_and_python_names_both_populate() -> None:
    by_alias = DecisionModelSpec.model_validate(
        {
            "model": "laya:en",
            "runtimeVersion": "0.10.0",
            "cache": {"accessModes": ["ReadWriteMany"], "storageClassName": "rwx"},
            "rollout": {"evaluation": {**_evaluation(), "maxECE": "0.1", "maxECEIncrease": "0"}},
        }
    )
    by_name = DecisionModelSpec.model_validate(
        {
            "model": "laya:en",
            "runtime_version": "0.10.0",
            "cache": {"access_modes": ["ReadWriteMany"], "storage_class_name": "rwx"},
            "rollout": {
                "evaluation": {
                    "dataset_ref": {"config_map_ref": {"name": "g", "key": "c"}},
                    "min_accuracy": "0.9",
                    "max_ece": "0.1",
                    "max_ece_increase": "0",
                }
            },
        }
    )
    assert by_alias == by_name
    wire = by_alias.to_wire()
    assert wire["runtimeVersion"] == "0.10.0"
    assert wire["cache"] == {
        "size": "10Gi",
        "storageClassName": "rwx",
        "accessModes": ["ReadWriteMany"],
    }
    evaluation = wire["rollout"]["evaluation"]
    assert set(evaluation) == {"datasetRef", "minAccuracy", "maxECE", "maxECEIncrease", "maxCases"}
    assert evaluation["datasetRef"] == {"configMapRef": {"name": "g", "key": "c"}}


def test_wire_round_trip_of_the_full_case() -> None:
    (full,) = [c for c in load_cases("valid") if c.case == "full"]
    spec = DecisionModelSpec.model_validate(full.spec)
    assert spec.to_wire() == full.spec
    assert DecisionModelSpec.model_validate(spec.to_wire()) == spec


def test_evaluation_decimals() -> None:
    evaluation = EvaluationSpec.model_validate(
        {**_evaluation(), "maxAccuracyDrop": "0.02", "maxECEIncrease": "0.05"}
    )
    assert evaluation.min_accuracy_value == Decimal("0.9")
    assert evaluation.max_accuracy_drop_value == Decimal("0.02")
    assert evaluation.max_ece_value is None
    assert evaluation.max_ece_increase_value == Decimal("0.05")
    assert evaluation.needs_baseline
    assert not EvaluationSpec.model_validate(_evaluation()).needs_baseline


def test_messages_say_what_is_wanted() -> None:
    bad = {"model": "laya:en", "rollout": {"evaluation": {**_evaluation(), "minAccuracy": "1.5"}}}
    with pytest.raises(ValueError, match=re.escape(MSG_DECIMAL_RANGE)):
        DecisionModelSpec.model_validate(bad)
    bad = {"model": "laya:en", "rollout": {"timeouts": {"caching": "ten minutes"}}}
    with pytest.raises(ValueError, match="invalid duration 'ten minutes': expected a Go duration"):
        DecisionModelSpec.model_validate(bad)
    # parse_duration would take ".5h"; the API server's pattern does not, so neither does this.
    with pytest.raises(ValueError, match="invalid duration"):
        DecisionModelSpec.model_validate(
            {"model": "laya:en", "rollout": {"timeouts": {"caching": ".5h"}}}
        )


def test_quantity_accepts_an_integer_as_its_string_form() -> None:
    spec = DecisionModelSpec.model_validate({"model": "laya:en", "cache": {"size": 1073741824}})
    assert spec.cache.size == "1073741824"


def test_scheduling_emptiness() -> None:
    assert SchedulingSpec().is_empty()
    assert SchedulingSpec(node_selector={}, tolerations=[]).is_empty()
    assert not SchedulingSpec(runtime_class_name="nvidia").is_empty()
    assert not SchedulingSpec(node_selector={"gpu": "t4"}).is_empty()


def test_unknown_fields_are_ignored() -> None:
    spec = DecisionModelSpec.model_validate({"model": "laya:en", "futureField": {"x": 1}})
    assert "futureField" not in spec.to_wire()


@pytest.mark.parametrize("case", load_cases("valid"), ids=lambda c: c.case)
def test_valid_cases_are_accepted(case: Case) -> None:
    dm = DecisionModel.from_k8s(case.manifest("default"))
    assert dm.metadata.name == case.name
    assert dm.key == f"default/{case.name}"


@pytest.mark.parametrize("case", load_cases("invalid"), ids=lambda c: c.case)
def test_invalid_cases_are_refused_naming_the_field(case: Case) -> None:
    with pytest.raises(DecisionModelInvalid) as info:
        DecisionModel.from_k8s(case.manifest("default"))
    text = str(info.value)
    assert text.startswith(f"DecisionModel default/{case.name} is invalid: ")
    # Field-level errors carry the full wire path; object-level rules (exclusive fields,
    # dataset sources, names) name the field in their shared message.
    last = case.field.rsplit(".", 1)[-1]
    assert case.field in text or last in text, text
    if case.message:
        assert case.message in text


def test_error_names_every_bad_field_by_wire_path() -> None:
    obj = load_cases("valid")[0].manifest("prod")
    obj["spec"].update(replicas=0, device="tpu")
    obj["spec"]["cache"] = {"accessModes": ["ReadWriteOnce", "Nope"]}
    obj["spec"]["rollout"] = {"evaluation": {**_evaluation(), "minAccuracy": "1.5"}}
    with pytest.raises(DecisionModelInvalid) as info:
        DecisionModel.from_k8s(obj)
    paths = [path for path, _ in info.value.errors]
    assert paths == [
        "spec.replicas",
        "spec.device",
        "spec.cache.accessModes[1]",
        "spec.rollout.evaluation.minAccuracy",
    ]
    assert info.value.name == "prod/triage"
    assert "spec.replicas: Input should be greater than or equal to 1" in str(info.value)


def test_from_k8s_reads_metadata_and_status() -> None:
    obj = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {
            "name": "triage",
            "namespace": "prod",
            "uid": "0b7c",
            "generation": 4,
            "resourceVersion": "981",
            "annotations": {"decisionmodel.io/retry": "1"},
            "labels": {"team": "support"},
            "creationTimestamp": "2026-10-02T12:00:00Z",
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"model": "laya:en"},
        "status": {"phase": "Ready", "observedGeneration": 4, "replicas": {"modelReady": 1}},
    }
    dm = DecisionModel.from_k8s(obj)
    assert dm.metadata.resource_version == "981"
    assert dm.metadata.generation == 4
    assert dm.metadata.annotations == {"decisionmodel.io/retry": "1"}
    assert dm.status.phase == "Ready"
    assert dm.status.replicas is not None and dm.status.replicas.model_ready == 1
    assert dm.to_wire()["metadata"]["resourceVersion"] == "981"


def test_wrong_kind_is_refused() -> None:
    obj = load_cases("valid")[0].manifest()
    obj["kind"] = "Deployment"
    with pytest.raises(DecisionModelInvalid, match="kind"):
        DecisionModel.from_k8s(obj)


def test_missing_spec_is_refused() -> None:
    with pytest.raises(DecisionModelInvalid, match=r"spec: Field required"):
        DecisionModel.from_k8s({"metadata": {"name": "x"}})


def test_the_evaluations_case_limit_is_the_specs() -> None:
    """The "more cases" hint names the limit maxCases allows (decisionmodel.evaluation cannot
    import the API's constant: layers)."""
    from decisionmodel.api.spec import MAX_MAX_CASES
    from decisionmodel.evaluation.dataset import MAX_CASES

    assert MAX_CASES == MAX_MAX_CASES

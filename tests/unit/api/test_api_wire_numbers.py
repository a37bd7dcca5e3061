"""A number the API server cannot decode (beyond float64) is refused by the pydantic types too,
wherever it sits, naming its path (found by make fuzz: the API server refuses the whole body)."""

from __future__ import annotations

from typing import Any

import pytest

from decisionmodel.api import DecisionModel, DecisionModelInvalid


def manifest(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "triage"}, "spec": {"model": "laya:en", **spec}}


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"resources": {"limits": {"cpu": [1, 10**400]}}}, "spec.resources.limits.cpu[1]"),
        ({"futureField": -(10**309)}, "spec.futureField"),
    ],
)
def test_a_number_beyond_a_double_is_refused_naming_its_path(
    spec: dict[str, Any], path: str
) -> None:
    with pytest.raises(DecisionModelInvalid) as info:
        DecisionModel.from_k8s(manifest(**spec))
    assert f"{path}: the number is beyond the range of a double" in str(info.value)


def test_a_large_number_a_double_holds_is_accepted() -> None:
    dm = DecisionModel.from_k8s(manifest(resources={"x": 10**300}))
    assert dm.spec.resources == {"x": 10**300}


def test_deep_nesting_is_walked_without_recursion() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    # Walked iteratively (no RecursionError), and refused as too deep, naming the field.
    with pytest.raises(DecisionModelInvalid, match=r"spec\.resources\.deep"):
        DecisionModel.from_k8s(manifest(resources={"deep": deep}))


def test_a_spec_nested_deeper_than_the_limit_is_refused_naming_the_field() -> None:
    """make fuzz: 250+ levels in a free-form field made to_wire() raise in a reconcile."""
    from decisionmodel.api import MAX_NESTING, DecisionModel, DecisionModelInvalid

    deep: dict[str, object] = {}
    node = deep
    for _ in range(MAX_NESTING + 5):
        node["a"] = {}
        node = node["a"]  # type: ignore[assignment]
    obj = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": "x", "namespace": "n"},
        "spec": {"model": "laya:en", "resources": deep},
    }
    with pytest.raises(DecisionModelInvalid) as err:
        DecisionModel.from_k8s(obj)
    assert "spec.resources.a: nested deeper than 64 levels" in str(err.value)

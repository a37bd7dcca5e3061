"""The renderers and their params under the placement guard: every emptyDir has a sizeLimit,
priorityClassName reaches the Pod, and the params refuse a placement outside the operator's
policy before anything is rendered (the worker's own check: a workflow input is not trusted)."""

from __future__ import annotations

from typing import Any

import pytest

from decisionmodel.engine.params import PrefetchParams, Scheduling, ServingParams
from decisionmodel.engine.render import render_prefetch_job, render_serving_deployment
from decisionmodel.errors import PlacementRefused
from decisionmodel.rollout import render_params
from decisionmodel.rollout.contracts import (
    DMRef,
    RevisionObjectsInput,
    RevisionRecord,
    RevisionSpec,
)
from decisionmodel.rollout.settings import RolloutSettings

DIGEST = "ab" * 32
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def empty_dirs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [v["emptyDir"] for v in pod_spec(obj)["volumes"] if "emptyDir" in v]


def test_every_emptydir_has_the_default_size_limit(
    cpu_serving: ServingParams, default_prefetch: PrefetchParams
) -> None:
    for obj in (render_serving_deployment(cpu_serving), render_prefetch_job(default_prefetch)):
        assert empty_dirs(obj) == [{"sizeLimit": "1Gi"}, {"sizeLimit": "1Gi"}]


def test_the_size_limit_is_the_operators(cpu_serving: ServingParams) -> None:
    small = cpu_serving.model_copy(update={"scratch_size_limit": "256Mi"})
    assert empty_dirs(render_serving_deployment(small)) == [{"sizeLimit": "256Mi"}] * 2


def test_priority_class_name_reaches_the_pod(cpu_serving: ServingParams) -> None:
    placed = cpu_serving.model_copy(
        update={"scheduling": Scheduling.model_validate({"priorityClassName": "model-serving"})}
    )
    assert pod_spec(render_serving_deployment(placed))["priorityClassName"] == "model-serving"
    assert "priorityClassName" not in pod_spec(render_serving_deployment(cpu_serving))


def objects_input(scheduling: dict[str, Any], replicas: int = 1) -> RevisionObjectsInput:
    return RevisionObjectsInput(
        dm=DMRef(namespace="ns", name="m", uid="u1"),
        record=RevisionRecord(hash="0123456789abcdef", model="laya:en", digest=DIGEST),
        revision=RevisionSpec(model="laya:en", digest=DIGEST, scheduling=scheduling),
        store_manifest_path="manifests/ollaya.dev/library/laya/en",
        replicas=replicas,
    )


SETTINGS = RolloutSettings(placement_profile="Strict")


@pytest.mark.parametrize(
    ("scheduling", "replicas", "field"),
    [
        ({"tolerations": [CONTROL_PLANE]}, 1, "spec.scheduling.tolerations[0].key"),
        ({"runtimeClassName": "kata"}, 1, "spec.scheduling.runtimeClassName"),
        ({}, 11, "spec.replicas"),
    ],
)
def test_serving_params_refuse_what_the_policy_refuses(
    scheduling: dict[str, Any], replicas: int, field: str
) -> None:
    with pytest.raises(PlacementRefused, match=field.replace("[", r"\[").replace("]", r"\]")):
        render_params.serving_params(objects_input(scheduling, replicas), SETTINGS)


def test_prefetch_params_refuse_the_placement_and_render_the_size_limit() -> None:
    with pytest.raises(PlacementRefused):
        render_params.prefetch_params(objects_input({"tolerations": [CONTROL_PLANE]}), SETTINGS)
    custom = RolloutSettings(scratch_size_limit="2Gi")
    job = render_prefetch_job(render_params.prefetch_params(objects_input({}), custom))
    assert empty_dirs(job) == [{"sizeLimit": "2Gi"}] * 2


def test_an_allowed_placement_renders_and_a_recorded_stable_is_restored_as_recorded() -> None:
    allowed = RolloutSettings(placement_profile="Strict", allowed_runtime_classes=["nvidia"])
    inp = objects_input({"runtimeClassName": "nvidia"}, 3)
    assert render_params.serving_params(inp, allowed).scheduling.runtime_class_name == "nvidia"
    # The stable restored from status passed the policy when it rolled out; a policy tightened
    # since does not stop the controller from restoring it.
    restored = render_params.serving_params(inp, SETTINGS, recorded=True)
    assert restored.scheduling.runtime_class_name == "nvidia"


def test_the_default_profile_passes_what_the_reference_passed() -> None:
    """Passthrough (issue 22): GPU clusters' runtimeClassName, control-plane tolerations and an
    HPA past 10 replicas reach the Pods as written, as with the reference operator."""
    default = RolloutSettings()
    assert default.placement_profile == "Passthrough" and default.replicas_cap is None
    scheduling = {"tolerations": [CONTROL_PLANE], "runtimeClassName": "nvidia"}
    params = render_params.serving_params(objects_input(scheduling, 40), default)
    assert params.scheduling.runtime_class_name == "nvidia"
    assert params.replicas == 40
    render_params.prefetch_params(objects_input(scheduling), default)  # nothing refused

"""The Kubernetes side of pipelines (issue 25): a stage's DecisionModel, the hub's status.

A stage applies its DecisionModel by server-side apply under its own field manager, so the
fields it sets (the template's spec) are its own and a user's other fields (annotations such
as decisionmodel.io/retry) are left alone. The hub's DecisionModelPipeline status is applied
by the pipeline's activities under another manager than the pipeline controller's.
"""

from __future__ import annotations

from typing import Any, Final

from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.api.pipeline import PIPELINE_KIND, PIPELINE_PLURAL
from decisionmodel.pipeline.contracts import StageInput
from kube.client import Kube
from kube.errors import NotFound

LABEL_PIPELINE: Final = "decisionmodel.io/pipeline"
ANNOTATION_PIPELINE_REVISION: Final = "decisionmodel.io/pipeline-revision"
ANNOTATION_PIPELINE_STAGE: Final = "decisionmodel.io/pipeline-stage"
ANNOTATION_PIPELINE_HUB: Final = "decisionmodel.io/pipeline-hub"
PIPELINE_FIELD_MANAGER: Final = "dmrollout-pipeline"
PIPELINE_STATUS_MANAGER: Final = "dmrollout-pipeline-run"
PIPELINE_CONTROLLER_MANAGER: Final = "dmrollout-pipeline-controller"
APPLY_PATCH: Final = "application/apply-patch+yaml"


def stage_annotations(inp: StageInput) -> dict[str, str]:
    """Where a stage's DecisionModel came from: readable with kubectl in that cluster."""
    return {
        ANNOTATION_PIPELINE_HUB: f"{inp.pipeline.namespace}/{inp.pipeline.name}",
        ANNOTATION_PIPELINE_REVISION: inp.pipeline_revision,
        ANNOTATION_PIPELINE_STAGE: inp.stage,
    }


def apply_dm(kube: Kube, body: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply of a whole DecisionModel (metadata and spec) by the stage."""
    meta = body["metadata"]
    result: dict[str, Any] | None = kube.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        meta["namespace"],
        PLURAL,
        meta["name"],
        body,
        field_manager=PIPELINE_FIELD_MANAGER,
        force=True,
        _content_type=APPLY_PATCH,
    )
    if result is None:
        # The client maps only 200 to a body: an apply that created the object (201) comes
        # back empty. Read what was created.
        result = kube.custom.get_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], PLURAL, meta["name"]
        )
    assert result is not None
    return result


def read_pipeline(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = kube.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PIPELINE_PLURAL, name
        )
    except NotFound:
        return None
    return obj


def annotate_pipeline(kube: Kube, namespace: str, name: str, annotations: dict[str, str]) -> None:
    """A merge patch of the pipeline's annotations (the user's field, as kubectl annotate)."""
    kube.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PIPELINE_PLURAL,
        name,
        {"metadata": {"annotations": annotations}},
    )


def apply_pipeline_status(
    kube: Kube, namespace: str, name: str, uid: str, status: dict[str, Any], manager: str
) -> dict[str, Any]:
    """Server-side apply of the status fields ``manager`` owns; the UID guards against a
    re-created namesake (409)."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": PIPELINE_KIND,
        "metadata": {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
        "status": status,
    }
    result: dict[str, Any] = kube.custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PIPELINE_PLURAL,
        name,
        body,
        field_manager=manager,
        force=True,
        _content_type=APPLY_PATCH,
    )
    return result

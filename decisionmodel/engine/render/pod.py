"""Pod-level pieces shared by the serving Deployment and the prefetch Job."""

from __future__ import annotations

import copy
from typing import Any

from decisionmodel.engine.params import Scheduling
from decisionmodel.vocabulary import Device

RUNTIME_UID = 1000  # the image's user (RUNTIME_API "Runtime environment": UID 1000)
RUNTIME_GID = 1000
MODELS_PATH = "/models"
TMP_PATH = "/tmp"
HOME_PATH = "/tmp/home"
MODELS_VOLUME = "models"
TMP_VOLUME = "tmp"
HOME_VOLUME = "home"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TOLERATION: dict[str, str] = {
    "key": GPU_RESOURCE,
    "operator": "Exists",
    "effect": "NoSchedule",
}


def canonical(value: Any) -> Any:
    """A deep copy with mapping keys sorted (lists keep their order): passthrough fragments
    render the same whatever order the caller built them in, and the output never aliases
    the (frozen) params."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return copy.deepcopy(value)


def pod_security_context() -> dict[str, Any]:
    """Non-root UID/GID 1000 with the store group-owned by 1000 (seed 000 §7, §9).
    OnRootMismatch skips the recursive chown of a multi-GB store on every Pod start when the
    root already has the right group."""
    return {
        "runAsUser": RUNTIME_UID,
        "runAsGroup": RUNTIME_GID,
        "runAsNonRoot": True,
        "fsGroup": RUNTIME_GID,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def scratch_volumes(size_limit: str) -> list[dict[str, Any]]:
    """The root filesystem is read-only, so /tmp and $HOME (``ollaya`` keeps state in
    ``$HOME/.ollaya``) are emptyDirs. HOME is its own mount so the directory exists before
    the process starts. Each has a sizeLimit: without one a Pod may fill the node's disk."""
    return [
        {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": size_limit}},
        {"name": HOME_VOLUME, "emptyDir": {"sizeLimit": size_limit}},
    ]


def scratch_mounts() -> list[dict[str, Any]]:
    return [
        {"name": TMP_VOLUME, "mountPath": TMP_PATH},
        {"name": HOME_VOLUME, "mountPath": HOME_PATH},
    ]


def store_volume(claim_name: str, *, read_only: bool) -> dict[str, Any]:
    claim: dict[str, Any] = {"claimName": claim_name}
    if read_only:
        claim["readOnly"] = True
    return {"name": MODELS_VOLUME, "persistentVolumeClaim": claim}


def store_mount(*, read_only: bool) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": MODELS_VOLUME, "mountPath": MODELS_PATH}
    if read_only:
        mount["readOnly"] = True
    return mount


def _tolerates_gpu(toleration: dict[str, Any]) -> bool:
    key = toleration.get("key", "")
    operator = toleration.get("operator", "Equal")
    effect = toleration.get("effect", "")
    key_ok = key == GPU_RESOURCE or (key == "" and operator == "Exists")
    return key_ok and effect in ("", "NoSchedule")


def tolerations(scheduling: Scheduling, device: Device) -> list[dict[str, Any]]:
    """The user's tolerations, plus the GPU node taint's toleration for cuda unless one of
    theirs already tolerates it (seed 000 §8)."""
    result: list[dict[str, Any]] = canonical(list(scheduling.tolerations))
    if device == Device.CUDA and not any(_tolerates_gpu(t) for t in result):
        result.append(dict(GPU_TOLERATION))
    return result


def scheduling_fields(scheduling: Scheduling, device: Device) -> dict[str, Any]:
    """Pod spec placement fields; empty ones are left out."""
    fields: dict[str, Any] = {}
    if scheduling.node_selector:
        fields["nodeSelector"] = canonical(scheduling.node_selector)
    if scheduling.affinity:
        fields["affinity"] = canonical(scheduling.affinity)
    tols = tolerations(scheduling, device)
    if tols:
        fields["tolerations"] = tols
    if scheduling.runtime_class_name:
        fields["runtimeClassName"] = scheduling.runtime_class_name
    if scheduling.priority_class_name:
        fields["priorityClassName"] = scheduling.priority_class_name
    return fields

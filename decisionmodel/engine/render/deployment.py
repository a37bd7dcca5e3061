"""The serving Deployment ``<dm>-<rev>`` (REFERENCE "Objects", seed 000 §5, §7, §9)."""

from __future__ import annotations

from typing import Any

from decisionmodel.engine.params import AccessMode, ServingParams
from decisionmodel.engine.render import labels as L
from decisionmodel.engine.render.pod import (
    GPU_RESOURCE,
    HOME_PATH,
    MODELS_PATH,
    canonical,
    container_security_context,
    pod_security_context,
    scheduling_fields,
    scratch_mounts,
    scratch_volumes,
    store_mount,
    store_volume,
)
from decisionmodel.vocabulary import Device

CONTAINER_NAME = "ollaya"
# The runtime answers GET / with 200 as soon as it listens, even with an API key
# (RUNTIME_API "Runtime HTTP API"): fine for liveness, useless for model readiness, which the
# readiness gate carries instead. 2 s x 30 gives the server a minute to open its port.
STARTUP_PERIOD_SECONDS = 2
STARTUP_FAILURE_THRESHOLD = 30
LIVENESS_PERIOD_SECONDS = 10
TERMINATION_GRACE_SECONDS = 30


def deployment_strategy(access_modes: tuple[AccessMode, ...], device: Device) -> dict[str, Any]:
    """Seed 001 "Rollout strategy and downtime": an RWO store attaches to one node, so a
    surge Pod elsewhere would hang on Multi-Attach: Recreate. A shareable store with GPUs:
    no surge, so an in-place roll needs no extra GPU. Otherwise the Kubernetes default."""
    if "ReadWriteMany" not in access_modes:
        return {"type": "Recreate"}
    if device == Device.CUDA:
        return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def quantities(values: dict[str, Any]) -> dict[str, Any]:
    """Sorted, each quantity as text: the CRD keeps an unquoted ``cpu: 1`` as the number 1, which
    a quantity may be on the wire but the Kubernetes client refuses to send (issue 34: such a
    DecisionModel, usual in YAML and carried over from the reference, never started)."""
    return {
        k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
        for k, v in canonical(values).items()
    }


def serving_resources(resources: dict[str, Any], device: Device) -> dict[str, Any]:
    """The user's resources; cuda adds a ``nvidia.com/gpu: 1`` limit unless one is set. A
    GPU request without a limit is copied into the limit, since the API server requires both
    to be equal for extended resources."""
    requests: dict[str, Any] = quantities(resources.get("requests") or {})
    limits: dict[str, Any] = quantities(resources.get("limits") or {})
    if device == Device.CUDA and GPU_RESOURCE not in limits:
        limits = canonical({**limits, GPU_RESOURCE: requests.get(GPU_RESOURCE, "1")})
    result: dict[str, Any] = {}
    if requests:
        result["requests"] = requests
    if limits:
        result["limits"] = limits
    if resources.get("claims"):
        result["claims"] = canonical(resources["claims"])
    return result


def _env(p: ServingParams) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "OLLAYA_HOST", "value": f"0.0.0.0:{L.HTTP_PORT}"},
        {"name": "OLLAYA_MODELS", "value": MODELS_PATH},
        {"name": "OLLAYA_DEVICE", "value": str(p.device)},
        # Keep the model loaded until the server stops; warmup also pins it via the API.
        {"name": "OLLAYA_KEEP_ALIVE", "value": "-1"},
        {"name": "HOME", "value": HOME_PATH},
    ]
    if p.registry_url:
        # `ollaya serve` looks a host-less name up under manifests/<OLLAYA_REGISTRY host>/,
        # where the prefetch Job wrote it when a mirror is configured (seed 001, "Supported
        # models"); without it /api/ps would never show the model.
        env.append({"name": "OLLAYA_REGISTRY", "value": p.registry_url})
    if p.api_key_secret_ref is not None:
        env.append(
            {
                "name": "OLLAYA_API_KEY",
                "valueFrom": {
                    "secretKeyRef": {
                        "name": p.api_key_secret_ref.name,
                        "key": p.api_key_secret_ref.key,
                        # A missing key must stop the Pod, not start an unauthenticated one.
                        "optional": False,
                    }
                },
            }
        )
    return env


def _probe(**tuning: int) -> dict[str, Any]:
    return {"httpGet": {"path": "/", "port": L.HTTP_PORT_NAME}, **tuning}


def _container(p: ServingParams) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": p.image,
        "command": ["ollaya"],
        "args": ["serve"],
        "ports": [{"name": L.HTTP_PORT_NAME, "containerPort": L.HTTP_PORT, "protocol": "TCP"}],
        "env": _env(p),
    }
    resources = serving_resources(p.resources, p.device)
    if resources:
        container["resources"] = resources
    container.update(
        {
            # Read-only: serving Pods must not pull or delete models (seed 000 §7).
            "volumeMounts": [store_mount(read_only=True), *scratch_mounts()],
            "startupProbe": _probe(
                periodSeconds=STARTUP_PERIOD_SECONDS,
                failureThreshold=STARTUP_FAILURE_THRESHOLD,
            ),
            "livenessProbe": _probe(periodSeconds=LIVENESS_PERIOD_SECONDS),
            # No readinessProbe: readiness is the decisionmodel.io/model-ready gate.
            "securityContext": container_security_context(),
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }
    )
    return container


def render_serving_deployment(p: ServingParams) -> dict[str, Any]:
    """The Deployment serving revision ``p.revision``. Its Pods join the Service only once
    the readiness gate is True, which dmrollout sets after warmup and inspection."""
    dm, rev = p.dm_name, p.revision
    pod_labels = {**L.common_labels(dm, rev), L.LABEL_COMPONENT: L.COMPONENT_SERVING}
    template_meta: dict[str, Any] = {"labels": pod_labels}
    if p.apikey_checksum:
        # A changed key value changes the template, so the Deployment rolls (seed 001,
        # "Rotating the API key").
        template_meta["annotations"] = {L.ANNOTATION_APIKEY_CHECKSUM: p.apikey_checksum}
    pod_spec: dict[str, Any] = {
        "containers": [_container(p)],
        "volumes": [
            store_volume(p.store_claim_name, read_only=True),
            *scratch_volumes(p.scratch_size_limit),
        ],
        "readinessGates": [{"conditionType": L.READINESS_GATE}],
        "securityContext": pod_security_context(),
        "automountServiceAccountToken": False,
        # The runtime reads OLLAYA_* variables; Service links would add <SVC>_PORT etc. for
        # every Service in the namespace, OLLAYA_PORT among them when a DM is named ollaya.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        **scheduling_fields(p.scheduling, p.device),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": L.deployment_name(dm, rev),
            "namespace": p.namespace,
            "labels": {**L.common_labels(dm, rev), L.LABEL_COMPONENT: L.COMPONENT_SERVING},
            "ownerReferences": [L.owner_reference(p.owner)],
        },
        "spec": {
            "replicas": p.replicas,
            "selector": {"matchLabels": L.selector_labels(dm, rev)},
            "strategy": deployment_strategy(p.access_modes, p.device),
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }

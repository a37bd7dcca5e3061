"""The serving Deployment: strategy table, read-only store, readiness gate, GPU additions."""

from __future__ import annotations

from typing import Any

import pytest

from decisionmodel.engine.params import AccessMode, Scheduling, ServingParams
from decisionmodel.engine.render import render_serving_deployment
from decisionmodel.engine.render.deployment import deployment_strategy
from decisionmodel.vocabulary import Device


def _pod(d: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = d["spec"]["template"]["spec"]
    return pod


def _container(d: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = _pod(d)["containers"][0]
    return c


def _env(d: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _container(d)["env"]}


RECREATE = {"type": "Recreate"}
NO_SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
DEFAULT_ROLL = {
    "type": "RollingUpdate",
    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
}


@pytest.mark.parametrize(
    ("modes", "device", "expected"),
    [
        (("ReadWriteOnce",), "cpu", RECREATE),
        (("ReadWriteOnce",), "cuda", RECREATE),
        (("ReadWriteOncePod",), "cpu", RECREATE),
        (("ReadWriteMany",), "cuda", NO_SURGE),
        (("ReadWriteMany",), "cpu", DEFAULT_ROLL),
        (("ReadWriteOnce", "ReadWriteMany"), "cpu", DEFAULT_ROLL),
    ],
)
def test_strategy_table(
    cpu_serving: ServingParams,
    modes: tuple[AccessMode, ...],
    device: Device,
    expected: dict[str, Any],
) -> None:
    assert deployment_strategy(modes, device) == expected
    p = cpu_serving.model_copy(update={"access_modes": modes, "device": device})
    assert render_serving_deployment(p)["spec"]["strategy"] == expected


def test_store_mounted_read_only(cpu_serving: ServingParams) -> None:
    d = render_serving_deployment(cpu_serving)
    models = next(v for v in _pod(d)["volumes"] if v["name"] == "models")
    assert models["persistentVolumeClaim"] == {
        "claimName": "support-router-store-7c9f0e1d2b3a4c5d",
        "readOnly": True,
    }
    mount = next(m for m in _container(d)["volumeMounts"] if m["name"] == "models")
    assert mount == {"name": "models", "mountPath": "/models", "readOnly": True}


def test_readiness_is_the_gate_not_a_probe(cpu_serving: ServingParams) -> None:
    d = render_serving_deployment(cpu_serving)
    assert "readinessProbe" not in _container(d)
    assert _pod(d)["readinessGates"] == [{"conditionType": "decisionmodel.io/model-ready"}]
    assert _container(d)["startupProbe"] == {
        "httpGet": {"path": "/", "port": "http"},
        "periodSeconds": 2,
        "failureThreshold": 30,
    }
    assert _container(d)["livenessProbe"]["httpGet"] == {"path": "/", "port": "http"}


def test_metadata_owner_and_selector(cpu_serving: ServingParams) -> None:
    d = render_serving_deployment(cpu_serving)
    meta = d["metadata"]
    assert (meta["name"], meta["namespace"]) == ("support-router-7c9f0e1d2b3a4c5d", "tenant-a")
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "name": "support-router",
            "uid": "6f1c3d2e-8a4b-4c5d-9e6f-0a1b2c3d4e5f",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "finalizers" not in meta
    selector = {
        "decisionmodel.io/name": "support-router",
        "decisionmodel.io/revision": "7c9f0e1d2b3a4c5d",
    }
    assert d["spec"]["selector"] == {"matchLabels": selector}
    labels = d["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert labels["app.kubernetes.io/name"] == "ollaya"
    assert labels["app.kubernetes.io/managed-by"] == "dmrollout"


def test_security(cpu_serving: ServingParams) -> None:
    d = render_serving_deployment(cpu_serving)
    assert _pod(d)["automountServiceAccountToken"] is False
    sc = _pod(d)["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (1000, 1000, 1000)
    assert sc["runAsNonRoot"] is True
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert _container(d)["securityContext"] == {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    # With a read-only root, $HOME and /tmp must be writable mounts.
    mounts = {m["mountPath"] for m in _container(d)["volumeMounts"]}
    assert {"/tmp", _env(d)["HOME"]} <= mounts


def test_cpu_env_and_no_gpu(cpu_serving: ServingParams) -> None:
    d = render_serving_deployment(cpu_serving)
    assert _env(d) == {
        "OLLAYA_HOST": "0.0.0.0:11435",
        "OLLAYA_MODELS": "/models",
        "OLLAYA_DEVICE": "cpu",
        "OLLAYA_KEEP_ALIVE": "-1",
        "HOME": "/tmp/home",
    }
    assert _container(d)["command"] == ["ollaya"]
    assert _container(d)["args"] == ["serve"]
    assert _container(d)["ports"] == [{"name": "http", "containerPort": 11435, "protocol": "TCP"}]
    assert "resources" not in _container(d)
    assert "tolerations" not in _pod(d)
    assert "annotations" not in d["spec"]["template"]["metadata"]


def test_api_key_registry_and_checksum(cuda_serving: ServingParams) -> None:
    d = render_serving_deployment(cuda_serving)
    env = _env(d)
    assert env["OLLAYA_API_KEY"] == {
        "secretKeyRef": {"name": "support-router-key", "key": "token", "optional": False}
    }
    assert env["OLLAYA_REGISTRY"] == "https://registry.example.com"
    # Weights endpoint and token are for the prefetch Job only.
    assert "OLLAYA_HF_ENDPOINT" not in env
    assert "OLLAYA_HF_TOKEN" not in env
    assert d["spec"]["template"]["metadata"]["annotations"] == {
        "decisionmodel.io/apikey-checksum": "sha256:5e884898da28047151d0e56f8dc62927"
    }


def test_cuda_adds_gpu_limit_and_toleration(cuda_serving: ServingParams) -> None:
    d = render_serving_deployment(cuda_serving)
    assert _container(d)["resources"] == {
        "requests": {"cpu": "1", "memory": "3500Mi"},
        "limits": {"memory": "4Gi", "nvidia.com/gpu": "1"},
    }
    assert _pod(d)["tolerations"] == [
        {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "ml"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert _env(d)["OLLAYA_DEVICE"] == "cuda"
    assert _pod(d)["runtimeClassName"] == "nvidia"


def test_gpu_limit_kept_when_set(cuda_serving: ServingParams) -> None:
    p = cuda_serving.model_copy(update={"resources": {"limits": {"nvidia.com/gpu": 2}}})
    assert _container(render_serving_deployment(p))["resources"] == {
        "limits": {"nvidia.com/gpu": "2"}
    }


def test_unquoted_quantities_render_as_text(cpu_serving: ServingParams) -> None:
    """`cpu: 1` unquoted is kept by the CRD as a number, which the Kubernetes client refuses
    to send (issue 34: such a DecisionModel never started)."""
    resources = {"requests": {"cpu": 1, "memory": "64Mi"}, "limits": {"cpu": 2.5}}
    p = cpu_serving.model_copy(update={"resources": resources})
    assert _container(render_serving_deployment(p))["resources"] == {
        "requests": {"cpu": "1", "memory": "64Mi"},
        "limits": {"cpu": "2.5"},
    }


def test_gpu_request_without_limit_becomes_the_limit(cuda_serving: ServingParams) -> None:
    # Extended resources need limit == request; "1" here would be rejected by the API server.
    p = cuda_serving.model_copy(update={"resources": {"requests": {"nvidia.com/gpu": "2"}}})
    assert _container(render_serving_deployment(p))["resources"] == {
        "requests": {"nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }


@pytest.mark.parametrize(
    "existing",
    [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ],
)
def test_gpu_toleration_not_added_when_already_tolerated(
    cuda_serving: ServingParams, existing: dict[str, Any]
) -> None:
    p = cuda_serving.model_copy(update={"scheduling": Scheduling(tolerations=(existing,))})
    assert _pod(render_serving_deployment(p))["tolerations"] == [
        {k: existing[k] for k in sorted(existing)}
    ]


def test_gpu_toleration_added_when_existing_one_is_for_another_effect(
    cuda_serving: ServingParams,
) -> None:
    other = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}
    p = cuda_serving.model_copy(update={"scheduling": Scheduling(tolerations=(other,))})
    assert len(_pod(render_serving_deployment(p))["tolerations"]) == 2


def test_cpu_never_gets_gpu_additions(cuda_serving: ServingParams) -> None:
    p = cuda_serving.model_copy(update={"device": "cpu", "scheduling": Scheduling()})
    d = render_serving_deployment(p)
    assert "nvidia.com/gpu" not in _container(d)["resources"]["limits"]
    assert "tolerations" not in _pod(d)


def test_output_does_not_alias_params(cuda_serving: ServingParams) -> None:
    d = render_serving_deployment(cuda_serving)
    _container(d)["resources"]["requests"]["cpu"] = "99"
    _pod(d)["nodeSelector"]["x"] = "y"
    assert cuda_serving.resources["requests"]["cpu"] == "1"
    assert "x" not in cuda_serving.scheduling.node_selector


def test_replicas(cpu_serving: ServingParams) -> None:
    p = cpu_serving.model_copy(update={"replicas": 4})
    assert render_serving_deployment(p)["spec"]["replicas"] == 4

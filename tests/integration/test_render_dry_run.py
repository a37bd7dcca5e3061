"""Every rendered object is accepted by the real kube-apiserver (server-side dry run with
strict field validation), and the server keeps the fields that carry behaviour."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from decisionmodel.engine.params import (
    AccessMode,
    Device,
    OwnerRef,
    PrefetchParams,
    ProxyEnv,
    Scheduling,
    SecretKeyRef,
    ServiceParams,
    ServingParams,
    StoreParams,
    default_image,
)
from decisionmodel.engine.render import (
    render_pdb,
    render_prefetch_job,
    render_service,
    render_serving_deployment,
    render_store_pvc,
)
from decisionmodel.engine.render.labels import store_pvc_name
from localenv.cluster import LocalCluster

NS = "default"
REV = "0123456789abcdef"
DIGEST = "c3" * 32


def _objects(dm: str, device: Device, modes: tuple[AccessMode, ...]) -> list[dict[str, Any]]:
    owner = OwnerRef(name=dm, uid="6f1c3d2e-8a4b-4c5d-9e6f-0a1b2c3d4e5f")
    common: dict[str, Any] = {"owner": owner, "namespace": NS, "revision": REV}
    model: dict[str, Any] = {
        **common,
        "model": "registry.example.com/acme/triage:v3",
        "digest": DIGEST,
        "device": device,
        "store_claim_name": store_pvc_name(dm, REV),
        "registry_url": "https://registry.example.com",
        "scheduling": Scheduling.model_validate(
            {
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/arch",
                                            "operator": "In",
                                            "values": ["amd64"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            }
        ),
    }
    serving = ServingParams(
        **model,
        image=default_image(device=device),
        replicas=3,
        access_modes=modes,
        resources={"requests": {"cpu": "1", "memory": "3500Mi"}, "limits": {"memory": "4Gi"}},
        api_key_secret_ref=SecretKeyRef(name=f"{dm}-key", key="token"),
        apikey_checksum="0" * 64,
    )
    prefetch = PrefetchParams(
        **model,
        image=default_image(),
        digest_pinned=True,
        store_manifest_path="manifests/registry.example.com/acme/triage/v3",
        caching_timeout_seconds=900,
        hf_endpoint="https://hf-mirror.internal",
        proxy=ProxyEnv(
            http_proxy="http://proxy.corp:3128",
            https_proxy="http://u:p@proxy.corp:3128",
            no_proxy=".svc",
        ),
        download_token_secret_ref=SecretKeyRef(name="hf", key="token"),
    )
    store = StoreParams(**common, access_modes=modes, store_size="4Gi", storage_class_name="x")
    return [
        render_store_pvc(store),
        render_prefetch_job(prefetch),
        render_serving_deployment(serving),
        render_pdb(serving),
        render_service(ServiceParams(owner=owner, namespace=NS, stable_revision=REV)),
    ]


def _dry_run(cluster: LocalCluster, objects: list[dict[str, Any]], check: bool = True) -> Any:
    result = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-o",
        "json",
        "-f",
        "-",
        input=yaml.safe_dump_all(objects, sort_keys=False),
        check=check,
    )
    return result if not check else json.loads(result.stdout)


@pytest.mark.parametrize(
    ("dm", "device", "modes"),
    [
        ("support-router", "cpu", ("ReadWriteOnce",)),
        ("support-router", "cuda", ("ReadWriteMany",)),
        # The longest admitted DM name: every derived name must still be valid.
        ("a" * 43, "cuda", ("ReadWriteOnce",)),
    ],
)
def test_rendered_objects_pass_server_dry_run(
    local_cluster: LocalCluster, dm: str, device: Device, modes: tuple[AccessMode, ...]
) -> None:
    objects = _objects(dm, device, modes)
    out = _dry_run(local_cluster, objects)
    items = out["items"] if out.get("kind") == "List" else [out]
    by_kind = {i["kind"]: i for i in items}
    assert set(by_kind) == {
        "PersistentVolumeClaim",
        "Job",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
    }
    # Fields that carry behaviour survive admission and defaulting unchanged.
    job = by_kind["Job"]["spec"]
    assert job["podFailurePolicy"] == objects[1]["spec"]["podFailurePolicy"]
    assert job["backoffLimit"] == 4
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    assert pod["readinessGates"] == [{"conditionType": "decisionmodel.io/model-ready"}]
    assert "readinessProbe" not in pod["containers"][0]
    assert by_kind["Deployment"]["metadata"]["ownerReferences"][0]["controller"] is True
    assert by_kind["Service"]["spec"]["selector"]["decisionmodel.io/revision"] == REV


def test_dry_run_rejects_what_the_renderers_must_not_produce(local_cluster: LocalCluster) -> None:
    # The check above can fail: a Job name one character over the limit is refused, and so is
    # a misspelt field under strict validation.
    objects = _objects("a" * 43, "cpu", ("ReadWriteOnce",))
    job = objects[1]
    too_long = {**job, "metadata": {**job["metadata"], "name": job["metadata"]["name"] + "x"}}
    refused = _dry_run(local_cluster, [too_long], check=False)
    assert refused.returncode != 0
    assert "must be no more than 63" in refused.stderr
    deployment = objects[2]
    misspelt = json.loads(json.dumps(deployment))
    misspelt["spec"]["template"]["spec"]["readinesGates"] = misspelt["spec"]["template"][
        "spec"
    ].pop("readinessGates")
    refused = _dry_run(local_cluster, [misspelt], check=False)
    assert refused.returncode != 0
    assert 'unknown field "spec.template.spec.readinesGates"' in refused.stderr

"""Every field of the reference operator's API (seed 000's example, seed 001's pages) through the
CRD on a real kube-apiserver, the way Helm, GitOps controllers and client libraries send it: a
create without strict field validation, where an unknown field is pruned with at most a warning.
Each field must come back as sent (honoured) or the create must be refused with a message naming
it; none may silently disappear. Then the mapping: what a kept field means for the rollout.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from harness.helpers import scratch_namespace
from kubernetes import client, config

from decisionmodel.api import DecisionModel
from decisionmodel.api.crd import render_crd_yaml
from decisionmodel.rollout.dispatch import DispatchSettings, rollout_input
from localenv.cluster import LocalCluster

DIGEST = "c305bd41e2f5f0b4d1b2dcb5f9a1e3c7a4d6e8f0b2c4d6e8f0a2c4e6a8b0c2d4"
EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "support-router-golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.90",
    "maxAccuracyDrop": "0.02",
    "maxECE": "0.10",
    "maxECEIncrease": "0.02",
    "maxCases": 500,
}
# Each reference field, as a spec fragment (seed 000 §5, seed 001 install, secrets, scaling,
# runtime versions, evaluation and manual promotion pages).
HONOURED: dict[str, dict[str, Any]] = {
    "engine": {"engine": "ollaya"},
    "digest": {"digest": DIGEST},
    "replicas": {"replicas": 2},
    "device": {"device": "cuda"},
    "resources": {
        "resources": {"requests": {"cpu": "1", "memory": "3500Mi"}, "limits": {"memory": "4Gi"}}
    },
    "scheduling": {
        "scheduling": {
            "nodeSelector": {"gpu": "t4"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "pool", "operator": "In", "values": ["models"]}
                                ]
                            }
                        ]
                    }
                }
            },
            "runtimeClassName": "nvidia",
        }
    },
    "cache": {
        "cache": {
            "size": "4Gi",
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "my-rwx-class",
            "downloadTokenSecretRef": {"name": "my-hf-token", "key": "token"},
        }
    },
    "auth": {"auth": {"apiKeySecretRef": {"name": "support-router-key", "key": "token"}}},
    "runtimeVersion": {"runtimeVersion": "0.10.0"},
    "image": {"image": "registry.example/ollaya:0.10.0"},
    "rollout.evaluation": {"rollout": {"evaluation": EVALUATION}},
    "rollout.evaluation.secretRef": {
        "rollout": {
            "evaluation": {
                **EVALUATION,
                "datasetRef": {"secretRef": {"name": "golden", "key": "cases.jsonl"}},
            }
        }
    },
    "rollout.manualPromotion": {"rollout": {"manualPromotion": True}},
    "rollout.promotion": {"rollout": {"promotion": "Manual"}},
    "rollout.timeouts": {
        "rollout": {"timeouts": {"caching": "1h", "starting": "15m", "evaluating": "20m"}}
    },
}
# Refused by the reference too, and here at admission with a message naming the field.
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "auth.apiKeySecretRef.optional": (
        {"auth": {"apiKeySecretRef": {"name": "k", "key": "token", "optional": True}}},
        "optional",
    ),
    "cache.accessModes ReadOnlyMany": (
        {"cache": {"accessModes": ["ReadOnlyMany"]}},
        "ReadOnlyMany",
    ),
    "model without a tag": ({"model": "laya"}, "explicit tag"),
    "manualPromotion against promotion": (
        {"rollout": {"manualPromotion": True, "promotion": "Automatic"}},
        "manualPromotion",
    ),
    "image with runtimeVersion": ({"image": "x/y:1", "runtimeVersion": "0.10.0"}, "image"),
}


@pytest.fixture(scope="module")
def api(local_cluster: LocalCluster) -> Iterator[client.CustomObjectsApi]:
    local_cluster.kubectl("apply", "--server-side", "-f", "-", input=render_crd_yaml())
    local_cluster.kubectl(
        "wait",
        "--for",
        "condition=established",
        "--timeout=60s",
        "crd/decisionmodels.decisionmodel.io",
    )
    api_client = config.new_client_from_config(config_file=str(local_cluster.kubeconfig))
    yield client.CustomObjectsApi(api_client)
    api_client.close()


@pytest.fixture(scope="module")
def namespace(local_cluster: LocalCluster) -> Iterator[str]:
    yield from scratch_namespace(local_cluster, "ref")


def _create(api: client.CustomObjectsApi, ns: str, name: str, spec: dict[str, Any]) -> Any:
    body = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"model": "laya:en", **spec},
    }
    # No field_validation: the API server's default, which prunes unknown fields.
    return api.create_namespaced_custom_object(
        "decisionmodel.io", "v1alpha1", ns, "decisionmodels", body
    )


def _kept(stored: Any, sent: Any) -> bool:
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and _kept(stored[k], v) for k, v in sent.items()
        )
    return bool(stored == sent)


@pytest.mark.parametrize("field", sorted(HONOURED), ids=str)
def test_every_reference_field_is_kept(
    api: client.CustomObjectsApi, namespace: str, field: str
) -> None:
    name = "f-" + field.lower().replace(".", "-")[:40]
    stored = _create(api, namespace, name, HONOURED[field])
    assert _kept(stored["spec"], HONOURED[field]), (
        f"{field} was pruned: {yaml.safe_dump(stored['spec'])}"
    )


@pytest.mark.parametrize("case", sorted(REFUSED), ids=str)
def test_what_the_reference_refuses_is_refused_naming_the_field(
    api: client.CustomObjectsApi, namespace: str, case: str
) -> None:
    spec, named = REFUSED[case]
    with pytest.raises(client.ApiException) as refused:
        _create(api, namespace, "r-" + str(abs(hash(case)) % 10**8), spec)
    assert refused.value.status == 422 and named in str(refused.value.body)


def test_manual_promotion_true_means_manual(api: client.CustomObjectsApi, namespace: str) -> None:
    """The reference's `manualPromotion: true`, applied without strict validation, is kept and
    parks the candidate for an approval: it is not pruned into an automatic promotion."""
    stored = _create(api, namespace, "manual-ref", {"rollout": {"manualPromotion": True}})
    dm = DecisionModel.model_validate(stored)
    assert rollout_input(dm, DispatchSettings()).promotion == "Manual"
    with_eval = _create(
        api,
        namespace,
        "manual-ref-eval",
        {"rollout": {"manualPromotion": True, "evaluation": EVALUATION}},
    )
    assert (
        rollout_input(DecisionModel.model_validate(with_eval), DispatchSettings()).promotion
        == "Manual"
    )
    off = _create(api, namespace, "manual-ref-off", {"rollout": {"manualPromotion": False}})
    assert (
        rollout_input(DecisionModel.model_validate(off), DispatchSettings()).promotion
        == "Automatic"
    )

"""Service, PDB and store PVC."""

from __future__ import annotations

from decisionmodel.engine.params import ServiceParams, ServingParams, StoreParams
from decisionmodel.engine.render import render_pdb, render_service, render_store_pvc


def test_service_selects_the_stable_revision(service: ServiceParams) -> None:
    s = render_service(service)
    assert s["metadata"]["name"] == "support-router"
    assert s["metadata"]["labels"] == {
        "decisionmodel.io/name": "support-router",
        "app.kubernetes.io/name": "ollaya",
        "app.kubernetes.io/managed-by": "dmrollout",
    }
    assert s["spec"] == {
        "type": "ClusterIP",
        "selector": {
            "decisionmodel.io/name": "support-router",
            "decisionmodel.io/revision": "0a1b2c3d4e5f6a7b",
        },
        "ports": [{"name": "http", "protocol": "TCP", "port": 11435, "targetPort": "http"}],
    }
    assert s["metadata"]["ownerReferences"][0]["controller"] is True


def test_pdb(cuda_serving: ServingParams) -> None:
    pdb = render_pdb(cuda_serving)
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"]["name"] == "support-router-7c9f0e1d2b3a4c5d"
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == {
        "matchLabels": {
            "decisionmodel.io/name": "support-router",
            "decisionmodel.io/revision": "7c9f0e1d2b3a4c5d",
        }
    }
    assert pdb["metadata"]["labels"]["decisionmodel.io/revision"] == "7c9f0e1d2b3a4c5d"


def test_store_pvc_defaults(store: StoreParams) -> None:
    pvc = render_store_pvc(store)
    assert pvc["metadata"]["name"] == "support-router-store-7c9f0e1d2b3a4c5d"
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
    }
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == "6f1c3d2e-8a4b-4c5d-9e6f-0a1b2c3d4e5f"


def test_store_pvc_class_and_modes(store: StoreParams) -> None:
    p = store.model_copy(
        update={
            "access_modes": ("ReadWriteMany",),
            "storage_class_name": "efs",
            "store_size": "4Gi",
        }
    )
    assert render_store_pvc(p)["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "4Gi"}},
        "storageClassName": "efs",
    }

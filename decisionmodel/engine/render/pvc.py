"""The per-revision model store PVC ``<dm>-store-<rev>`` (seed 000 §7).

One store per revision, so a candidate never needs to attach the stable's volume (the
Multi-Attach deadlock on RWO volumes). The prefetch Job mounts it read-write, the revision's
serving Pods read-only.
"""

from __future__ import annotations

from typing import Any

from decisionmodel.engine.params import StoreParams
from decisionmodel.engine.render import labels as L


def render_store_pvc(p: StoreParams) -> dict[str, Any]:
    dm, rev = p.dm_name, p.revision
    spec: dict[str, Any] = {
        "accessModes": list(p.access_modes),
        "resources": {"requests": {"storage": p.store_size}},
    }
    if p.storage_class_name:
        spec["storageClassName"] = p.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": L.store_pvc_name(dm, rev),
            "namespace": p.namespace,
            "labels": {**L.common_labels(dm, rev), L.LABEL_COMPONENT: L.COMPONENT_STORE},
            "ownerReferences": [L.owner_reference(p.owner)],
        },
        "spec": spec,
    }

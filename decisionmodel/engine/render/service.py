"""The DM's Service ``<dm>``: ClusterIP only (seed 000 §9), selecting the stable revision.

Promotion moves traffic by changing the revision in the selector; the Service itself carries
no revision label because it outlives every revision.
"""

from __future__ import annotations

from typing import Any

from decisionmodel.engine.params import ServiceParams
from decisionmodel.engine.render import labels as L


def render_service(p: ServiceParams) -> dict[str, Any]:
    dm = p.dm_name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": L.service_name(dm),
            "namespace": p.namespace,
            "labels": L.common_labels(dm, None),
            "ownerReferences": [L.owner_reference(p.owner)],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": L.selector_labels(dm, p.stable_revision),
            "ports": [
                {
                    "name": L.HTTP_PORT_NAME,
                    "protocol": "TCP",
                    "port": L.HTTP_PORT,
                    "targetPort": L.HTTP_PORT_NAME,
                }
            ],
        },
    }

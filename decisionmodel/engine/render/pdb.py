"""The PodDisruptionBudget ``<dm>-<rev>`` of a serving revision.

The caller creates it only when replicas > 1 (REFERENCE "Objects"): with one replica
maxUnavailable 1 protects nothing, and anything stricter would block node drains.
"""

from __future__ import annotations

from typing import Any

from decisionmodel.engine.params import RevisionParams
from decisionmodel.engine.render import labels as L


def render_pdb(p: RevisionParams) -> dict[str, Any]:
    dm, rev = p.dm_name, p.revision
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": L.pdb_name(dm, rev),
            "namespace": p.namespace,
            "labels": {**L.common_labels(dm, rev), L.LABEL_COMPONENT: L.COMPONENT_SERVING},
            "ownerReferences": [L.owner_reference(p.owner)],
        },
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": L.selector_labels(dm, rev)},
            # A Pod whose model-ready gate is False serves nothing, so evicting it costs no
            # capacity; the default (IfHealthyBudget) would let such Pods block node drains.
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }

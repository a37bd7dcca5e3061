"""Names, labels, annotations and owner references shared by every rendered object.

Names are derived from the DecisionModel name and a revision hash, never stored, so any
component (workflow activity, controller, tests) recomputes the same name from the same inputs.
Length budget (REFERENCE "API"): DM names are DNS-1035 labels of at most 43 characters and
revision hashes are 16 hex, so the Job name ``<dm>-pf-<rev>`` is at most 63 characters, the
limit the Job controller needs to copy it into the ``batch.kubernetes.io/job-name`` label.
PVC and Deployment names are DNS-1123 subdomains (up to 253), so ``<dm>-store-<rev>`` (66 at
most) is accepted; the Service name is the DM name itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decisionmodel.engine.params import OwnerRef

LABEL_NAME = "decisionmodel.io/name"
LABEL_REVISION = "decisionmodel.io/revision"
# Prefetch Pods carry the revision under a different key on purpose: with
# decisionmodel.io/revision they would match the Service and PDB selectors of that revision,
# and a running prefetch Pod (no readiness probe, so Ready) would receive traffic during a
# store recovery of the stable revision.
LABEL_PREFETCH_REVISION = "decisionmodel.io/prefetch-revision"
LABEL_APP_NAME = "app.kubernetes.io/name"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_COMPONENT = "app.kubernetes.io/component"

APP_NAME = "ollaya"
MANAGED_BY = "dmrollout"
COMPONENT_SERVING = "serving"
COMPONENT_PREFETCH = "prefetch"
COMPONENT_STORE = "store"

ANNOTATION_RETRY = "decisionmodel.io/retry"
# On a store PVC being recreated and filled again (seed 001 StoreLost): its Pods are never
# probed (so never served) until the recovery prefetch has verified the digest.
ANNOTATION_STORE_RECOVERING = "decisionmodel.io/store-recovering"
ANNOTATION_PROMOTE = "decisionmodel.io/promote"
# Seed 002: a deliberate rollback to the last or the previous successful revision, by hash.
ANNOTATION_ROLLBACK_TO = "decisionmodel.io/rollback-to"
ANNOTATION_APIKEY_CHECKSUM = "decisionmodel.io/apikey-checksum"
# On the prefetch Pod template: lets a simulated kubelet (and a human with kubectl) read the
# digest the Job verifies without parsing its shell script.
ANNOTATION_EXPECTED_DIGEST = "decisionmodel.io/expected-digest"

READINESS_GATE = "decisionmodel.io/model-ready"
HTTP_PORT = 11435
HTTP_PORT_NAME = "http"


def deployment_name(dm: str, rev: str) -> str:
    """Serving Deployment of one revision: ``<dm>-<rev>``."""
    return f"{dm}-{rev}"


def pdb_name(dm: str, rev: str) -> str:
    """PodDisruptionBudget of one revision: ``<dm>-<rev>`` (same as its Deployment)."""
    return f"{dm}-{rev}"


def store_pvc_name(dm: str, rev: str) -> str:
    """Per-revision model store: ``<dm>-store-<rev>`` (seed 000 §7)."""
    return f"{dm}-store-{rev}"


def legacy_store_pvc_name(dm: str) -> str:
    """The one store of a DecisionModel before stores were per revision (seed 000 "Migration"):
    ``<dm>-store``. A stable promoted then keeps mounting it until its next promotion."""
    return f"{dm}-store"


def mounts_claim(deployment: dict[str, Any], claim: str) -> bool:
    """Whether the Deployment's Pods mount the PVC ``claim``."""
    volumes = deployment.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []
    return any((v.get("persistentVolumeClaim") or {}).get("claimName") == claim for v in volumes)


def prefetch_job_name(dm: str, rev: str) -> str:
    """Prefetch Job of one revision: ``<dm>-pf-<rev>``."""
    return f"{dm}-pf-{rev}"


def revision_objects(dm: str, rev: str) -> list[tuple[str, str]]:
    """(kind, name) of a revision's objects, in deletion order: the serving Pods first, the
    store they mount last."""
    return [
        ("Deployment", deployment_name(dm, rev)),
        ("PodDisruptionBudget", pdb_name(dm, rev)),
        ("Job", prefetch_job_name(dm, rev)),
        ("PersistentVolumeClaim", store_pvc_name(dm, rev)),
    ]


def service_name(dm: str) -> str:
    """The one Service of a DecisionModel, named after it."""
    return dm


def selector_labels(dm: str, rev: str) -> dict[str, str]:
    """Labels that select one revision's serving Pods (Deployment, PDB, Service)."""
    return {LABEL_NAME: dm, LABEL_REVISION: rev}


def common_labels(dm: str, rev: str | None) -> dict[str, str]:
    """Labels on every object: the DM name, the revision when the object belongs to one, and
    the app.kubernetes.io pair so ``kubectl get -l app.kubernetes.io/managed-by=dmrollout``
    lists everything dmrollout created."""
    labels = {LABEL_NAME: dm}
    if rev is not None:
        labels[LABEL_REVISION] = rev
    labels[LABEL_APP_NAME] = APP_NAME
    labels[LABEL_MANAGED_BY] = MANAGED_BY
    return labels


def owner_reference(owner: OwnerRef) -> dict[str, object]:
    """A controller owner reference to the DecisionModel: garbage collection deletes the
    object with its DM (no finalizers needed), and ``blockOwnerDeletion`` keeps a foreground
    delete of the DM waiting until its children are gone."""
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }

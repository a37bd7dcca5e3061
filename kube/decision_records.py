"""Where signed decision records are kept: immutable ConfigMaps in the records namespace.

The records namespace is the platform team's (the chart's release namespace by default), not
the DecisionModel's: the teams whose models are judged can neither edit nor remove their
records, and the records outlive the DecisionModel (no owner reference: deleting a
DecisionModel keeps its history of decisions, as the audit needs). Each ConfigMap is
``immutable``; a record that must change is a new record. Labels find one DecisionModel's
chain; the chain itself (sequence, previous) is inside the signed payload, never trusted from
labels.
"""

from __future__ import annotations

from typing import Any, Final

from decisionmodel.errors import DecisionRecordUnwritten
from decisionmodel.records.chain import StoredRecord
from decisionmodel.rollout.contracts import DMRef
from kube.client import Kube
from kube.errors import Forbidden, KubeError, NotFound

LABEL_RECORD: Final = "decisionmodel.io/decision-record"
LABEL_UID: Final = "decisionmodel.io/dm-uid"
LABEL_NAMESPACE: Final = "decisionmodel.io/dm-namespace"
LABEL_NAME: Final = "decisionmodel.io/dm-name"
LABEL_REVISION: Final = "decisionmodel.io/revision"
LABEL_SEQUENCE: Final = "decisionmodel.io/sequence"
ENVELOPE_KEY: Final = "envelope.json"
SIGNING_KEY: Final = "key.pem"


def record_name(dm_name: str, uid: str, sequence: int) -> str:
    return f"decision-{dm_name[:200]}-{uid[:8]}-{sequence:06d}"


def read_signing_key(kube: Kube, namespace: str, secret: str) -> bytes:
    """The PEM of the signing key; DecisionRecordUnwritten naming the fix otherwise. The value
    never leaves the caller (the record carries the key's id, never the key)."""
    where = f"Secret {namespace}/{secret}"
    try:
        value, _ = kube.read_secret_value(namespace, secret, SIGNING_KEY)
    except NotFound:
        raise DecisionRecordUnwritten(
            f"the signing key {where} does not exist: create it with kubectl -n {namespace} "
            f"create secret generic {secret} --from-file={SIGNING_KEY}=<EC P-256 key PEM> "
            "(docs/audit.md)"
        ) from None
    except KeyError:
        raise DecisionRecordUnwritten(
            f"the signing key {where} has no key {SIGNING_KEY!r}: put the PEM under that key"
        ) from None
    except Forbidden:
        raise DecisionRecordUnwritten(
            f"the worker may not read {where}: the chart's decisionRecords Role grants it "
            "(helm upgrade with decisionRecords.enabled)"
        ) from None
    return value


def list_records(
    kube: Kube, namespace: str, selector: dict[str, str]
) -> list[tuple[dict[str, str], StoredRecord]]:
    """The records matching ``selector`` (labels) with their labels."""
    labels = {LABEL_RECORD: "true", **selector}
    text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    body = kube.raw(kube.core.list_namespaced_config_map, namespace, label_selector=text)
    found = []
    for item in body["items"]:
        data = item.get("data") or {}
        if ENVELOPE_KEY in data:
            meta = item["metadata"]
            stored = StoredRecord(meta["name"], str(data[ENVELOPE_KEY]).encode())
            found.append((dict(meta.get("labels") or {}), stored))
    return found


def create_record(
    kube: Kube, namespace: str, name: str, labels: dict[str, str], envelope: bytes
) -> None:
    """Create the record's ConfigMap; Conflict when the name is taken (a concurrent writer
    took the sequence: the caller reads the chain again)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_RECORD: "true", **labels},
        },
        "immutable": True,
        "data": {ENVELOPE_KEY: envelope.decode()},
    }
    kube.core.create_namespaced_config_map(namespace, body)


def store_problem(error: KubeError, namespace: str) -> DecisionRecordUnwritten:
    """A refusal of the records namespace, naming the fix."""
    if isinstance(error, Forbidden):
        return DecisionRecordUnwritten(
            f"the worker may not list or create ConfigMaps in the records namespace "
            f"{namespace}: the chart's decisionRecords Role grants it"
        )
    if isinstance(error, NotFound):
        return DecisionRecordUnwritten(
            f"the records namespace {namespace} does not exist: create it, or set "
            "decisionRecords.namespace"
        )
    return DecisionRecordUnwritten(f"the records namespace {namespace}: {str(error)[:200]}")


RECORDS_FIELD_MANAGER: Final = "dmrollout-records"


def show_head(kube: Kube, dm: DMRef, head: dict[str, Any]) -> None:
    """``status.decisionRecord``: the newest record, under a field manager of its own (no
    other writer's fields are touched), for ``dmrollout verify`` to see a removed newest."""
    kube.apply_dm_status(dm, {"decisionRecord": head}, field_manager=RECORDS_FIELD_MANAGER)

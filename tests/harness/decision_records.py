"""Decision records in the tests: a predicate (unit, cosign), and a records namespace with
the shipped Role and a signing key (e2e, explorer)."""

from __future__ import annotations

from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from decisionmodel.records.statement import (
    DecisionPredicate,
    RecordedBuilds,
    RecordedModel,
    RecordedRevision,
    RecordedRun,
)
from localenv.cluster import LocalCluster
from localenv.identities import SYSTEM_NAMESPACE

DIGEST = "ab" * 32


def predicate(sequence: int, previous: str | None, decision: str = "Promote") -> DecisionPredicate:
    return DecisionPredicate(
        decision_model=RecordedModel(namespace="ns", name="dm", uid="u-1"),
        sequence=sequence,
        previous=previous,
        decision=decision,  # type: ignore[arg-type]
        reason="Promoted",
        message="evaluation Passed",
        revision=RecordedRevision(hash=f"rev{sequence}", model="laya:en", digest=DIGEST),
        policy={"promotion": "Automatic"},
        policy_digest="0" * 16,
        run=RecordedRun(workflow_id="rollout/ns/dm/rev", run_id=f"run-{sequence}"),
        builds=RecordedBuilds(worker="1.0", controller="1.0"),
        recorded_at="2026-12-07T00:00:00+00:00",
    )


REPO = Path(__file__).resolve().parents[2]
KEY_SECRET = "dmrollout-decision-record-key"


def grant_records(cluster: LocalCluster, namespace: str) -> None:
    """The namespace and the shipped records Role (deploy/decision-records) in it."""
    docs = [d for d in yaml.safe_load_all((REPO / "deploy/decision-records/role.yaml").read_text())]
    for d in docs:
        d["metadata"]["namespace"] = namespace
        if d["kind"] == "RoleBinding":
            d["subjects"][0]["namespace"] = SYSTEM_NAMESPACE
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    cluster.apply([d for d in docs if d])


def key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def create_key_secret(
    cluster: LocalCluster, namespace: str, key: ec.EllipticCurvePrivateKey
) -> None:
    cluster.kubectl(
        "-n", namespace, "create", "secret", "generic", KEY_SECRET,
        f"--from-literal=key.pem={key_pem(key)}",
    )  # fmt: skip

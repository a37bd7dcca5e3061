"""The generated CRD on a real kube-apiserver: it is accepted (structural, CEL compiles within
its cost budget), it refuses every invalid DecisionModel of the shared case table naming the
field, it accepts the valid ones unpruned with pydantic's defaults, and `kubectl get dm` shows
the documented columns.

The case table (tests/unit/api/testdata/decisionmodels.yaml) is the one the unit tests hold the
pydantic models to, so the two enforcement points cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml
from harness.helpers import assert_eventually, scratch_namespace

from decisionmodel.api import (
    Condition,
    ConditionStatus,
    DecisionModel,
    DecisionModelStatus,
    Device,
    Engine,
    EvaluationResult,
    EvaluationStatus,
    Phase,
    ReplicasStatus,
    RevisionStatus,
)
from decisionmodel.api.crd import CRD_NAME, render_crd_yaml

CASES_FILE = Path(__file__).parents[1] / "unit" / "api" / "testdata" / "decisionmodels.yaml"
DIGEST = "c305bd41e2f5f0b4d1b2dcb5f9a1e3c7a4d6e8f0b2c4d6e8f0a2c4e6a8b0c2d4"


class Cluster(Protocol):
    kubeconfig: Path

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any: ...


def _cases(kind: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load(CASES_FILE.read_text())[kind]
    return cases


def _manifest(case: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": case.get("name", "triage"), "namespace": namespace},
        "spec": case["spec"],
    }


def _contains(outer: Any, inner: Any) -> bool:
    """Every key and value of `inner` is present in `outer` (nothing was pruned), but a null,
    which the API server prunes (no field of the CRD is nullable) and may then default."""
    if isinstance(inner, dict):
        return isinstance(outer, dict) and all(
            v is None or (k in outer and _contains(outer[k], v)) for k, v in inner.items()
        )
    if isinstance(inner, list):
        return (
            isinstance(outer, list)
            and len(outer) == len(inner)
            and all(_contains(o, i) for o, i in zip(outer, inner, strict=True))
        )
    return bool(outer == inner)


@pytest.fixture(scope="module")
def cluster(local_cluster: Cluster) -> Cluster:
    """The cluster with the generated CRD applied and Established."""
    local_cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=dmrollout-crd-test",
        "-f",
        "-",
        input=render_crd_yaml(),
    )
    local_cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    # Discovery follows Established by a moment; `kubectl get dm` needs it.
    assert_eventually(
        lambda: local_cluster.kubectl("get", "dm", "-A", check=False).returncode == 0,
        timeout=30,
        what="the dm short name is served",
    )
    return local_cluster


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    yield from scratch_namespace(cluster, "crdv")


def test_crd_is_accepted_and_established(cluster: Cluster) -> None:
    crd = json.loads(cluster.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert conditions.get("NamesAccepted") == "True"
    # The API server reports a non-structural schema as a condition instead of refusing it.
    assert conditions.get("NonStructuralSchema", "False") == "False"
    assert crd["status"]["acceptedNames"]["shortNames"] == ["dm"]


@pytest.mark.parametrize("case", _cases("invalid"), ids=lambda c: c["case"])
def test_invalid_decision_model_is_refused_naming_the_field(
    cluster: Cluster, case: dict[str, Any]
) -> None:
    result = cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(_manifest(case)), check=False
    )
    assert result.returncode != 0, f"accepted: {case}"
    assert case["field"] in result.stderr, result.stderr
    # A CEL rule that errors at runtime (rather than failing cleanly) is a bug in the rule.
    assert "evaluating rule" not in result.stderr, result.stderr
    if case.get("message"):
        assert case["message"] in result.stderr, result.stderr


@pytest.mark.parametrize("case", _cases("valid"), ids=lambda c: c["case"])
def test_valid_decision_model_is_accepted_unpruned_with_defaults(
    cluster: Cluster, case: dict[str, Any]
) -> None:
    manifest = _manifest(case)
    result = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=yaml.safe_dump(manifest)
    )
    stored = json.loads(result.stdout)
    assert _contains(stored["spec"], manifest["spec"]), stored["spec"]
    # Server-side defaults read back as exactly the pydantic defaults.
    assert DecisionModel.from_k8s(stored).spec == DecisionModel.from_k8s(manifest).spec
    for key, default in (("engine", "ollaya"), ("replicas", 1), ("device", "cpu")):
        given = case["spec"].get(key)
        assert stored["spec"][key] == (default if given is None else given)


def _status() -> DecisionModelStatus:
    t = datetime(2026, 10, 2, 12, 0, tzinfo=UTC)
    stable = RevisionStatus(
        hash="7c9f0a1b2c3d4e5f",
        engine=Engine.OLLAYA,
        model="laya:en",
        digest=DIGEST,
        device=Device.CPU,
        image="ghcr.io/ollaya-dev/ollaya:0.10.0",
        runtime_version="0.10.0",
        resources={"requests": {"cpu": "1", "memory": "3500Mi"}},
        precision="F32",
    )
    return DecisionModelStatus(
        phase=Phase.EVALUATING,
        phase_transition_time=t,
        observed_generation=1,
        endpoint="http://triage.default.svc:11435/v1/systemone",
        stable_revision=stable,
        candidate_revision=stable.model_copy(update={"hash": "1111222233334444"}),
        replicas=ReplicasStatus(desired=2, model_ready=2),
        evaluation=EvaluationStatus(
            revision="1111222233334444",
            accuracy="0.9400",
            cases=500,
            result=EvaluationResult.PASSED,
            completed_at=t,
        ),
        conditions=[
            Condition(
                type="Ready",
                status=ConditionStatus.TRUE,
                reason="Serving",
                last_transition_time=t,
                observed_generation=1,
            )
        ],
    )


def _table(cluster: Cluster, *args: str) -> list[list[str]]:
    out = cluster.kubectl("get", *args).stdout
    return [line.split() for line in out.strip().splitlines()]


def test_printer_columns_and_status_round_trip(cluster: Cluster, namespace: str) -> None:
    manifest = _manifest({"spec": {"model": "laya:en"}}, namespace)
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(manifest))

    header, row = _table(cluster, "dm", "-n", namespace)
    assert header == ["NAME", "MODEL", "DEVICE", "PHASE", "READY", "AGE"]
    assert row[:3] == ["triage", "laya:en", "cpu"]

    status = _status()
    cluster.kubectl(
        "patch", "dm", "triage", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status.to_wire()}),
    )  # fmt: skip

    header, row = _table(cluster, "dm", "-n", namespace, "-o", "wide")
    assert header == [
        "NAME", "MODEL", "DEVICE", "PHASE", "READY", "AGE", "DIGEST", "CANDIDATE", "ACCURACY"
    ]  # fmt: skip
    assert row[:5] == ["triage", "laya:en", "cpu", "Evaluating", "2"]
    assert row[6:] == [DIGEST, "1111222233334444", "0.9400"]

    stored = json.loads(
        cluster.kubectl("get", "dm", "triage", "-n", namespace, "-o", "json").stdout
    )
    assert DecisionModel.from_k8s(stored).status == status

    # The category lists it too.
    names = cluster.kubectl("get", "dmrollout", "-n", namespace, "-o", "name").stdout.split()
    assert names == ["decisionmodel.decisionmodel.io/triage"]


def test_status_schema_refuses_an_unknown_phase(cluster: Cluster, namespace: str) -> None:
    manifest = _manifest({"spec": {"model": "laya:en"}}, namespace)
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(manifest))
    result = cluster.kubectl(
        "patch", "dm", "triage", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Running"}}), check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "status.phase" in result.stderr

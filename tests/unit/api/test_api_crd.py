"""The generated CRD: committed copy up to date, structural, documented, consistent with the
pydantic models (defaults, pruning, enums)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_schema_tools import (
    apply_defaults,
    load_cases,
    prune,
    structural_problems,
    type_problems,
    walk,
    without_nulls,
)

from decisionmodel.api import (
    MSG_DATASET_ONE_SOURCE,
    MSG_EVALUATION_GATED,
    MSG_IMAGE_RUNTIME_VERSION,
    MSG_MANUAL_PROMOTION_CONFLICT,
    MSG_MODEL_TAG,
    MSG_NAME_DNS1035,
    MSG_NAME_LENGTH,
    MSG_READ_ONLY_MANY,
    MSG_TIMEOUT_RANGE,
    Condition,
    ConditionStatus,
    DecisionModelSpec,
    DecisionModelStatus,
    Device,
    Engine,
    EvaluationGates,
    EvaluationResult,
    EvaluationStatus,
    FailedRevisionStatus,
    Phase,
    ReplicasStatus,
    RevisionStatus,
    SchedulingSpec,
)
from decisionmodel.api.crd import (
    API_DOCS_FILE,
    CRD_FILE,
    render_api_markdown,
    render_crd,
    render_crd_yaml,
)
from decisionmodel.api.status import (
    DecisionRecordStatus,
    EvaluationDesignStatus,
    GateDesignStatus,
    LedgerEntryStatus,
    ReResolveStatus,
    RollbackToStatus,
    RolloutRunStatus,
)

REPO = Path(__file__).resolve().parents[3]
REGENERATE = (
    f"regenerate with `python -m decisionmodel.api.crd > {CRD_FILE}` and "
    f"`python -m decisionmodel.api.crd --docs > {API_DOCS_FILE}` (or pytest --update-golden)"
)


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return render_crd()


@pytest.fixture(scope="module")
def schema(crd: dict[str, Any]) -> dict[str, Any]:
    version: dict[str, Any] = crd["spec"]["versions"][0]
    return dict(version["schema"]["openAPIV3Schema"])


def _check_generated(path: Path, expected: str, update: bool) -> None:
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(expected)
    assert path.exists(), f"{path} is missing: {REGENERATE}"
    assert path.read_text() == expected, f"{path} is stale: {REGENERATE}"


def test_committed_crd_is_up_to_date(update_golden: bool) -> None:
    _check_generated(REPO / CRD_FILE, render_crd_yaml(), update_golden)


def test_committed_api_docs_are_up_to_date(update_golden: bool) -> None:
    _check_generated(REPO / API_DOCS_FILE, render_api_markdown(), update_golden)


def test_module_entry_point_prints_the_crd() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "decisionmodel.api.crd"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert out == render_crd_yaml()
    assert yaml.safe_load(out) == render_crd()


def test_yaml_has_no_anchors() -> None:
    text = render_crd_yaml()
    assert "&id" not in text and "*id" not in text


def test_names_scope_and_subresources(crd: dict[str, Any]) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "decisionmodels.decisionmodel.io"
    spec = crd["spec"]
    assert spec["group"] == "decisionmodel.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "DecisionModel",
        "listKind": "DecisionModelList",
        "plural": "decisionmodels",
        "singular": "decisionmodel",
        "shortNames": ["dm"],
        "categories": ["dmrollout"],
    }
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1"
    assert version["served"] is True and version["storage"] is True
    assert version["subresources"] == {
        "status": {},
        # HPA/KEDA scale the DecisionModel (issue 11, point 11).
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas.modelReady",
            "labelSelectorPath": ".status.selector",
        },
    }


def test_printer_columns(crd: dict[str, Any]) -> None:
    columns = [
        (c["name"], c["jsonPath"], c["type"], c.get("priority", 0))
        for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]
    ]
    assert columns == [
        ("Model", ".spec.model", "string", 0),
        ("Device", ".spec.device", "string", 0),
        ("Phase", ".status.phase", "string", 0),
        ("Ready", ".status.replicas.modelReady", "integer", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
        ("Digest", ".status.stableRevision.digest", "string", 1),
        ("Candidate", ".status.candidateRevision.hash", "string", 1),
        ("Accuracy", ".status.evaluation.accuracy", "string", 1),
    ]


def test_printer_column_paths_exist_in_schema(crd: dict[str, Any], schema: dict[str, Any]) -> None:
    paths = {p for p, _ in walk(schema)}
    for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]:
        path = column["jsonPath"].lstrip(".")
        if not path.startswith("metadata."):
            assert path in paths, column


def test_schema_is_structural(schema: dict[str, Any]) -> None:
    assert structural_problems(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}


def test_structural_checker_catches_violations() -> None:
    # The checker itself must be able to fail: feed it what pydantic emits unprocessed.
    raw = DecisionModelSpec.model_json_schema(by_alias=True)
    raw.pop("$defs")
    problems = " ".join(structural_problems(raw))
    assert "title" in problems
    assert "missing or bad type" in problems  # `$ref` and `anyOf [X, null]` nodes


def test_every_field_has_a_description(schema: dict[str, Any]) -> None:
    missing = [
        f"{path}.{name}"
        for path, node in walk(schema)
        for name, child in node.get("properties", {}).items()
        if name != "metadata" and not child.get("description", "").strip()
    ]
    assert missing == []


def _rules(schema: dict[str, Any], path: str) -> list[dict[str, str]]:
    nodes = dict(walk(schema))
    return list(nodes[path].get("x-kubernetes-validations", []))


def test_cel_rules_sit_on_the_right_fields(schema: dict[str, Any]) -> None:
    def messages(path: str) -> set[str]:
        return {r["message"] for r in _rules(schema, path)}

    assert messages("") == {MSG_NAME_LENGTH, MSG_NAME_DNS1035}
    assert messages("spec.model") == {MSG_MODEL_TAG}
    assert messages("spec") == {MSG_IMAGE_RUNTIME_VERSION}
    assert messages("spec.rollout") == {MSG_EVALUATION_GATED, MSG_MANUAL_PROMOTION_CONFLICT}
    assert messages("spec.rollout.evaluation.datasetRef") == {MSG_DATASET_ONE_SOURCE}
    assert messages("spec.cache.accessModes") == {MSG_READ_ONLY_MANY}
    for phase in ("caching", "starting", "evaluating"):
        (rule,) = _rules(schema, f"spec.rollout.timeouts.{phase}")
        assert rule["message"] == MSG_TIMEOUT_RANGE
        assert "duration('1m')" in rule["rule"] and "duration('24h')" in rule["rule"]
    (rule,) = _rules(schema, "")[:1]
    assert rule["rule"] == "self.metadata.name.size() <= 43"
    assert _rules(schema, "spec")[0]["fieldPath"] == ".runtimeVersion"
    assert _rules(schema, "spec.rollout")[0]["fieldPath"] == ".promotion"


def test_cel_rules_that_use_string_functions_are_cost_bounded(schema: dict[str, Any]) -> None:
    # The API server refuses a CRD whose CEL cost estimate is unbounded; string rules need
    # maxLength on the string and list rules maxItems on the list.
    for path, node in walk(schema):
        if not path or not node.get("x-kubernetes-validations"):
            continue
        if node.get("type") == "string":
            assert "maxLength" in node, path
        if node.get("type") == "array":
            assert "maxItems" in node, path


def test_validation_patterns(schema: dict[str, Any]) -> None:
    nodes = dict(walk(schema))
    assert nodes["spec.digest"]["pattern"] == "^[a-f0-9]{64}$"
    assert nodes["spec.runtimeVersion"]["pattern"] == r"^[0-9]+\.[0-9]+\.[0-9]+$"
    assert nodes["spec.replicas"]["minimum"] == 1
    max_cases = nodes["spec.rollout.evaluation.maxCases"]
    assert (max_cases["minimum"], max_cases["maximum"], max_cases["default"]) == (1, 5000, 500)
    assert nodes["spec.engine"]["enum"] == ["ollaya"]
    assert nodes["spec.device"]["enum"] == ["cpu", "cuda"]
    assert nodes["spec.rollout.promotion"]["enum"] == ["Automatic", "EvaluationGated", "Manual"]
    assert nodes["status.phase"]["enum"] == [p.value for p in Phase]
    assert nodes["spec"]["required"] == ["model"]
    evaluation = nodes["spec.rollout.evaluation"]
    assert evaluation["required"] == ["datasetRef", "minAccuracy"]
    conditions = nodes["status.conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert nodes["spec.cache.size"]["x-kubernetes-int-or-string"] is True


@pytest.mark.parametrize(
    ("value", "ok"),
    [("0", True), ("1", True), ("0.90", True), ("1.000", True), ("1.5", False), ("1.01", False),
     ("-0.1", False), (".9", False), ("0.", False)],
)  # fmt: skip
def test_min_accuracy_pattern_bounds_the_decimal(
    schema: dict[str, Any], value: str, ok: bool
) -> None:
    node = dict(walk(schema))["spec.rollout.evaluation.minAccuracy"]
    assert (type_problems(value, node, "x") == []) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("30m", True), ("1h30m", True), ("90s", True), ("0.5h", True), ("300ms", True),
     ("30", False), ("1d", False), ("-5m", False), ("5 m", False), ("", False)],
)  # fmt: skip
def test_timeout_pattern(schema: dict[str, Any], value: str, ok: bool) -> None:
    node = dict(walk(schema))["spec.rollout.timeouts.caching"]
    assert (type_problems(value, node, "x") == []) is ok


def test_passthrough_fields_preserve_unknown_fields(schema: dict[str, Any]) -> None:
    nodes = dict(walk(schema))
    for path in (
        "spec.resources",
        "spec.scheduling.affinity",
        "spec.scheduling.tolerations[]",
        "status.stableRevision.resources",
    ):
        node = {k: v for k, v in nodes[path].items() if k != "description"}
        assert node == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, path
    assert nodes["spec.scheduling.nodeSelector"]["additionalProperties"] == {"type": "string"}


def test_status_has_no_server_side_defaults(schema: dict[str, Any]) -> None:
    assert [p for p, n in walk(schema["properties"]["status"]) if "default" in n] == []


def test_crd_defaults_match_pydantic_defaults(schema: dict[str, Any]) -> None:
    # What the API server stores after defaulting must read back as pydantic's defaults.
    spec_schema = schema["properties"]["spec"]
    for wire in (
        {"model": "laya:en"},
        {"model": "laya:en", "cache": {}, "rollout": {"timeouts": {}}},
        {
            "model": "laya:en",
            "rollout": {
                "evaluation": {
                    "datasetRef": {"configMapRef": {"name": "g", "key": "c"}},
                    "minAccuracy": "0.9",
                }
            },
        },
    ):
        defaulted = apply_defaults(wire, spec_schema)
        assert DecisionModelSpec.model_validate(defaulted) == DecisionModelSpec.model_validate(wire)
    wire = {"model": "laya:en", "cache": {}, "rollout": {"timeouts": {}}}
    defaulted = apply_defaults(wire, spec_schema)
    assert defaulted == {
        "engine": "ollaya",
        "model": "laya:en",
        "replicas": 1,
        "device": "cpu",
        "cache": {"size": "10Gi", "accessModes": ["ReadWriteOnce"]},
        "rollout": {
            "timeouts": {
                "caching": "30m",
                "starting": "10m",
                "evaluating": "10m",
                "decision": "24h",
            }
        },
    }


@pytest.mark.parametrize("case", load_cases("valid"), ids=lambda c: c.case)
def test_valid_cases_survive_pruning_and_validation(schema: dict[str, Any], case: Any) -> None:
    obj = case.manifest("default")
    # metadata is the API server's own; pruning by this schema applies to spec (and status).
    # Nulls are pruned before validation; nothing else of a valid case is.
    spec_schema = schema["properties"]["spec"]
    pruned = prune(obj["spec"], spec_schema)
    assert pruned == without_nulls(obj["spec"])
    assert type_problems({**obj, "spec": pruned}, schema, "") == []


def _full_status() -> DecisionModelStatus:
    t = datetime(2026, 10, 2, 12, 30, tzinfo=UTC)
    revision = RevisionStatus(
        hash="7c9f0a1b2c3d4e5f",
        engine=Engine.OLLAYA,
        model="laya:en",
        digest="c305bd41e2f5f0b4d1b2dcb5f9a1e3c7a4d6e8f0b2c4d6e8f0a2c4e6a8b0c2d4",
        device=Device.CPU,
        image="ghcr.io/ollaya-dev/ollaya:0.10.0",
        runtime_version="0.10.0",
        resources={"requests": {"cpu": "1", "memory": "3500Mi"}},
        precision="F32",
        placement="0123456789",
        scheduling=SchedulingSpec(node_selector={"pool": "cpu"}),
    )
    return DecisionModelStatus(
        phase=Phase.ROLLED_BACK,
        phase_transition_time=t,
        last_promotion_time=t,
        observed_generation=3,
        endpoint="http://triage.default.svc:11435/v1/systemone",
        stable_revision=revision,
        candidate_revision=revision.model_copy(update={"hash": "1111222233334444"}),
        failed_revision=FailedRevisionStatus(
            **revision.model_dump(), reason="EvaluationFailed", message="0.8 < 0.9", failed_at=t
        ),
        previous_revision=revision.model_copy(update={"hash": "aaaabbbbccccdddd"}),
        last_retry_token="1700000000",
        re_resolve=ReResolveStatus(hash="1111222233334444", attempts=2, last_attempt_time=t),
        rollback_to=RollbackToStatus(revision="0123456789abcdef", generation=4),
        decision_record=DecisionRecordStatus(
            sequence=3,
            digest="sha256:" + "ab" * 32,
            name="decision-triage-0a1b2c3d-000003",
            namespace="dmrollout-system",
            decision="Promote",
            revision="1111222233334444",
        ),
        rollout=RolloutRunStatus(
            workflow_id="rollout/default/triage/1111222233334444", run_id="r1"
        ),
        replicas=ReplicasStatus(desired=2, model_ready=1),
        selector="decisionmodel.io/name=triage,decisionmodel.io/revision=7c9f0a1b2c3d4e5f",
        evaluation=EvaluationStatus(
            revision="1111222233334444",
            accuracy="0.8000",
            baseline_accuracy="0.9300",
            cases=500,
            failed_cases=100,
            ece="0.0500",
            brier="0.1200",
            baseline_ece="0.0400",
            gates=EvaluationGates(min_accuracy="0.9", max_ece="0.1", max_cases=500),
            result=EvaluationResult.FAILED,
            reason="accuracy 0.8000 < minAccuracy 0.9",
            completed_at=t,
        ),
        evaluation_design=EvaluationDesignStatus(
            checked=True,
            cases=50,
            gates=[
                GateDesignStatus(
                    gate="minAccuracy",
                    threshold="0.98",
                    design="accuracy 0.99",
                    cases=50,
                    can_pass=False,
                    can_fail=True,
                    power=0.0,
                    cases_for_power=300,
                    expected_cases=50,
                )
            ],
            message="the golden set is too small to decide minAccuracy 0.98 on 50 cases",
        ),
        evaluation_ledger=[
            LedgerEntryStatus(
                revision="1111222233334444",
                threshold="0.9",
                confidence="0.95",
                dataset_prefix="0123456789abcdef",
                cases=137,
                this_evaluation=37,
                dataset_cases=500,
                evaluations=2,
                verdict=EvaluationResult.PASSED,
                pass_evidence="52.1",
                fail_evidence="0.0123",
                needed="40",
                restarted="minAccuracy changed from 0.8: a new test",
                total="130.0",
                squares="130.0",
                pass_log_wealth="3.95",
                fail_log_wealth="-8.1",
            )
        ],
        conditions=[
            Condition(
                type="Ready",
                status=ConditionStatus.TRUE,
                observed_generation=3,
                last_transition_time=t,
                reason="CandidateRejected",
                message="stable keeps serving",
            )
        ],
    )


def test_full_status_survives_pruning_and_validation(schema: dict[str, Any]) -> None:
    status_schema = schema["properties"]["status"]
    wire = _full_status().to_wire()
    assert type_problems(wire, status_schema, "status") == []
    assert prune(wire, status_schema) == wire
    # Every status field is populated above, so every schema property was exercised.
    assert set(wire) == set(status_schema["properties"])


def test_every_spec_property_is_a_model_field(schema: dict[str, Any]) -> None:
    spec_schema = schema["properties"]["spec"]
    aliases = {f.alias or n for n, f in DecisionModelSpec.model_fields.items()}
    assert set(spec_schema["properties"]) == aliases

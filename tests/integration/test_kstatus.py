"""kstatus, computed by the library itself (hack/kstatus: sigs.k8s.io/cli-utils), over a
DecisionModel in each state (the Argo CD health test data): Current only when the committed
spec serves, InProgress while rolling out or held, Failed when rolled back for cause, failed or
refused (issue 38 item 1). The explorer checks the same on live objects after every step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from harness.kstatus import KStatusChecker

KINDS = (
    Path(__file__).resolve().parents[2] / "deploy/argocd/resource_customizations/decisionmodel.io"
)
DATA = KINDS / "DecisionModel" / "testdata"
PIPELINES = KINDS / "DecisionModelPipeline" / "testdata"
EXPECTED = {
    # kstatus' own rule: an object without status.observedGeneration and conditions is
    # Current. Before the controller's first reconcile (its first write, normally under a
    # second) a kstatus tool sees the new DecisionModel as Current (docs/gitops.md); the Argo CD
    # script says Progressing.
    "no_status": "Current",
    "generation_not_observed": "InProgress",
    "first_rollout": "InProgress",
    "rolling_out": "InProgress",
    "awaiting_approval": "InProgress",
    "guard_hold": "InProgress",
    "rolled_back": "Failed",
    "first_rollout_failed": "Failed",
    # A missing tag is resolved again by itself (Reconciling), not stalled.
    "model_not_found": "InProgress",
    "healthy": "Current",
    "serving_with_warning": "Current",
    "replicas_lost": "Current",
}


@pytest.fixture(scope="module")
def kstatus() -> Iterator[KStatusChecker]:
    checker = KStatusChecker()
    yield checker
    checker.close()


def test_every_state_has_an_expected_kstatus() -> None:
    assert {p.stem for p in DATA.glob("*.yaml")} == set(EXPECTED)


@pytest.mark.parametrize(("case", "expected"), sorted(EXPECTED.items()))
def test_kstatus_of_each_state(kstatus: KStatusChecker, case: str, expected: str) -> None:
    found = kstatus.check(yaml.safe_load((DATA / f"{case}.yaml").read_text()))
    assert found.status == expected, found


def test_a_refused_placement_is_failed_not_current(kstatus: KStatusChecker) -> None:
    """Before, a refused spec carried no kstatus condition and read as Current."""
    obj = yaml.safe_load((DATA / "healthy.yaml").read_text())
    obj["metadata"]["generation"] = 3
    obj["status"]["observedGeneration"] = 3
    obj["status"]["conditions"] += [
        {"type": "Degraded", "status": "True", "reason": "PlacementRefused",
         "message": "spec.replicas 9 exceeds 4; lower it", "observedGeneration": 3},
        {"type": "Stalled", "status": "True", "reason": "PlacementRefused",
         "message": "spec.replicas 9 exceeds 4; lower it", "observedGeneration": 3},
    ]  # fmt: skip
    assert kstatus.check(obj).status == "Failed"


PIPELINE_EXPECTED = {
    "no_status": "Current",  # kstatus' rule for an object with no status, as above
    "progressing": "InProgress",
    "awaiting_approval": "InProgress",
    "succeeded": "Current",
    "failed": "Failed",
    "invalid": "Failed",
    "no_stage_worker": "Failed",
    "retried_after_failure": "InProgress",  # the failed run's phase is not the retry's
}


@pytest.mark.parametrize(("case", "expected"), sorted(PIPELINE_EXPECTED.items()))
def test_kstatus_of_each_pipeline_state(kstatus: KStatusChecker, case: str, expected: str) -> None:
    """The pipeline controller writes Reconciling/Stalled from its run's phase (before, every
    pipeline read Current)."""
    assert {p.stem for p in PIPELINES.glob("*.yaml")} == set(PIPELINE_EXPECTED)
    found = kstatus.check(yaml.safe_load((PIPELINES / f"{case}.yaml").read_text()))
    assert found.status == expected, found

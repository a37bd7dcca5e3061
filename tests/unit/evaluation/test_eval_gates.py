"""The gates: order, strictness, baseline handling, messages, threshold parsing."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from decisionmodel.evaluation import (
    EVALUATION_FAILED,
    EVALUATION_PASSED,
    EvaluationFigures,
    EvaluationGates,
    evaluate_gates,
)


def figures(correct: int, ece: float, pairs: int = 100) -> EvaluationFigures:
    return EvaluationFigures(
        accuracy=correct / pairs,
        ece=ece,
        brier=0.1,
        cases=pairs,
        pairs=pairs,
        correct=correct,
        failed_cases=0,
    )


ALL_GATES = EvaluationGates(
    min_accuracy="0.90", max_accuracy_drop="0.02", max_ece="0.05", max_ece_increase="0.01"
)
BASELINE = figures(correct=94, ece=0.03)  # 0.9400, 0.0300


def test_all_gates_pass_and_the_message_shows_every_comparison() -> None:
    verdict = evaluate_gates(figures(93, 0.035), ALL_GATES, BASELINE)
    assert (verdict.result, verdict.reason, verdict.gate) == ("Passed", EVALUATION_PASSED, None)
    assert verdict.message == (
        "passed: accuracy 0.9300 >= minAccuracy 0.90; "
        "accuracy drop 0.0100 (baseline 0.9400 - accuracy 0.9300) <= maxAccuracyDrop 0.02; "
        "ECE 0.0350 <= maxECE 0.05; "
        "ECE increase 0.0050 (ECE 0.0350 - baseline ECE 0.0300) <= maxECEIncrease 0.01"
    )


@pytest.mark.parametrize(
    ("candidate", "gate", "message"),
    [
        # Fails every gate (0.85 < 0.90; drop 0.09; ECE 0.2; increase 0.17): the first is named.
        (figures(85, 0.2), "minAccuracy", "accuracy 0.8500 < minAccuracy 0.90"),
        # Passes the floor, fails the rest: the drop is named.
        (
            figures(91, 0.2),
            "maxAccuracyDrop",
            "accuracy drop 0.0300 (baseline 0.9400 - accuracy 0.9100) > maxAccuracyDrop 0.02",
        ),
        # Passes accuracy gates, fails both ECE gates: maxECE comes first.
        (figures(94, 0.06), "maxECE", "ECE 0.0600 > maxECE 0.05"),
        (
            figures(94, 0.045),
            "maxECEIncrease",
            "ECE increase 0.0150 (ECE 0.0450 - baseline ECE 0.0300) > maxECEIncrease 0.01",
        ),
    ],
)
def test_the_first_failing_gate_is_reported(
    candidate: EvaluationFigures, gate: str, message: str
) -> None:
    verdict = evaluate_gates(candidate, ALL_GATES, BASELINE)
    assert (verdict.result, verdict.reason, verdict.gate) == ("Failed", EVALUATION_FAILED, gate)
    assert verdict.message == message


def test_a_figure_equal_to_its_threshold_passes_every_gate() -> None:
    gates = EvaluationGates(
        min_accuracy="0.90", max_accuracy_drop="0.02", max_ece="0.05", max_ece_increase="0.02"
    )
    # accuracy 90/100 = 0.9000 == 0.90; drop 0.9200 - 0.9000 = 0.0200 == 0.02 (in floats
    # 0.92 - 0.90 = 0.020000000000000018 would fail); ECE 0.0500 == 0.05; increase
    # 0.0500 - 0.0300 = 0.0200 == 0.02 (in floats 0.05 - 0.03 = 0.020000000000000004).
    assert 0.92 - 0.90 > 0.02 and 0.05 - 0.03 > 0.02
    baseline = figures(correct=92, ece=0.03)
    verdict = evaluate_gates(figures(90, 0.05), gates, baseline)
    assert verdict.result == "Passed", verdict.message


@pytest.mark.parametrize(
    ("candidate", "baseline", "gate"),
    [
        # One pair of 10 000 below the floor: 8999/10000 = 0.8999 < 0.90.
        (figures(8999, 0.0, pairs=10_000), None, "minAccuracy"),
        # Drop 0.9201 - 0.9000 = 0.0201 > 0.02.
        (figures(9000, 0.0, pairs=10_000), figures(9201, 0.0, pairs=10_000), "maxAccuracyDrop"),
        (figures(95, 0.0501), None, "maxECE"),
        # Increase 0.0301 - 0.0100 = 0.0201 > 0.02.
        (figures(95, 0.0301), figures(95, 0.01), "maxECEIncrease"),
    ],
)
def test_just_past_a_threshold_fails(
    candidate: EvaluationFigures, baseline: EvaluationFigures | None, gate: str
) -> None:
    gates = EvaluationGates(
        min_accuracy="0.90", max_accuracy_drop="0.02", max_ece="0.05", max_ece_increase="0.02"
    )
    verdict = evaluate_gates(candidate, gates, baseline)
    assert (verdict.result, verdict.gate) == ("Failed", gate)


def test_gates_compare_the_figures_status_shows() -> None:
    # 17999/20000 = 0.89995 exactly, a tie: half-even gives 0.9000 (0 is even), which is what
    # status shows, so minAccuracy 0.90 passes. 17997/20000 = 0.89985 → 0.8998 fails.
    gates = EvaluationGates(min_accuracy="0.90")
    assert evaluate_gates(figures(17_999, 0.0, pairs=20_000), gates).result == "Passed"
    verdict = evaluate_gates(figures(17_997, 0.0, pairs=20_000), gates)
    assert verdict.message == "accuracy 0.8998 < minAccuracy 0.90"


def test_relative_gates_are_skipped_without_a_baseline() -> None:
    # A candidate far worse than any baseline could be, but there is no stable revision.
    verdict = evaluate_gates(figures(90, 0.05), ALL_GATES, baseline=None)
    assert verdict.result == "Passed"
    assert verdict.message == (
        "passed: accuracy 0.9000 >= minAccuracy 0.90; maxAccuracyDrop not checked (no baseline); "
        "ECE 0.0500 <= maxECE 0.05; maxECEIncrease not checked (no baseline)"
    )


def test_unset_gates_are_not_applied() -> None:
    only_floor = EvaluationGates(min_accuracy="0")
    verdict = evaluate_gates(figures(0, 1.0), only_floor, BASELINE)
    assert verdict.result == "Passed"
    assert verdict.message == "passed: accuracy 0.0000 >= minAccuracy 0"
    assert evaluate_gates(figures(100, 1.0), EvaluationGates(min_accuracy="1")).result == "Passed"


def test_a_candidate_better_than_its_baseline_passes_the_relative_gates() -> None:
    gates = EvaluationGates(min_accuracy="0", max_accuracy_drop="0", max_ece_increase="0")
    verdict = evaluate_gates(figures(96, 0.01), gates, BASELINE)
    assert verdict.result == "Passed"
    assert "accuracy drop -0.0200" in verdict.message
    assert "ECE increase -0.0200" in verdict.message


# --- thresholds -----------------------------------------------------------------------------


def test_gates_read_the_crd_evaluation_object() -> None:
    spec: dict[str, Any] = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.90",
        "maxAccuracyDrop": "0.02",
        "maxECE": "0.05",
        "maxECEIncrease": "0.010",
        "maxCases": 100,
    }
    gates = EvaluationGates.model_validate(spec)
    assert gates.min_accuracy == Decimal("0.90")
    assert gates.max_ece_increase == Decimal("0.010")
    assert gates.needs_baseline
    # Echoed back as written, e.g. into status.evaluation.
    assert json.loads(gates.model_dump_json(by_alias=True, exclude_none=True)) == {
        "minAccuracy": "0.90",
        "maxAccuracyDrop": "0.02",
        "maxECE": "0.05",
        "maxECEIncrease": "0.010",
    }


def test_needs_baseline_only_with_a_relative_gate() -> None:
    assert not EvaluationGates(min_accuracy="0.9", max_ece="0.1").needs_baseline
    assert EvaluationGates(min_accuracy="0.9", max_accuracy_drop="0.1").needs_baseline
    assert EvaluationGates(min_accuracy="0.9", max_ece_increase="0.1").needs_baseline


@pytest.mark.parametrize(
    "value", [0.9, 1, "1.5", "-0.1", "abc", "", "NaN", "Infinity", None, [0.9]]
)
def test_bad_thresholds_are_refused(value: Any) -> None:
    with pytest.raises(ValidationError):
        EvaluationGates(min_accuracy=value)


def test_optional_thresholds_are_checked_too() -> None:
    with pytest.raises(ValidationError):
        EvaluationGates(min_accuracy="0.9", max_ece=0.05)
    with pytest.raises(ValidationError):
        EvaluationGates(min_accuracy="0.9", max_accuracy_drop="2")
    assert EvaluationGates(min_accuracy=Decimal("0.9"), max_ece=None).max_ece is None


def test_gates_figures_and_verdict_survive_a_json_round_trip() -> None:
    # They cross the Temporal boundary (activity input/result) as JSON.
    candidate = figures(93, 0.035)
    verdict = evaluate_gates(candidate, ALL_GATES, BASELINE)
    for model in (ALL_GATES, candidate, verdict):
        text = json.dumps(model.model_dump(mode="json"))
        assert type(model).model_validate(json.loads(text)) == model
    assert ALL_GATES.model_dump(mode="json")["min_accuracy"] == "0.90"

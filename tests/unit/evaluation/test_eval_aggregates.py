"""The report's aggregates: per-bin sums and confusion cells, counts only, and the ECE they
give back is the evaluation's own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_eval_progress import (
    MARKER,
    ROUTE,
    SEVERITY,
    URGENT,
    choice,
    dataset,
    feed,
    noul,
    random_run,
)

from decisionmodel.evaluation import EvaluationProgress, finalize
from decisionmodel.evaluation.confusion import KINDS, NONE, kind_labels
from decisionmodel.rollout.contracts import EvaluationOutcome
from decisionmodel.rollout.evaluation_status import evaluation_details, evaluation_status
from decisionmodel.vocabulary import EvaluationResult

LABEL_WORDS = ("billing", "tech", "bugs", "low", "mid", "high", "route", "urgent", "severity")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ece_from_the_aggregates_is_the_evaluations_ece(seed: int) -> None:
    cases, answers = random_run(seed=seed, n=150)
    progress = EvaluationProgress()
    feed(progress, cases, answers)
    aggregates = progress.aggregates()
    figures = finalize(progress)
    assert aggregates.ece() == figures.ece  # same sums, same formula: exactly equal
    assert [b.count for b in aggregates.bins] == progress.bin_counts
    assert sum(b.count for b in aggregates.bins) == figures.pairs
    assert sum(b.correct for b in aggregates.bins) == sum(progress.bin_correct)
    assert sum(c.count for c in aggregates.confusion) == figures.pairs


def test_aggregates_hold_no_dataset_content_and_a_fixed_vocabulary() -> None:
    cases, answers = random_run(seed=4, n=200)
    progress = EvaluationProgress()
    feed(progress, cases, answers)
    text = progress.aggregates().model_dump_json()
    assert MARKER not in text
    for word in LABEL_WORDS:
        assert word not in text
    for cell in progress.aggregates().confusion:
        assert cell.expected in kind_labels(cell.kind)
        assert cell.predicted in (*kind_labels(cell.kind), NONE)


def _cells(progress: EvaluationProgress) -> dict[tuple[str, str, str], int]:
    return {(c.kind, c.expected, c.predicted): c.count for c in progress.aggregates().confusion}


def test_confusion_cells_by_hand() -> None:
    many = {"type": "choice", "criteria": [f"l{n}" for n in range(1, 10)]}
    cases = dataset(
        {
            "state": "s",
            "questions": {"r": ROUTE, "u": URGENT, "s": SEVERITY, "m": many},
            "expected": {"r": "tech", "u": True, "s": 2, "m": "l8"},
        },
        {
            "state": "s",
            "questions": {"r": ROUTE, "u": URGENT, "s": SEVERITY, "m": many},
            "expected": {"r": "billing", "u": False, "s": 0, "m": "l2"},
        },
    )
    progress = EvaluationProgress()
    progress.add_case(
        cases[0],
        {
            "r": choice("billing", 0.7),  # tech (option 2) answered billing (option 1)
            "u": noul(0.2),  # true answered false
            "s": {"type": "score", "score": 1, "probabilities": {"0": 0.1, "1": 0.6, "2": 0.3}},
            "m": choice("l9", 0.9),  # option 8 answered option 9: both "option 7+"
        },
    )
    progress.add_case(cases[1], {"r": choice("elsewhere", 0.9), "u": noul(0.1)})
    assert _cells(progress) == {
        ("noul", "true", "false"): 1,
        ("noul", "false", "false"): 1,
        ("score", "level 2", "level 1"): 1,
        ("score", "level 0", NONE): 1,  # no answer
        ("choice", "option 2", "option 1"): 1,
        ("choice", "option 1", NONE): 1,  # a label outside the criteria
        ("choice", "option 7+", "option 7+"): 1,
        ("choice", "option 2", NONE): 1,  # "m" expected l2, no answer
    }


def test_a_failed_request_counts_every_pair_as_none() -> None:
    cases = dataset({"state": "s", "questions": {"u": URGENT}, "expected": {"u": True}})
    progress = EvaluationProgress()
    progress.add_failed_case(cases[0])
    assert _cells(progress) == {("noul", "true", NONE): 1}


def test_a_heartbeat_without_confusion_still_resumes() -> None:
    """An older worker's heartbeat has no ``confusion``: it must still be read back."""
    cases, answers = random_run(seed=5, n=10)
    progress = EvaluationProgress()
    feed(progress, cases, answers)
    old: dict[str, Any] = json.loads(progress.model_dump_json())
    del old["confusion"]
    resumed = EvaluationProgress.model_validate(old)
    assert resumed.confusion == {} and resumed.pairs == progress.pairs


def _outcome(progress: EvaluationProgress) -> EvaluationOutcome:
    figures = finalize(progress).rendered()
    return EvaluationOutcome(
        result=EvaluationResult.PASSED,
        reason="EvaluationPassed",
        message="m",
        accuracy=figures["accuracy"],
        ece=figures["ece"],
        brier=figures["brier"],
        cases=progress.cases,
        failed_cases=progress.failed_cases,
        dataset_digest="d" * 64,
        aggregates=progress.aggregates(),
    )


def test_status_carries_the_bins_to_four_places_and_their_ece_agrees() -> None:
    cases, answers = random_run(seed=6, n=120)
    progress = EvaluationProgress()
    feed(progress, cases, answers)
    outcome = _outcome(progress)
    wire = evaluation_status(outcome, "abc").to_wire()
    bins = wire["reliability"]
    assert len(bins) == 10 and all(len(b["confidenceSum"].split(".")[1]) == 4 for b in bins)
    n = sum(b["count"] for b in bins)
    ece = sum(
        abs(b["correct"] - float(b["confidenceSum"])) / n for b in bins if b["count"]
    )  # Σ (n_b/N)|acc_b - conf_b| with the rounded sums
    assert abs(ece - float(outcome.ece)) < 1e-4
    assert {c["kind"] for c in wire["confusion"]} <= set(KINDS)
    assert len(json.dumps(wire)) < 8192


def test_outcome_of_an_old_history_has_no_aggregates() -> None:
    """A result recorded before this change replays: the new fields default."""
    old = {
        "result": "Passed",
        "reason": "EvaluationPassed",
        "message": "m",
        "accuracy": "0.9000",
        "ece": "0.0100",
        "brier": "0.0500",
        "cases": 3,
        "failed_cases": 0,
        "dataset_digest": "d" * 64,
    }
    outcome = EvaluationOutcome.model_validate(old)
    assert outcome.aggregates is None and outcome.baseline_brier is None
    assert "reliability" not in evaluation_status(outcome, "r").to_wire()


def test_the_temporal_ui_line_names_the_figures_and_the_report_command() -> None:
    cases, answers = random_run(seed=7, n=20)
    progress = EvaluationProgress()
    feed(progress, cases, answers)
    outcome = _outcome(progress)
    line = evaluation_details(outcome, "team-a", "fraud", "0123abcd")
    assert f"accuracy {outcome.accuracy}, ECE {outcome.ece}" in line
    assert "`dmrollout report fraud -n team-a --revision 0123abcd`" in line


def test_the_class_vocabulary_is_capped_at_twenty_labels() -> None:
    labels = {label for kind in KINDS for label in kind_labels(kind)} | {NONE}
    assert len(labels) <= 20
    assert all(len(label) <= 16 for label in labels)  # status's maxLength

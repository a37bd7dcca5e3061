"""``status.evaluation`` from an evaluation's result: the figures, and the aggregates the report
draws (per-bin sums rendered to 4 places, confusion cells as they are)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from decisionmodel.api.status import (
    ConfusionCellStatus,
    EvaluationDecisionStatus,
    EvaluationDesignStatus,
    EvaluationStatus,
    ReliabilityBinStatus,
)
from decisionmodel.evaluation.aggregates import EvaluationAggregates
from decisionmodel.evaluation.decimal_format import render4
from decisionmodel.evaluation.decision import EvaluationDecision
from decisionmodel.evaluation.design import GateDesign
from decisionmodel.rollout.contracts import EvaluationOutcome


def evaluation_status(outcome: EvaluationOutcome, revision: str | None) -> EvaluationStatus:
    """The status of one evaluation, without ``gates`` and ``completedAt`` (the writer's)."""
    candidate = outcome.aggregates
    return EvaluationStatus(
        revision=revision,
        accuracy=outcome.accuracy,
        baseline_accuracy=outcome.baseline_accuracy,
        cases=outcome.cases,
        failed_cases=outcome.failed_cases,
        ece=outcome.ece,
        brier=outcome.brier,
        baseline_ece=outcome.baseline_ece,
        baseline_brier=outcome.baseline_brier,
        reliability=_bins(candidate),
        baseline_reliability=_bins(outcome.baseline_aggregates),
        confusion=_cells(candidate),
        negative_flips=outcome.negative_flips,
        decision=(
            EvaluationDecisionStatus.model_validate(outcome.decision.model_dump(mode="json"))
            if outcome.decision is not None
            else None
        ),
        result=outcome.result,
        reason=outcome.reason,
    )


def _bins(aggregates: EvaluationAggregates | None) -> list[ReliabilityBinStatus] | None:
    if aggregates is None or not aggregates.bins:
        return None
    return [
        ReliabilityBinStatus(
            count=b.count, correct=b.correct, confidence_sum=render4(b.confidence_sum)
        )
        for b in aggregates.bins
    ]


def _cells(aggregates: EvaluationAggregates | None) -> list[ConfusionCellStatus] | None:
    if aggregates is None or not aggregates.confusion:
        return None
    return [
        ConfusionCellStatus(kind=c.kind, expected=c.expected, predicted=c.predicted, count=c.count)
        for c in aggregates.confusion
    ]


def decision_lines(decision: Mapping[str, Any] | None) -> list[str]:
    """One line per gate of ``status.evaluation.decision``, then the sequential test's line
    when it has one, worded as the rollout's own message and the Temporal UI word them
    (EvaluationDecision.lines)."""
    if not decision:
        return []
    wire = EvaluationDecisionStatus.model_validate(decision)
    return EvaluationDecision.model_validate(wire.model_dump(mode="json")).lines()


def design_lines(design: Mapping[str, Any] | None) -> list[str]:
    """One line per gate of ``status.evaluationDesign`` (what the golden set can decide, checked
    when the rollout started), or why it was not checked."""
    if not design:
        return []
    wire = EvaluationDesignStatus.model_validate(design)
    if not wire.checked:
        return [wire.message]
    return [GateDesign.model_validate(g.model_dump()).line() for g in wire.gates]


def report_command(namespace: str, name: str, revision: str | None = None) -> str:
    """The command that writes a DecisionModel's evaluation report (status and the Temporal UI
    show it; ``revision`` picks a past one from its rollout's history)."""
    suffix = f" --revision {revision}" if revision else ""
    return f"dmrollout report {name} -n {namespace}{suffix}"


def evaluation_details(outcome: EvaluationOutcome, namespace: str, name: str, revision: str) -> str:
    """A markdown line for the workflow's details in the Temporal UI: the figures and the
    command that writes the report."""
    base = ""
    if outcome.baseline_accuracy is not None:
        base = f" (baseline accuracy {outcome.baseline_accuracy}, ECE {outcome.baseline_ece})"
    verdicts = ""
    if outcome.decision is not None:
        lines = "".join(f"\n- {line}" for line in outcome.decision.lines())
        verdicts = f"\n\nGates at confidence {outcome.decision.confidence}:{lines}\n\n"
    return (
        f"Evaluation **{outcome.result.value}**: accuracy {outcome.accuracy}, ECE {outcome.ece}, "
        f"Brier {outcome.brier} on {outcome.cases} cases{base}. {verdicts}"
        f"Report: `{report_command(namespace, name, revision)}`"
    )

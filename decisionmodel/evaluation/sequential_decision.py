"""The decision record of a sequential evaluation (``spec.rollout.evaluation.sequential``).

Each gate's verdict is its sequential test's (ledger.py, sequential.py, sequential_gates.py):
Passed or Failed as soon as a bettor's wealth reaches 1 / alpha, over every case the test has
counted in all its evaluations. A gate's interval is for reading only: a normal interval of the
mean per-case outcome over those cases (the test keeps their count, sum and sum of squares, not
the cases), at the test's confidence. The figures (ECE, Brier, paired differences) are this
evaluation's cases at fixed n, reported and not gated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal

from decisionmodel.evaluation import intervals as iv
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decision import EvaluationDecision, FigureInterval, GateDecision
from decisionmodel.evaluation.decision import decide as decide_fixed
from decisionmodel.evaluation.gates import EvaluationGates
from decisionmodel.evaluation.ledger import LedgerEntry
from decisionmodel.evaluation.sequential import SequentialGate
from decisionmodel.evaluation.sequential_ece import EceGate
from decisionmodel.evaluation.sequential_gates import KINDS, base_gate, slice_of
from decisionmodel.vocabulary import Gate

READING_METHOD = "normal, every case of the sequential test"
ECE_METHOD = "empirical-Bernstein sequence, every case"
TEST_FIGURE = "accuracy, every case of the test"


def decide_sequential(
    gates: EvaluationGates,
    entry: LedgerEntry,
    gate: SequentialGate,
    candidate: Sequence[CaseRecord],
    stable: Sequence[CaseRecord] | None,
    seed_parts: tuple[str, ...],
    others: Mapping[str, SequentialGate] | None = None,
    ece: Mapping[str, EceGate] | None = None,
) -> EvaluationDecision:
    """The record: each test's verdict (minAccuracy's ``gate``, the ``others``: paired gates
    and slices), this evaluation's figures, the ledger."""
    confidence = Decimal(entry.confidence)
    figures: list[FigureInterval] = []
    if candidate:
        fixed = decide_fixed(gates, confidence, candidate, stable, seed_parts)
        figures = list(fixed.figures)
    judged = GateDecision(
        gate=str(Gate.MIN_ACCURACY),
        interval=FigureInterval.of(TEST_FIGURE, reading_interval(gate, float(confidence))),
        threshold=entry.threshold,
        side="min",
        verdict=gate.verdict(),
        sequential=True,
    )
    written = {g.gate: g.threshold for g in entry.gates}
    judged_too = [
        _other_decision(g, test, written[g], float(confidence))
        for g, test in (others or {}).items()
    ]
    written |= {e.gate: e.threshold for e in entry.ece}
    judged_too += [_ece_decision(g, test, written[g]) for g, test in (ece or {}).items()]
    return EvaluationDecision(
        confidence=entry.confidence,
        result=entry.verdict,
        gates=[judged, *judged_too],
        figures=figures,
        dataset_digest=seed_parts[0] if seed_parts else "",
        sequential=entry,
    ).sealed()


def _other_decision(
    name: str, test: SequentialGate, threshold: str, confidence: float
) -> GateDecision:
    """Another gate's line: a drop read as stable - candidate, as a ceiling, as fixed n does."""
    gate, where = base_gate(name), slice_of(name)
    found = reading_interval(test, confidence)
    figure = KINDS[gate].figure if where is None else f"slice {where} {KINDS[gate].figure}"
    if gate == Gate.MAX_ACCURACY_DROP:
        found = found.negated()
    return GateDecision(
        gate=name,
        interval=FigureInterval.of(f"{figure}, every case of the test", found),
        threshold=threshold,
        side="min" if gate == Gate.MIN_ACCURACY else "max",
        verdict=test.verdict(),
        sequential=True,
    )


def _ece_decision(name: str, test: EceGate, threshold: str) -> GateDecision:
    """An ECE gate's line: its always-valid bounds around the case-weighted estimate."""
    lower, upper = test.bounds()
    figure = "ECE increase" if name == Gate.MAX_ECE_INCREASE else "ECE"
    found = iv.Interval(test.estimate(), lower, upper, test.cases, ECE_METHOD)
    return GateDecision(
        gate=name,
        interval=FigureInterval.of(f"{figure}, every case of the test", found),
        threshold=threshold,
        side="max",
        verdict=test.verdict(),
        sequential=True,
    )


def reading_interval(gate: SequentialGate, confidence: float) -> iv.Interval:
    """Mean per-case outcome over the test's cases, ± z standard errors, within its range."""
    assert gate.passer is not None
    n, mean, squares = gate.passer.n, gate.mean, gate.passer.squares
    lo, hi = gate.lo, gate.hi
    if n == 0:
        return iv.Interval(0.0, lo, hi, 0, READING_METHOD)
    var = max(squares / n - mean * mean, 0.0) * n / max(n - 1, 1)
    half = iv.z_of(confidence) * math.sqrt(var / n)
    return iv.Interval(mean, max(mean - half, lo), min(mean + half, hi), n, READING_METHOD)

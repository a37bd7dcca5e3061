"""The figures table: accuracy, ECE and Brier of the candidate against the baseline and the
gates. Gates are checked as the evaluation checks them (gates.py): on the 4-place figures
status shows, a figure equal to its threshold passes."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from decisionmodel.api.status import EvaluationStatus


@dataclass(frozen=True)
class GateRow:
    gate: str
    threshold: str
    figure: str  # what was compared, e.g. "0.9400" or "drop 0.0100"
    verdict: str  # "pass", "fail" or "not checked (no baseline)"


def _dec(text: str | None) -> Decimal | None:
    if text is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def gate_rows(ev: EvaluationStatus) -> list[GateRow]:
    g = ev.gates
    if g is None:
        return []
    acc, ece = _dec(ev.accuracy), _dec(ev.ece)
    base_acc, base_ece = _dec(ev.baseline_accuracy), _dec(ev.baseline_ece)
    rows = []
    if g.min_accuracy is not None and acc is not None:
        rows.append(_row("minAccuracy", g.min_accuracy, acc, ">="))
    if g.max_accuracy_drop is not None:
        drop = base_acc - acc if base_acc is not None and acc is not None else None
        rows.append(_row("maxAccuracyDrop", g.max_accuracy_drop, drop, "<=", "drop "))
    if g.max_ece is not None and ece is not None:
        rows.append(_row("maxECE", g.max_ece, ece, "<="))
    if g.max_ece_increase is not None:
        rise = ece - base_ece if base_ece is not None and ece is not None else None
        rows.append(_row("maxECEIncrease", g.max_ece_increase, rise, "<=", "increase "))
    return rows


def _row(gate: str, threshold: str, figure: Decimal | None, sense: str, label: str = "") -> GateRow:
    limit = _dec(threshold)
    if figure is None or limit is None:
        return GateRow(gate, threshold, "-", "not checked (no baseline)")
    ok = figure >= limit if sense == ">=" else figure <= limit
    return GateRow(gate, threshold, f"{label}{figure}", "pass" if ok else "fail")

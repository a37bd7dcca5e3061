"""The evidence of an evaluation with confidence: each gate's interval and verdict, every
figure's interval (the paired differences and the flips among them) and the per-slice table.
Read from ``status.evaluation.decision``; every value is escaped."""

from __future__ import annotations

from html import escape

from decisionmodel.api.status import EvaluationDecisionStatus, FigureIntervalStatus
from decisionmodel.vocabulary import EvaluationResult

_CSS = {
    EvaluationResult.PASSED: "pass",
    EvaluationResult.FAILED: "fail",
    EvaluationResult.INCONCLUSIVE: "note",
}
SLICE_PREFIX = "slice "


def evidence_html(decision: EvaluationDecisionStatus | None) -> str:
    if decision is None:
        return (
            '<p class="note">Point gates (no spec.rollout.evaluation.confidence): the figures '
            "were compared with the thresholds as they are, without intervals.</p>"
        )
    return "\n".join(
        [
            f'<p id="evidence">Decided at confidence {escape(decision.confidence)}: '
            f'<span class="{_CSS[decision.result]}">{escape(decision.result.value)}</span>; '
            f"evidence {escape(decision.evidence)} (an approval of a held candidate names it); "
            f"dataset sha256 {escape(decision.dataset_digest[:16])}…</p>",
            _gates(decision),
            _figures([f for f in decision.figures if not f.figure.startswith(SLICE_PREFIX)]),
            _slices([f for f in decision.figures if f.figure.startswith(SLICE_PREFIX)]),
        ]
    )


def _gates(decision: EvaluationDecisionStatus) -> str:
    rows = []
    for g in decision.gates:
        more = f"~{g.more_cases} more cases (half the time)" if g.more_cases else ""
        if g.more_cases and g.more_cases_80:
            more += f", ~{g.more_cases_80} for 80 %"
        sign = "≥" if g.side == "min" else "≤"
        rows.append(
            f"<tr><th>{escape(g.gate)}</th><td>{escape(g.interval.figure)}</td>"
            f"<td>{_interval(g.interval)}</td><td>{sign} {escape(g.threshold)}</td>"
            f'<td class="{_CSS[g.verdict]}">{escape(g.verdict.value)}</td>'
            f"<td>{escape(more)}</td></tr>"
        )
    return (
        '<table id="decision"><caption>Gates on intervals</caption><tr><th>gate</th>'
        "<th>figure</th><th>estimate [interval]</th><th>threshold</th><th>verdict</th>"
        f"<th>to decide</th></tr>{''.join(rows)}</table>"
    )


def _figures(figures: list[FigureIntervalStatus]) -> str:
    rows = "".join(
        f"<tr><th>{escape(f.figure)}</th><td>{_interval(f)}</td><td>{f.cases}</td>"
        f'<td class="note">{escape(f.method)}</td></tr>'
        for f in figures
    )
    return (
        '<table id="intervals"><caption>Every figure with its interval (differences are '
        "candidate - stable on the same cases; flips are shares of cases)</caption><tr><th>"
        f"</th><th>estimate [interval]</th><th>cases</th><th>method</th></tr>{rows}</table>"
    )


def _slices(figures: list[FigureIntervalStatus]) -> str:
    if not figures:
        return ""
    rows = "".join(
        f"<tr><th>{escape(f.figure.removeprefix(SLICE_PREFIX))}</th><td>{_interval(f)}</td>"
        f"<td>{f.cases}</td></tr>"
        for f in figures
    )
    return (
        '<table id="slices"><caption>Per slice (intervals corrected for the number of slices '
        "compared)</caption><tr><th>slice</th><th>estimate [interval]</th><th>cases</th></tr>"
        f"{rows}</table>"
    )


def _interval(f: FigureIntervalStatus) -> str:
    return f"{escape(f.estimate)} [{escape(f.lower)}, {escape(f.upper)}]"

"""The report page: header, figures against the baseline and the gates, the reliability
diagram, the confusion matrices. Every value shown comes from ``status.evaluation`` (or the
same figures from a rollout's history) and is escaped; the page loads nothing."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from decisionmodel.api.status import EvaluationResult, EvaluationStatus
from decisionmodel.report.confusion_html import confusion_tables
from decisionmodel.report.evidence_html import evidence_html
from decisionmodel.report.figures import gate_rows
from decisionmodel.report.reliability_svg import reliability_svg

_STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 960px; }
table { border-collapse: collapse; margin: 8px 0 20px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { background: #f0f0f0; }
caption { text-align: left; font-weight: bold; padding: 4px 0; }
.pass { color: #1e8449; font-weight: bold; } .fail { color: #c0392b; font-weight: bold; }
.note { color: #666; font-size: 90%; }
"""


@dataclass(frozen=True)
class ReportSubject:
    namespace: str
    name: str
    source: str  # where the figures were read, e.g. "status" or a workflow ID


def render_report(subject: ReportSubject, ev: EvaluationStatus) -> str:
    title = f"Evaluation of {subject.namespace}/{subject.name} revision {ev.revision or '-'}"
    result = ev.result.value if ev.result else "-"
    css = {EvaluationResult.PASSED: "pass", EvaluationResult.INCONCLUSIVE: "note"}.get(
        ev.result or EvaluationResult.FAILED, "fail"
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            f'<p>Result <span class="{css}" id="result">{escape(result)}</span> '
            f"({escape(ev.reason or '-')}), {ev.cases if ev.cases is not None else '-'} cases, "
            f"{ev.failed_cases if ev.failed_cases is not None else '-'} with a wrong or missing "
            f"answer; completed {escape(str(ev.completed_at or '-'))}; "
            f"read from {escape(subject.source)}.</p>",
            _figures_table(ev),
            _gates_table(ev),
            "<h2>Evidence</h2>",
            evidence_html(ev.decision),
            "<h2>Reliability</h2>",
            _reliability(ev),
            "<h2>Confusion</h2>",
            confusion_tables(ev.confusion or []),
            '<p class="note">Aggregates only: per-bin counts and sums, per-class counts. No '
            "case, question id or dataset label is recorded; choice labels are named by their "
            "position in the question's criteria.</p>",
            "</body></html>",
            "",
        ]
    )


def _figures_table(ev: EvaluationStatus) -> str:
    rows = [
        ("accuracy", ev.accuracy, ev.baseline_accuracy),
        ("ECE", ev.ece, ev.baseline_ece),
        ("Brier", ev.brier, ev.baseline_brier),
    ]
    body = "".join(
        f"<tr><th>{name}</th><td>{escape(c or '-')}</td><td>{escape(b or '-')}</td></tr>"
        for name, c, b in rows
    )
    return (
        '<table id="figures"><caption>Candidate against the baseline (the stable revision, '
        "when it was evaluated)</caption><tr><th></th><th>candidate</th><th>baseline</th></tr>"
        f"{body}</table>"
    )


def _gates_table(ev: EvaluationStatus) -> str:
    rows = gate_rows(ev)
    if not rows:
        return "<p>No gates recorded.</p>"
    body = "".join(
        f"<tr><th>{r.gate}</th><td>{escape(r.threshold)}</td><td>{escape(r.figure)}</td>"
        f'<td class="{r.verdict if r.verdict in ("pass", "fail") else "note"}">'
        f"{escape(r.verdict)}</td></tr>"
        for r in rows
    )
    return (
        '<table id="gates"><caption>Gates</caption><tr><th>gate</th><th>threshold</th>'
        f"<th>figure</th><th>verdict</th></tr>{body}</table>"
    )


def _reliability(ev: EvaluationStatus) -> str:
    if not ev.reliability:
        return "<p>No reliability bins were recorded for this evaluation.</p>"
    legend = (
        '<p class="note">Bars: accuracy per confidence bin (n = pairs in the bin). Dots: mean '
        "confidence of the bin (blue: candidate"
        + ("; orange: baseline" if ev.baseline_reliability else "")
        + "). Dashed: perfect calibration. ECE is the count-weighted mean distance of the dots "
        "from the diagonal.</p>"
    )
    level = float(ev.decision.confidence) if ev.decision else 0.95
    legend += (
        f'<p class="note">Whiskers: {level:g} Wilson interval of each bin\'s accuracy (pairs '
        "taken as independent within a bin).</p>"
    )
    svg = reliability_svg(ev.reliability, ev.ece, ev.baseline_reliability, level)
    return svg + legend

"""The evaluation report: one self-contained HTML page (inline SVG, no script, no external
asset) drawn from ``status.evaluation``'s figures and aggregates. Pure: text in, text out, and
the same input always gives the same bytes."""

from __future__ import annotations

from decisionmodel.report.page import ReportSubject, render_report

__all__ = ["ReportSubject", "render_report"]

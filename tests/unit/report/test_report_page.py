"""The report page: self-contained, deterministic, and drawn from the aggregates."""

from __future__ import annotations

import re
from typing import Any
from xml.etree import ElementTree

from decisionmodel.api.status import EvaluationStatus
from decisionmodel.report import ReportSubject, render_report

SUBJECT = ReportSubject("team-a", "fraud<x>", "status of team-a/fraud")


def _status(**change: Any) -> EvaluationStatus:
    wire: dict[str, Any] = {
        "revision": "0123456789abcdef",
        "accuracy": "0.8800",
        "baselineAccuracy": "0.9000",
        "ece": "0.0700",
        "baselineEce": "0.0300",
        "brier": "0.1100",
        "baselineBrier": "0.0900",
        "cases": 50,
        "failedCases": 6,
        "result": "Failed",
        "reason": "EvaluationFailed",
        "gates": {
            "minAccuracy": "0.85",
            "maxAccuracyDrop": "0.01",
            "maxECE": "0.10",
            "maxECEIncrease": "0.05",
        },
        "reliability": [
            {"count": 0, "correct": 0, "confidenceSum": "0.0000"},
            *({"count": 0, "correct": 0, "confidenceSum": "0.0000"} for _ in range(5)),
            {"count": 10, "correct": 5, "confidenceSum": "6.5000"},
            {"count": 20, "correct": 15, "confidenceSum": "15.0000"},
            {"count": 0, "correct": 0, "confidenceSum": "0.0000"},
            {"count": 70, "correct": 68, "confidenceSum": "66.5000"},
        ],
        "confusion": [
            {"kind": "noul", "expected": "false", "predicted": "false", "count": 40},
            {"kind": "noul", "expected": "true", "predicted": "false", "count": 3},
            {"kind": "noul", "expected": "true", "predicted": "none", "count": 1},
            {"kind": "choice", "expected": "option 1", "predicted": "option 2", "count": 2},
        ],
    }
    wire.update(change)
    return EvaluationStatus.model_validate(wire)


def _svg(page: str) -> ElementTree.Element:
    match = re.search(r"<svg id=\"reliability\".*?</svg>", page, re.S)
    assert match, "no reliability diagram"
    return ElementTree.fromstring(match.group(0))


NS = "{http://www.w3.org/2000/svg}"


def test_the_page_is_deterministic_and_loads_nothing() -> None:
    page = render_report(SUBJECT, _status())
    assert page == render_report(SUBJECT, _status())
    assert "<script" not in page
    # The only URL is the SVG namespace: no stylesheet, font, image or script is fetched.
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]
    assert "fraud&lt;x&gt;" in page and "fraud<x>" not in page


def test_the_diagram_has_a_bar_and_a_dot_per_non_empty_bin_and_the_diagonal() -> None:
    svg = _svg(render_report(SUBJECT, _status()))
    bars = svg.findall(f"{NS}rect[@class='bar']")
    assert [b.get("data-bin") for b in bars] == ["6", "7", "9"]
    assert [b.get("data-count") for b in bars] == ["10", "20", "70"]
    assert len(svg.findall(f"{NS}circle[@class='confidence']")) == 3
    assert len(svg.findall(f"{NS}line[@class='diagonal']")) == 1
    counts = [t.text for t in svg.findall(f"{NS}text[@class='count']")]
    assert counts == ["n=10", "n=20", "n=70"]
    assert svg.find(f"{NS}text[@class='ece']").text == "ECE 0.0700"  # type: ignore[union-attr]


def test_a_bar_is_as_high_as_the_bins_accuracy() -> None:
    svg = _svg(render_report(SUBJECT, _status()))
    frame = svg.find(f"{NS}rect[@class='frame']")
    assert frame is not None
    size, bottom = (
        float(frame.get("height", 0)),
        float(frame.get("y", 0)) + float(frame.get("height", 0)),
    )
    heights = [float(b.get("height", 0)) for b in svg.findall(f"{NS}rect[@class='bar']")]
    assert [round(h / size, 3) for h in heights] == [0.5, 0.75, round(68 / 70, 3)]
    dot = svg.findall(f"{NS}circle[@class='confidence']")[0]
    # bin 6: mean confidence 0.65, accuracy 0.5
    assert float(dot.get("cy", 0)) == round(bottom - 0.5 * size, 1)


def test_figures_and_gates_against_the_baseline() -> None:
    page = render_report(SUBJECT, _status())
    gates = re.search(r'<table id="gates">.*?</table>', page, re.S)
    assert gates
    rows = re.findall(r"<tr><th>(\w+)</th><td>([^<]*)</td><td>([^<]*)</td><td[^>]*>(\w+)", gates[0])
    assert rows == [
        ("minAccuracy", "0.85", "0.8800", "pass"),
        ("maxAccuracyDrop", "0.01", "drop 0.0200", "fail"),
        ("maxECE", "0.10", "0.0700", "pass"),
        ("maxECEIncrease", "0.05", "increase 0.0400", "pass"),
    ]
    assert "<tr><th>Brier</th><td>0.1100</td><td>0.0900</td></tr>" in page


def test_relative_gates_without_a_baseline_say_so() -> None:
    page = render_report(SUBJECT, _status(baselineAccuracy=None, baselineEce=None))
    assert page.count("not checked (no baseline)") == 2


def test_confusion_tables_per_question_type() -> None:
    page = render_report(SUBJECT, _status())
    tables = re.findall(r'<table class="confusion" data-kind="(\w+)">', page)
    assert tables == ["noul", "choice"]
    noul = re.search(r'data-kind="noul">.*?</table>', page, re.S)
    assert noul and "<th>none</th>" in noul[0]
    # columns false, true, none; row "true": 3 answered false, none true, 1 unanswered
    assert re.search(r"<tr><th>true</th><td[^>]*>3</td><td>·</td><td[^>]*>1</td></tr>", noul[0])


def test_an_evaluation_without_aggregates_still_renders() -> None:
    page = render_report(SUBJECT, _status(reliability=None, confusion=None))
    assert "No reliability bins were recorded" in page
    assert "No confusion counts were recorded" in page


def test_the_evidence_of_an_evaluation_with_confidence_and_bin_whiskers() -> None:
    import random
    from decimal import Decimal

    from decisionmodel.evaluation.case_records import CaseRecord
    from decisionmodel.evaluation.decision import SliceGates, decide
    from decisionmodel.evaluation.gates import EvaluationGates
    from decisionmodel.evaluation.scoring import PairOutcome

    rng = random.Random(3)

    def rec(right: bool, slice: str) -> CaseRecord:
        return CaseRecord.of([PairOutcome(right, 0.8, right)], slice)

    stable = [rec(rng.random() < 0.9, "a<b>" if i % 2 else "plain") for i in range(200)]
    cand = [rec(r.right and i % 20 != 0, r.slice or "") for i, r in enumerate(stable)]
    decision = decide(
        EvaluationGates.model_validate({"minAccuracy": "0.80", "maxNegativeFlipRate": "0.01"}),
        Decimal("0.95"),
        cand,
        stable,
        ("d" * 64, "c", "s"),
        SliceGates(min_accuracy="0.7", min_cases=50),
    )
    page = render_report(
        ReportSubject("ns", "dm", "status"),
        _status(decision=decision.model_dump(mode="json"), result=decision.result.value),
    )
    assert 'id="decision"' in page and 'id="intervals"' in page and 'id="slices"' in page
    assert "maxNegativeFlipRate" in page and "negative flips" in page
    assert "a&lt;b&gt;" in page and "a<b>" not in page  # escaped
    assert decision.evidence in page
    svg = _svg(page)
    whiskers = svg.findall(f"{NS}line[@class='interval']")
    assert len(whiskers) == 3  # one per non-empty bin
    point_gates = render_report(ReportSubject("ns", "dm", "status"), _status())
    assert "without intervals" in point_gates

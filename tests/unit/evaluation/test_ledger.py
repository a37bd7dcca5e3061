"""The evaluation ledger (issue 35 item 4): a revision's sequential test continues across
evaluations on the cases it has not counted, so retries and added cases cannot buy a pass."""

from __future__ import annotations

import json
import random
from decimal import Decimal

import pytest

from activities.evaluate_sequential import Decided, SequentialRun
from controller.cli.verbs import _verdict_lines
from decisionmodel.api.status import EvaluationDecisionStatus
from decisionmodel.evaluation import parse_dataset
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decision import EvaluationDecision, FigureInterval, GateDecision
from decisionmodel.evaluation.gates import EvaluationGates
from decisionmodel.evaluation.ledger import (
    LEDGER_REVISIONS,
    LedgerEntry,
    entry_of,
    prefix_digests,
    start,
    with_entry,
)
from decisionmodel.evaluation.sequential import SequentialGate
from decisionmodel.evaluation.sequential_decision import decide_sequential
from decisionmodel.vocabulary import EvaluationResult
from kube.rollout_status import ledger_of, ledger_with


def dataset(n: int, first: int = 0) -> bytes:
    lines = [
        json.dumps(
            {
                "state": {"i": i},
                "questions": {"q": {"type": "noul"}},
                "expected": {"q": True},
            }
        )
        for i in range(first, first + n)
    ]
    return ("\n".join(lines) + "\n").encode()


def record(right: bool) -> CaseRecord:
    return CaseRecord(pairs=1, correct=int(right), brier=0.0, points=(), rights=(right,))


def run_on(raw: bytes, entries: list[LedgerEntry], threshold: str = "0.7",
           confidence: str = "0.95") -> SequentialRun:  # fmt: skip
    return SequentialRun.begin(entries, "rev1", threshold, confidence, raw, parse_dataset(raw))


def feed(test: SequentialRun, outcomes: list[bool]) -> int:
    """Feed until the test decides; the cases it used."""
    used = 0
    for right in outcomes:
        used += 1
        try:
            test.feed(record(right))
        except Decided:
            break
    return used


def test_prefix_digests_survive_appended_cases_and_change_with_an_edit() -> None:
    short, longer = dataset(10), dataset(10) + dataset(5, first=10)
    a, b = (
        prefix_digests(short, parse_dataset(short)),
        prefix_digests(longer, parse_dataset(longer)),
    )
    assert len(a) == 11 and len(b) == 16 and a == b[:11]
    edited = short.replace(b'"i": 3', b'"i": 33')
    c = prefix_digests(edited, parse_dataset(edited))
    assert c[:4] == a[:4] and all(x != y for x, y in zip(c[4:], a[4:], strict=True))


def test_a_clearly_good_candidate_stops_early() -> None:
    raw = dataset(500)
    test = run_on(raw, [])
    rng = random.Random(1)
    used = feed(test, [rng.random() < 0.95 for _ in range(500)])
    assert test.decided and test.gate.verdict() == EvaluationResult.PASSED
    entry = test.entry()
    assert entry.cases == used < 100 and entry.this_evaluation == used
    assert entry.stopped_early and entry.dataset_cases == 500 and entry.evaluations == 1
    assert "stopped after" in entry.line()


def test_a_retry_on_the_same_dataset_counts_nothing_again() -> None:
    raw = dataset(60)
    first = run_on(raw, [])
    feed(first, [i % 10 < 7 for i in range(60)])  # exactly at the gate: undecided
    entry = first.entry()
    assert entry.verdict == EvaluationResult.INCONCLUSIVE and entry.cases == 60
    again = run_on(raw, [entry])
    assert again.begun.offset == 60 and again.unseen(parse_dataset(raw)) == []
    same = again.entry()
    assert same.cases == 60 and same.this_evaluation == 0 and same.evaluations == 2
    assert same.pass_evidence == entry.pass_evidence and same.verdict == entry.verdict
    assert "append cases" in same.line()


def test_appended_cases_continue_the_test_as_one_long_run() -> None:
    rng = random.Random(7)
    outcomes = [i % 10 < 7 for i in range(60)] + [rng.random() < 0.8 for _ in range(60)]
    raw60, raw120 = dataset(60), dataset(120)
    first = run_on(raw60, [])
    feed(first, outcomes[:60])
    continued = run_on(raw120, [first.entry()])
    unseen = continued.unseen(parse_dataset(raw120))
    assert [c.index for c in unseen] == list(range(60))  # renumbered from 0
    assert unseen[0].state == {"i": 60}
    feed(continued, outcomes[60:])
    whole = run_on(raw120, [])
    feed(whole, outcomes)
    assert continued.gate.evidence() == pytest.approx(whole.gate.evidence(), rel=1e-12)
    assert continued.entry().cases == whole.entry().cases


def test_lowered_confidence_keeps_the_strictest_bar() -> None:
    raw = dataset(30)
    first = run_on(raw, [], confidence="0.99")
    feed(first, [True] * 5)
    later = run_on(dataset(60), [first.entry()], confidence="0.9")
    assert later.begun.confidence == Decimal("0.99")
    assert later.entry().confidence == "0.99"
    assert later.gate.alpha == pytest.approx(0.005)


@pytest.mark.parametrize(
    ("threshold", "raw", "why"),
    [
        ("0.8", dataset(60), "minAccuracy changed from 0.7"),
        ("0.7", dataset(60, first=1), "no longer starts with the 30 cases"),
        ("0.7", dataset(20), "now gives fewer cases than the 30"),
    ],
)
def test_another_hypothesis_or_dataset_starts_a_new_test_and_says_why(
    threshold: str, raw: bytes, why: str
) -> None:
    first = run_on(dataset(30), [])
    feed(first, [True, False] * 15)
    other = run_on(raw, [first.entry()], threshold=threshold)
    assert other.begun.offset == 0 and other.begun.restarted is not None
    assert why in other.begun.restarted and why in other.entry().line()
    assert other.entry().evaluations == 1  # a new test counts its own evaluations


def test_the_ledger_keeps_the_newest_revisions_first_and_round_trips_status() -> None:
    entries: list[LedgerEntry] = []
    for i in range(LEDGER_REVISIONS + 2):
        gate = SequentialGate(threshold=0.5, side="min", alpha=0.025).after(1.0)
        begun = start([], f"rev{i}", "0.5", Decimal("0.95"), ["a", "b"])
        entries = with_entry(entries, entry_of(begun, gate, f"rev{i}", "0.5", ["a", "b"]))
    assert len(entries) == LEDGER_REVISIONS and entries[0].revision == f"rev{LEDGER_REVISIONS + 1}"
    status = {"evaluationLedger": ledger_with({}, entries[0])}
    assert "datasetPrefix" in status["evaluationLedger"][0]
    assert ledger_of(status) == [entries[0]]
    assert ledger_of({"evaluationLedger": [{"revision": "x"}]}) == []  # unreadable: left out


def test_a_heartbeat_gate_is_resumed_only_at_its_own_prefix() -> None:
    raw = dataset(60)
    test = run_on(raw, [])
    feed(test, [True, False, True])
    wire = test.gate.to_wire()
    fresh = run_on(raw, [])
    fresh.resume(wire, 3)
    assert fresh.gate == test.gate
    fresh.resume(wire, 0)  # the phase restarted from its first case
    assert fresh.gate.cases == 0


def test_the_decision_record_shows_the_test_and_seals_without_it_as_before() -> None:
    raw = dataset(200)
    test = run_on(raw, [])
    used = feed(test, [True] * 200)
    records = [record(True)] * used
    gates = EvaluationGates.model_validate({"minAccuracy": "0.7"})
    decision = decide_sequential(gates, test.entry(), test.gate, records, None, ("d", "r"))
    assert decision.result == EvaluationResult.PASSED and decision.sequential is not None
    [gate] = decision.gates
    assert gate.sequential and gate.interval.cases == used
    assert any("sequential test:" in line for line in decision.lines())
    # A record without the sequential fields seals to the digest it had before they existed
    # (computed with the code before them): approvals given then still match.
    interval = FigureInterval(
        figure="accuracy", estimate="0.9", lower="0.8", upper="0.95", cases=10, method="wilson"
    )
    plain = GateDecision(gate="minAccuracy", interval=interval, threshold="0.7", side="min",
                         verdict=EvaluationResult.PASSED)  # fmt: skip
    sealed = EvaluationDecision(
        confidence="0.95", result=EvaluationResult.PASSED, gates=[plain], dataset_digest="d"
    ).sealed()
    assert sealed.evidence == "16322d4b80eb936b"


def test_a_retried_attempt_starts_where_its_evaluation_did_not_from_its_own_result() -> None:
    """The status write of an evaluation's result can land before its attempt is lost: the
    retried attempt must not continue the test from that result (one evaluation counted
    twice) but from where the evaluation began, carried in its heartbeat."""
    raw = dataset(60)
    first = run_on(raw, [])
    feed(first, [i % 10 < 7 for i in range(60)])
    written = first.entry()  # already in status when the attempt is retried
    carried = first.begun.to_wire()
    retried = SequentialRun.begin(
        [written], "rev1", "0.7", "0.95", raw, parse_dataset(raw), carried
    )
    assert retried.begun.offset == 0 and retried.begun.evaluations == 0
    assert retried.begun.gate == first.begun.gate


def test_dmrollout_status_shows_the_test_apart_from_the_gates() -> None:
    raw = dataset(100)
    test = run_on(raw, [])
    used = feed(test, [True] * 100)
    gates = EvaluationGates.model_validate({"minAccuracy": "0.7"})
    decision = decide_sequential(
        gates, test.entry(), test.gate, [record(True)] * used, None, ("d",)
    )
    wire = EvaluationDecisionStatus.model_validate(decision.model_dump(mode="json"))
    lines = _verdict_lines(wire.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert lines[1].startswith("  gate       minAccuracy Passed")
    assert lines[-1].startswith("  test       sequential test: ") and "stopped after" in lines[-1]
